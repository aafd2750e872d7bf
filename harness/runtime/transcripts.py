"""Transcripts: what went over a connection both ways, with times, as evidence behind a row.

The text form escapes every byte that is not printable ASCII and cuts long data; the JSON form
keeps a bounded prefix of each event's bytes with its full size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from conformance import vectors

Direction = Literal["send", "recv", "close", "timeout", "note"]

# How much of one event's bytes a transcript shows (text) and keeps in JSON.
TEXT_SHOWN = 300
JSON_SHOWN = 4096

_MARKS: dict[str, str] = {
    "send": ">",
    "recv": "<",
    "close": "closed:",
    "timeout": "timeout:",
    "note": "note:",
}
_ESCAPES = {0x0D: "\\r", 0x0A: "\\n", 0x09: "\\t", 0x5C: "\\\\"}


def escape(data: bytes) -> str:
    """Printable ASCII as is; CR, LF, tab and backslash as escapes; other bytes as \\xNN."""
    return "".join(_ESCAPES.get(b) or (chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}") for b in data)


@dataclass(frozen=True)
class TranscriptEvent:
    at: float  # seconds since the script's first connection was opened
    direction: Direction
    data: bytes  # the bytes sent or received; for the other directions, a description
    connection: str = ""  # which of a script's connections; "" when it has one


@dataclass
class Transcript:
    events: list[TranscriptEvent] = field(default_factory=list)

    def text(self) -> str:
        """One line per event: time in ms, direction, the bytes escaped (long data truncated)."""
        lines = []
        for event in self.events:
            shown = escape(event.data[:TEXT_SHOWN])
            if len(event.data) > TEXT_SHOWN:
                shown += f"... ({len(event.data)} bytes in all)"
            on = f"[{event.connection}] " if event.connection else ""
            lines.append(f"  +{event.at * 1000:.1f}ms {on}{_MARKS[event.direction]} {shown}")
        return "\n".join(lines)

    def to_json(self) -> list[dict[str, Any]]:
        """JSON-ready events; data as a vector bytes value, cut to its first JSON_SHOWN bytes."""
        return [
            {
                "at_ms": round(event.at * 1000, 3),
                "direction": event.direction,
                "size": len(event.data),
                "data": vectors.encode_bytes(event.data[:JSON_SHOWN]),
                "truncated": len(event.data) > JSON_SHOWN,
                **({"connection": event.connection} if event.connection else {}),
            }
            for event in self.events
        ]
