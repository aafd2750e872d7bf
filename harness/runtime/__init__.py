"""What the harness runs on: its state directory, processes, containers, builds, transcripts and
the bounds it keeps on what a target sends. Shared by the server and the client halves; no
protocol logic and nothing about a particular kind of target."""
