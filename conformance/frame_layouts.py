"""Frame layouts: how the suite lays NATS bytes out in WebSocket frames, so that a frame need not
hold whole operations. websocket.txt: "For writers of client libraries: a WebSocket frame is not
guaranteed to contain a full NATS protocol (actually will generally not). Any data from a frame
must be going through a parser that can handle partial protocols."

A layout is data (a ``frames.layout`` vector, vectors/README.md): where the bytes are cut
(``cut``), which operations share the first frame with them (``join``), whether the frames are
messages of their own or the fragments of one message (``fragments``: a first frame, then
continuation frames), and the transport whose frames carry them (``ws``, or ``ws-deflate`` for
deflated frames). Pure: bytes in, the frames' payloads out.

- ``every-byte``: one byte per frame;
- ``control-line``: every control line cut at its middle (the line with its line end);
- ``payload``: every payload cut at its middle (the payload with the CRLF after it), so it
  applies only to bytes with a PUB, HPUB, MSG or HMSG;
- ``none``: the bytes in one frame (with ``join``, several operations in one frame).

Lines and payloads are located leniently (``regions``), not validated: a line runs to its LF (or
the end of the bytes), and a line whose first token is PUB, HPUB, MSG or HMSG and whose last
token is a decimal number is followed by that many payload bytes and their CRLF (cut short at the
end of the bytes). Bytes that break the protocol are cut at the same places, so a parser meets
the bad bytes split as well. A layout that has nowhere to cut the bytes (no payload, one byte)
does not apply: the case gets no row in it (``frames`` gives None).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .transport_model import DEFLATE_OFFERED

KIND = "frames.layout"  # the vector kind that defines a layout
DELIVERED_KIND = "protocol.parse"  # the kind whose bytes the layouts deliver, to either role
NOTED = 8  # the sizes of a layout's first frames a transcript notes
CUTS = ("every-byte", "control-line", "payload", "none")
JOINABLE = ("PONG", "INFO")  # INFO: the INFO line the connection was greeted with, again
_PONG = b"PONG\r\n"
LINE, PAYLOAD = "line", "payload"
_PAYLOAD_OPS = (b"PUB", b"HPUB", b"MSG", b"HMSG")
# The direction of the bytes a layout cuts (protocol.Direction's values) -> the role whose parser
# reads them: a server's bytes are a client library's to parse, and the reverse.
READER = {"server": "client", "client": "server"}


@dataclass(frozen=True)
class Region:
    """A control line or a payload of some bytes: ``data[start:end]``."""

    start: int
    end: int
    kind: str  # LINE or PAYLOAD


def _payload_size(line: bytes) -> int | None:
    """The payload size a control line announces (its last token), for a payload operation."""
    tokens = line.split()
    if len(tokens) < 2 or tokens[0].upper() not in _PAYLOAD_OPS or not tokens[-1].isdigit():
        return None
    return int(tokens[-1])


def regions(data: bytes) -> list[Region]:
    """The control lines and payloads of ``data``, in order, covering it whole."""
    out: list[Region] = []
    pos, end = 0, len(data)
    while pos < end:
        nl = data.find(b"\n", pos)
        stop = end if nl < 0 else nl + 1
        out.append(Region(pos, stop, LINE))
        size = _payload_size(data[pos:stop]) if nl >= 0 else None
        pos = stop
        if size is not None and pos < end:
            stop = min(pos + size + 2, end)  # the payload and its CRLF
            out.append(Region(pos, stop, PAYLOAD))
            pos = stop
    return out


def cuts(data: bytes, cut: str) -> list[int]:
    """Where ``cut`` cuts ``data``: offsets strictly inside it, ascending."""
    if cut == "every-byte":
        return list(range(1, len(data)))
    if cut == "none":
        return []
    kind = {"control-line": LINE, "payload": PAYLOAD}.get(cut)
    if kind is None:
        raise ValueError(f"unknown cut {cut!r}: one of {', '.join(CUTS)}")
    middles = (r.start + (r.end - r.start) // 2 for r in regions(data) if r.kind == kind)
    return [at for at in middles if 0 < at < len(data)]


def frames(data: bytes, cut: str, before: bytes = b"") -> list[bytes] | None:
    """The frames' payloads of ``data`` cut by ``cut``, with ``before`` (joined operations) at the
    start of the first frame; None when the cut has nowhere to cut ``data`` (the layout does not
    apply). The frames concatenate to ``before + data``, and none is empty."""
    at = cuts(data, cut)
    if not data or (cut != "none" and not at):
        return None
    pieces = [data[a:b] for a, b in zip([0, *at], [*at, len(data)], strict=True)]
    return [before + pieces[0], *pieces[1:]]


def joined(join: Iterable[str], info: bytes) -> bytes:
    """The operations ``join`` names, as bytes: ``info`` is the connection's INFO line."""
    unknown = [op for op in join if op not in JOINABLE]
    if unknown:
        raise ValueError(f"cannot join {unknown[0]!r}: one of {', '.join(JOINABLE)}")
    return b"".join(info if op == "INFO" else _PONG for op in join)


