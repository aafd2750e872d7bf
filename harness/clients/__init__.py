"""The client half of the harness: client libraries through their driver programs (the driver
protocol, the library registry and builds), the fake server, the scripted checks, the
client-role vectors, the interop matrix and the NATS Streaming clients."""
