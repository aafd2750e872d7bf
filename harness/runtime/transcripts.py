"""Transcripts: what went over a connection both ways, with times, as evidence behind a row.

The text form escapes every byte that is not printable ASCII and cuts long data; the JSON form
keeps a bounded prefix of each event's bytes with its full size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ...conformance import vectors

Direction = Literal["send", "recv", "close", "timeout", "note"]

# How much of one event's bytes a transcript shows (text) and keeps in JSON.
TEXT_SHOWN = 300
JSON_SHOWN = 4096
# What a transcript keeps in memory, whatever a peer sends: each event's first EVENT_KEPT bytes
# (with its full size), and events until KEPT_BYTES of data or KEPT_EVENTS events; past that it
# only counts what it did not keep.
EVENT_KEPT = 64 << 10
KEPT_BYTES = 1 << 20
KEPT_EVENTS = 10_000

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
    data: bytes  # the bytes sent or received (a prefix); for the other directions, a description
    connection: str = ""  # which of a script's connections; "" when it has one
    size: int = -1  # how many bytes the event had (-1: len(data), nothing was cut)

    @property
    def full_size(self) -> int:
        return len(self.data) if self.size < 0 else self.size


@dataclass
class Transcript:
    events: list[TranscriptEvent] = field(default_factory=list)
    kept_bytes: int = 0
    dropped_events: int = 0  # past the bounds: counted, not kept
    dropped_bytes: int = 0

    def add(self, at: float, direction: Direction, data: bytes, connection: str = "") -> None:
        """Record an event within the bounds (see EVENT_KEPT, KEPT_BYTES, KEPT_EVENTS)."""
        carries_bytes = direction in ("send", "recv")  # notes, closes, timeouts: always short
        if len(self.events) >= KEPT_EVENTS or (carries_bytes and self.kept_bytes >= KEPT_BYTES):
            self.dropped_events += 1
            self.dropped_bytes += len(data)
            return
        room = KEPT_BYTES - self.kept_bytes if carries_bytes else EVENT_KEPT
        kept = data[: min(EVENT_KEPT, max(room, 0))]
        self.kept_bytes += len(kept)
        size = len(data) if len(kept) < len(data) else -1
        self.events.append(TranscriptEvent(at, direction, kept, connection, size))

    def text(self) -> str:
        """One line per event: time in ms, direction, the bytes escaped (long data truncated)."""
        lines = []
        for event in self.events:
            shown = escape(event.data[:TEXT_SHOWN])
            if event.full_size > TEXT_SHOWN:
                shown += f"... ({event.full_size} bytes in all)"
            on = f"[{event.connection}] " if event.connection else ""
            lines.append(f"  +{event.at * 1000:.1f}ms {on}{_MARKS[event.direction]} {shown}")
        if self.dropped_events:
            lines.append(
                f"  ... {self.dropped_events} more events ({self.dropped_bytes} bytes) not kept"
            )
        return "\n".join(lines)

    def to_json(self) -> list[dict[str, Any]]:
        """JSON-ready events; data as a vector bytes value, cut to its first JSON_SHOWN bytes."""
        return [
            {
                "at_ms": round(event.at * 1000, 3),
                "direction": event.direction,
                "size": event.full_size,
                "data": vectors.encode_bytes(event.data[:JSON_SHOWN]),
                "truncated": event.full_size > JSON_SHOWN,
                **({"connection": event.connection} if event.connection else {}),
            }
            for event in self.events
        ]
