"""The server half of the harness: target specs and their kinds, launching servers, the wire
runner that plays vectors' scripts against them, the deviant proxies that measure the suite,
JetStream names and the real NATS Streaming server."""
