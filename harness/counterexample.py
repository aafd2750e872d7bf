"""Turn a counterexample of differential testing into a vector case, ready to commit.

A differential test sends the same client bytes to a real server and to the reference server model
and finds they answer differently. This module writes that exchange down in the vector format
(vectors/README.md): a ``protocol.session`` case whose ``wire`` script replays the client's writes,
one exchange per write, and expects what the REFERENCE answers, because expectations come from the
documents and the reference implements them. What the server did goes into the description and
``observed``. The level is ``info``: generated input has not been read against the documents by a
person yet; a maintainer who commits the case decides its level. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..conformance import protocol, server, vectors
from ..conformance.vectors import Source

GROUP = "protocol.differential"
TITLE = "Counterexamples found by differential testing against real servers"
NOTHING = "nothing"
UNORDERED = (
    "The expectation lists the copies of a message for several subscriptions in the "
    "reference's order (the order of the SUBs); the documents leave that order open, and a "
    "server that orders them otherwise differs from this case in order alone there. "
)


@dataclass(frozen=True)
class Counterexample:
    """What one property saw: the client's writes and what the server sent back for them all."""

    prop: str  # the property's short name, a case id part: [a-z0-9-]
    writes: tuple[bytes, ...]  # the client's bytes, one element per write
    server_events: tuple[protocol.Event, ...]  # parsed server ops, INFO and PING left out
    server_closed: bool
    server_name: str  # e.g. "nats-server 2.15.1"
    finding: str  # one sentence: what the property found


@dataclass(frozen=True)
class _Step:
    send: bytes
    answer: list[protocol.Op]
    closed: bool


def reference_steps(writes: Sequence[bytes]) -> list[_Step]:
    """The reference server model's answer to each write, in order.

    Writes after the model closes the connection are folded into the write that closed it: the
    script keeps every byte the client sent, and a runner cannot send on a closed connection.
    """
    model = server.ServerModel()
    steps: list[_Step] = []
    for i, data in enumerate(writes):
        answer = model.receive(data)
        if model.closed:
            steps.append(_Step(b"".join(writes[i:]), answer, True))
            break
        steps.append(_Step(data, answer, False))
    return steps


def copies_in_one_run(answer: Sequence[protocol.Op]) -> bool:
    """Whether consecutive deliveries (MSG/HMSG) go to more than one sid."""
    return any(
        is_delivery and len({op.sid for op in run}) > 1  # type: ignore[union-attr]
        for is_delivery, run in itertools.groupby(answer, key=_is_delivery)
    )


def _is_delivery(op: protocol.Op) -> bool:
    return isinstance(op, protocol.Msg | protocol.HMsg)


def summarize(events: Sequence[protocol.Event]) -> str:
    """Events as short text: each operation's control line, errors by reason."""
    return ", ".join(_summary(e) for e in events) or NOTHING


def _summary(event: protocol.Event) -> str:
    if isinstance(event, protocol.ProtocolError):
        return f"bytes that break the protocol ({event.reason})"
    data = protocol.encode(event)
    if isinstance(data, protocol.EncodeError):  # not encodable: show its fields instead
        return repr(protocol.op_fields(event))
    return data.split(protocol.CRLF, 1)[0].decode("utf-8", "backslashreplace")


def op_json(op: protocol.Op) -> dict[str, Any]:
    """An operation in the vector format, every field given (bytes as vector bytes values)."""
    return {
        k: vectors.encode_bytes(v) if k in vectors.BYTES_FIELDS else v
        for k, v in protocol.op_fields(op).items()
    }


def case_id(cx: Counterexample) -> str:
    """Stable for the same writes: a digest of the bytes and where the writes split them."""
    digest = hashlib.sha256(json.dumps([w.hex() for w in cx.writes]).encode()).hexdigest()
    return f"{GROUP}.{cx.prop}.{digest[:12]}"


def session_case(cx: Counterexample, source: Source) -> dict[str, Any]:
    """The counterexample as one ``protocol.session`` case expecting the reference's answer."""
    if not cx.writes:
        raise ValueError("a counterexample needs at least one write")
    steps = reference_steps(cx.writes)
    reference = [op for step in steps for op in step.answer]
    server_did = summarize(cx.server_events) + (", then closed" if cx.server_closed else "")
    reference_did = summarize(reference) + (", then closed" if steps[-1].closed else "")
    writes = "one write" if len(steps) == 1 else f"{len(steps)} writes"
    description = (
        f"Found by differential testing ({cx.prop}): {cx.finding} "
        f"In {writes}, {cx.server_name} sent: {server_did}. "
        f"The reference (the documents) sends: {reference_did}. "
        + (UNORDERED if any(copies_in_one_run(step.answer) for step in steps) else "")
        + "The expectation is the reference's answer; the level is info until a maintainer "
        "has read the case against the documents."
    )
    return {
        "id": case_id(cx),
        "description": description,
        "source": source.to_json(),
        "level": "info",
        "roles": ["reference", "server"],
        "kind": "protocol.session",
        "input": {},
        "expect": {},
        "wire": {
            "exchanges": [
                {
                    "send": vectors.encode_bytes(step.send),
                    "expect": [op_json(op) for op in step.answer],
                    "then": "closed" if step.closed else "open",
                }
                for step in steps
            ]
        },
        "observed": {cx.server_name: server_did},
        "tags": ["differential"],
    }


def vector_document(cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A whole vector file holding ``cases``."""
    return {"format": vectors.FORMAT, "group": GROUP, "title": TITLE, "cases": list(cases)}


def render(cx: Counterexample, source: Source) -> str:
    """The counterexample as the text of a vector file, to print for a maintainer."""
    return json.dumps(vector_document([session_case(cx, source)]), indent=1)