@dataclass(frozen=True)
class Layout:
    """One layout, as its ``frames.layout`` vector defines it."""

    name: str  # what the rows call it (``<row>~<name>@<transport>``)
    reader: str  # the role whose parser reads the frames: client or server
    cut: str
    join: tuple[str, ...]
    transport: str  # ws, or ws-deflate: every frame deflated (permessage-deflate)
    fragments: bool = False  # the frames are one message's fragments (continuation frames)

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Layout:
        """The layout of a ``frames.layout`` vector's ``input``."""
        return cls(
            name=data["layout"],
            reader=READER[data["direction"]],
            cut=data["cut"],
            join=tuple(data.get("join", ())),
            transport=data["transport"],
            fragments=bool(data.get("fragments", False)),
        )

    def frames(self, data: bytes, info: bytes = b"") -> list[bytes] | None:
        """``data`` in this layout (``info``: the connection's INFO line, where ``join`` names
        INFO); None when the layout does not apply to it."""
        return frames(data, self.cut, joined(self.join, info))

    def applies(self, sends: Sequence[bytes]) -> bool:
        """Whether the layout has somewhere to cut any of ``sends`` (one case's bytes)."""
        return any(frames(data, self.cut) is not None for data in sends)

    def unsendable(self, deflating: bool) -> str | None:
        """Why the layout's frames cannot go over a connection that negotiated permessage-deflate
        or not (``deflating``); None: they can. A deflated layout needs it negotiated (a driver
        may declare compression its library did not offer)."""
        if self.transport == DEFLATE_OFFERED and not deflating:
            return "no permessage-deflate negotiated: the frames would not be deflated"
        return None


def frames_note(sent: Sequence[bytes]) -> str:
    """How a transcript notes a layout's frames: how many, and the sizes of the first ones."""
    sizes = ", ".join(str(len(frame)) for frame in sent[:NOTED])
    more = ", ..." if len(sent) > NOTED else ""
    return f"in the layout's {len(sent)} WebSocket frame(s) of {sizes}{more} bytes"


class LayoutCase(Protocol):
    """What ``defined`` reads of a vector case (``conformance.vectors.Case``)."""

    @property
    def kind(self) -> str: ...

    @property
    def roles(self) -> list[str]: ...

    @property
    def data(self) -> dict[str, Any]: ...


CaseT = TypeVar("CaseT", bound=LayoutCase)


def defined(cases: Iterable[CaseT], role: str) -> list[tuple[CaseT, Layout]]:
    """Each ``frames.layout`` case among ``cases`` for ``role`` (client or server), with its
    layout, in order."""
    return [
        (case, Layout.of(case.data["input"]))
        for case in cases
        if case.kind == KIND and role in case.roles
    ]
