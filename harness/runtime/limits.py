"""How much of what a target sends the harness reads or keeps: bounds that hold whatever a
target does."""

from __future__ import annotations

from ...conformance import protocol

# A client reading a server: generous limits, so only bytes that break the protocol are errors.
READ_LIMITS = protocol.Limits(max_control_line=1 << 20, max_payload=64 << 20)
