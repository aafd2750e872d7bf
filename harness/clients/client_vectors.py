"""Every client-role vector against a client library: a role is a promise.

Each vector whose ``roles`` name ``client`` gives rows for every client library, one per *path*
by which the case reaches the library (the row id is ``<vector id>@<path>``):

- ``decode``, ``encode``, ``op``: the library's own header parser, encoder and header API;
- ``validate``: the library's own subject or name validation: what it answers is an observation
  (``info``) unless the quoted statement asks clients to validate (``judge.validator_level``);
  what the documents constrain is what goes on the wire (the paths below). These paths ask one
  driver command each; the kind declares it (``conformance.vector_kinds``: its ``LibraryCall``),
  so they have no code of their own here;
- ``hmsg`` (and ``hmsg-survives``): the fake server delivers the header block in an HMSG to a
  subscription of the library; for blocks the documents reject or leave open (status lines), a
  row of its own, at the case's level at most, says whether the connection lived on: closing it
  or reporting an error is the library's choice (observed), hanging or losing the valid message
  after the block on a connection that still answers is not;
- ``publish``, ``subscribe``, ``request``: the library is asked to use the subject against the
  fake server, and what went on the wire (as the reference parses it) is judged: refused
  locally, sent unchanged, or turned into other bytes;
- ``hpub``: the library publishes the headers of an encode case to the fake server, and the
  header block on the wire is judged as its encoder's is (a status line is no input of a
  publish: such a case is not asked).

A path gives rows only for the cases it can ask (a subscribe subject is not published); a case no
path reaches gets one ``skip`` row that says so, so the gap shows in every report.

Transport is a dimension of the run, as for servers: the paths through the fake server (``wire``)
and the client scripts run over each transport of the run (``harness.runtime.streams``), the
others (the library's own code, the JetStream API on a real server) over plain TCP only. A tcp
row keeps its id; another transport's row is ``<row id>@<transport>``
(``conformance.transports.row_id``). A transport whose capabilities the driver lacks gives skip
rows without asking. Over a WebSocket transport a ``protocol.parse`` case is also sent in the
frames of each client frame layout the bundled ``frames.layout`` vectors define
(``conformance.frame_layouts``; row ``<id>@receive~<layout>@<transport>``, at the lower of the
two cases' levels).
A path whose capability the driver lacks (driver protocol 2 declares them in ``hello``) skips its
cases without asking; a case the driver answers ``unsupported`` is skipped with the driver's
reason (drivers also say it of single inputs their library cannot express), one it answers
``invalid`` is an error, and a driver that crashes or hangs gives the case in flight a row of
its own (robustness when the library died on what the fake server sent it): ``driver.rule``.
Judging is ``conformance.judge``'s; this module only drives the library and collects answers.
Every judged row carries what the library did (``Found.observed``, canonical).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from ...conformance import frame_layouts, headers, judge, protocol, vectors
from ...conformance.judge import Judgement, Malformed, Rejected
from ...conformance.transports import DEFAULT_TRANSPORT, row_id
from ...conformance.vector_kinds import KINDS, LibraryCall, driver_block, status_line_limit
from ...conformance.verdicts import (
    CONFORMANCE,
    ROBUSTNESS,
    derived_level,
    observation,
)
from ..results import CaseRef, Checked, Found
from ..runtime import lanes
from . import jetstream as client_jetstream
from . import scripts as client_scripts
from .driver import DriverError, DriverReply
from .driver_session import (
    QUIET,
    STEP,
    Link,
    PathRun,
    Session,
    Verdict,
    connected,
    event_is,
)
from .fake_server import (
    HEADER_BLOCK,
    FakeConnection,
    HeadersNotEnabled,
    answer_requests,
    hmsg_op,
    msg_op,
)
from .fake_server import encode as encode_op
from .patience import (
    HANG_AFTER,
    QUIET_FLOOR,
    look_for_more,
    patience,
)

if TYPE_CHECKING:
    from .client_targets import ClientTarget

# Driver error types that mean the connection is in trouble, not the input.
TROUBLE = frozenset({"connection", "timeout"})
HEADERS_SUBJECT = "conformance.headers"
HPUB_SUBJECT = "conformance.hpub"  # the hpub path publishes each case to HPUB_SUBJECT.<case id>
AFTER = b"after"  # payload of the MSG sent behind a header block: its delivery proves survival


@dataclass(frozen=True)
class RowSpec:
    suffix: str  # the path's name, after "@" in the row id
    level: str
    layout: str = ""  # the WebSocket frame layout the row's bytes travel in (its row id says it)
    source: vectors.Source | None = None  # the statement the row rests on, if not the case's


@dataclass(frozen=True)
class ClientPath:
    """One way a case of some kind reaches a library."""

    name: str
    capability: str | None  # what a protocol-2 driver must declare; None: every driver
    how: str  # the start of the row's description
    run: Callable[[PathRun, vectors.Case], Iterable[tuple[str, Judgement]]]
    # Whether the path is a way to ask this case at all (a subscribe subject is not published);
    # a path that does not apply gives no row.
    applies: Callable[[vectors.Case], bool] = lambda case: True
    # Why the driver protocol or a library API cannot ask this case (a skip row), or None.
    limit: Callable[[vectors.Case], str | None] = lambda case: None
    rows: Callable[[vectors.Case], list[RowSpec]] | None = None  # default: one at case level
    # Through the fake server: the path runs over every transport of the run (else tcp only).
    wire: bool = False

    def row_specs(self, case: vectors.Case) -> list[RowSpec]:
        return self.rows(case) if self.rows else [RowSpec(self.name, case.level)]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _trouble(answer: DriverReply) -> Verdict:
    """A failed answer that says nothing about the input: something went wrong (an error)."""
    return Verdict("error", f"{answer.error_type}: {answer.error_message}")


def _refusal(answer: DriverReply) -> Rejected:
    """A failed answer as a rejection of the input; the connection or driver failing is not."""
    if answer.error_type in TROUBLE:
        raise _trouble(answer)
    return Rejected(f"{answer.error_type}: {answer.error_message}")


# --- the library's own code, no connection: the path a kind's LibraryCall declares ------------


def _asked(call: LibraryCall) -> ClientPath:
    """The path ``call`` declares (conformance.vector_kinds): one driver command, no code of its
    own here."""
    return ClientPath(
        call.path, call.command, call.how, partial(_ask, call),
        limit=lambda case: call.limit(case.data["input"]),
        rows=partial(_validator_rows, call.path) if call.validator else None,
    )  # fmt: skip


def _ask(call: LibraryCall, r: PathRun, case: vectors.Case) -> Iterator[tuple[str, Judgement]]:
    inp = case.data["input"]
    answer = r.s.call(call.command, **call.arguments(inp))
    if answer.ok:
        got = call.answer(answer.result)
    elif call.refuses:
        got = _refusal(answer)
    else:
        raise _trouble(answer)
    yield call.path, call.judge(inp, case.data["expect"], got)


def _validator_rows(path: str, case: vectors.Case) -> list[RowSpec]:
    """The library's own validator: an observation unless the quote asks clients to validate."""
    return [RowSpec(path, judge.validator_level(case.level, case.source.quote))]


# --- end to end: the fake server and what went on the wire ------------------------------------


def _hpub(r: PathRun, case: vectors.Case) -> Iterator[tuple[str, Judgement]]:
    """Publish the case's headers through the library: the block of the HPUB it sends (a PUB
    carries none), or its refusal, judged as its encoder's is (``judge.judge_encoded_block``)."""
    expect = case.data["expect"]
    link = r.link("hpub")
    conn, _ = link.get()
    subject = f"{HPUB_SUBJECT}.{case.id}"
    after = conn.count()
    answer = r.s.call(
        "publish", subject=subject, reply=None, headers=case.data["input"]["headers"],
        payload_b64=_b64(b"x"),
    )  # fmt: skip
    if not answer.ok:
        yield "hpub", judge.judge_encoded_block(expect, _refusal(answer))
        return
    op = conn.wait_for(
        protocol.Pub | protocol.HPub,  # type: ignore[arg-type]
        timeout=QUIET if "error" in expect else STEP,
        after=after,
        match=lambda o: o.subject == subject,
    )
    if op is None:
        link.broken = True
        if "error" in expect:
            yield "hpub", Judgement("pass", "accepted by the API but nothing sent", {"sent": None})
            return
        raise Verdict("fail", f"no HPUB on the wire ({conn.parse_error or 'none came'})")
    if "error" in expect:
        link.broken = True  # what follows headers the documents refuse is not judged
    # A PUB carries no block: b"" is no block the documents give.
    block = op.headers if isinstance(op, protocol.HPub) else b""
    yield "hpub", judge.judge_encoded_block(expect, block)


def _headers_only(case: vectors.Case) -> bool:
    """A publish gives a library header fields, never a status line."""
    return status_line_limit(case.data["input"]) is None


def _uncertain_block(case: vectors.Case) -> bool:
    """A block the documents reject, or a status line they leave open."""
    expect = case.data["expect"]
    return "error" in expect or expect.get("status") is not None


def _hmsg_rows(case: vectors.Case) -> list[RowSpec]:
    rows = [RowSpec("hmsg", case.level)]
    if _uncertain_block(case):
        rows.append(RowSpec("hmsg-survives", derived_level(case.level, "must")))
    return rows


def _hmsg(r: PathRun, case: vectors.Case) -> Iterator[tuple[str, Judgement]]:
    """Deliver the block in an HMSG, then a plain MSG on the same subscription: the MSG arriving
    proves that the connection survived and that the HMSG was delivered or dropped before it."""
    s, link = r.s, r.link("hmsg", HEADERS_SUBJECT)
    conn, sid = link.get()
    s.discard_events()  # what earlier cases left behind
    block = vectors.decode_bytes(case.data["input"]["block"])
    try:
        conn.send(hmsg_op(HEADERS_SUBJECT, sid, block, b"x") + msg_op(HEADERS_SUBJECT, sid, AFTER))
    except HeadersNotEnabled as exc:  # a protocol-1 driver does not say it lacks headers
        raise Verdict("skip", str(exc)) from None
    received: list[dict[str, Any]] = []
    sent = time.monotonic()
    wait = patience(r.round_trips.typical(), STEP)
    arrived = _until_after(s, link.sub, sent + wait, received)
    if arrived:
        r.round_trips.add(time.monotonic() - sent)
        state = "usable"
    else:
        state = _probe(conn, wait, s.seen())
        # Not delivered can fail the hmsg row (a block the documents accept): the messages get
        # the full deadline to arrive (a library may answer PINGs on one thread and deliver on
        # another).
        if state == "answers" and _until_after(
            s, link.sub, time.monotonic() + HANG_AFTER, received
        ):
            state = "usable"
    if state != "usable":
        link.broken = True
    seen = s.seen()
    errors = [e for e in seen if e.get("event") == "error"]
    delivered = next((e for e in received if _payload(e) != AFTER), None)
    got: headers.HeaderBlock | Rejected
    if delivered is not None:
        got = driver_block(delivered)
    else:
        said = "; ".join(str(e.get("message")) for e in errors) or "no error reported"
        got = Rejected(f"not delivered ({said})")
    observed = {
        "delivered": None if delivered is None else judge.view(driver_block(delivered)),
        "errors": [_error_view(e) for e in errors],
        "connection": state,
    }
    yield "hmsg", replace(judge.judge_header_block(case.data["expect"], got), observed=observed)
    if _uncertain_block(case):
        yield "hmsg-survives", replace(_survival(state, errors, wait), observed=observed)


def _until_after(s: Session, sub: str, deadline: float, received: list[dict[str, Any]]) -> bool:
    """Take the library's messages on ``sub`` into ``received`` until the AFTER message came
    (True), the connection closed or ``deadline`` passed."""
    while not received or _payload(received[-1]) != AFTER:
        remaining = deadline - time.monotonic()
        event = s.wait_event(
            event_is("message", sub=sub), timeout=remaining, stop=event_is("closed")
        )
        if event is None:
            return False
        received.append(event)
    return True


def _payload(event: dict[str, Any]) -> bytes:
    return base64.b64decode(event.get("payload_b64") or "")


def _error_view(event: dict[str, Any]) -> dict[str, str]:
    """An error the library reported, for an observation (its words without times or ports)."""
    return {"type": str(event.get("type")), "message": judge.steady(str(event.get("message")))}


def _probe(conn: FakeConnection, wait: float, seen: list[dict[str, Any]]) -> str:
    """What became of a connection whose next message did not arrive: ``closed`` (by the
    library), ``answers`` (a PING from the fake server gets its PONG) or ``silent``."""
    if conn.closed_by_client or any(e.get("event") == "closed" for e in seen):
        return "closed"
    after = conn.count()
    # Silent would be a hang, a robustness claim: a second PING (the first may end a line the
    # block left open) and the full deadline after it.
    for waited in (wait, HANG_AFTER):
        conn.send(encode_op(protocol.Ping()))
        if conn.wait_for(protocol.Pong, timeout=waited, after=after) is not None:
            return "answers"
        if conn.closed_by_client:
            return "closed"
    return "silent"


def _survival(state: str, errors: list[dict[str, Any]], waited: float) -> Judgement:
    """Whether the connection lived on after a block the documents reject or leave open. The
    documents do not say what a client does with such a block from a server: closing the
    connection, dropping the message (or the valid one after it) or reporting an error is the
    library's choice (observed). A connection that neither delivers, answers a PING nor closes
    (a hang) is a robustness failure."""
    said = "; ".join(str(e.get("message")) for e in errors) or "no error reported"
    if state == "usable":
        return Judgement("pass", "the connection stayed usable (the next message arrived)")
    if state == "closed":
        return Judgement("pass", f"the library closed the connection ({said})")
    if state == "answers":
        return Judgement(
            "pass",
            f"the connection answers a PING; the valid message sent after the block was not "
            f"delivered within {waited + HANG_AFTER:.2g} s ({said})",
        )
    return Judgement(
        "fail",
        f"the library hung: the next message did not arrive within {waited:.2g} s, two PINGs "
        f"got no PONG within {waited + HANG_AFTER:g} s and the connection stayed open ({said})",
        category=ROBUSTNESS,
    )


def _wire_op(
    r: PathRun, link: Link, conn: FakeConnection, after: int, answer: DriverReply, kind: Any
) -> protocol.Op | Rejected | Malformed:
    """What the library put on the wire after ``after`` for a call answered by ``answer``: the
    first operation of ``kind``; a rejection when it refused before sending; ``Malformed`` when
    what went out does not parse."""
    if not answer.ok and answer.error_type not in TROUBLE:
        # A refusal may follow bytes already buffered: a flush writes them out, and its PING on
        # the wire comes after them.
        flushed = _timed_flush(r)
        conn.wait_for(protocol.Ping, timeout=patience(flushed, QUIET, QUIET_FLOOR), after=after)
    # An operation with an invalid subject parses as an error that carries the operation.
    found = conn.wait_for(
        kind | protocol.ProtocolError,
        timeout=STEP if answer.ok else 0.0,
        after=after,
        match=lambda e: not isinstance(e, protocol.ProtocolError) or isinstance(e.op, kind),
    )
    op = found.op if isinstance(found, protocol.ProtocolError) else found
    if op is not None:
        return op
    if conn.parse_error is not None:
        link.broken = True
        return Malformed(f"{conn.parse_error.reason}: {conn.parse_error.detail}")
    if not answer.ok and answer.error_type in TROUBLE:
        link.broken = True
        raise _trouble(answer)
    if not answer.ok:
        return _refusal(answer)
    return Rejected("the library accepted the call but sent nothing")


def _wire_subject(
    r: PathRun,
    link: Link,
    conn: FakeConnection,
    after: int,
    answer: DriverReply,
    kind: Any,
    field: str,
) -> str | Rejected | Malformed:
    """The ``field`` (subject or reply) of what ``_wire_op`` finds; no reply at all reads as an
    empty one (the wire cannot carry an empty reply token)."""
    op = _wire_op(r, link, conn, after, answer, kind)
    if isinstance(op, Rejected | Malformed):
        return op
    return getattr(op, field) or ""


def _publish(r: PathRun, case: vectors.Case) -> Iterator[tuple[str, Judgement]]:
    inp = case.data["input"]
    link = r.link("publish")
    conn, _ = link.get()
    subject, reply = (
        ("conformance.reply", inp["subject"]) if inp["use"] == "reply" else (inp["subject"], None)
    )
    after = conn.count()
    answer = r.s.call("publish", subject=subject, reply=reply, headers=None, payload_b64="")
    field = "reply" if reply is not None else "subject"
    sent = _wire_subject(r, link, conn, after, answer, protocol.Pub | protocol.HPub, field)
    yield "publish", judge.judge_sent_subject(case.data["expect"], inp["subject"], sent)


def _subscribe(r: PathRun, case: vectors.Case) -> Iterator[tuple[str, Judgement]]:
    inp = case.data["input"]
    link = r.link("subscribe")
    conn, _ = link.get()
    after = conn.count()
    answer = r.s.call("subscribe", subject=inp["subject"], queue=None)
    sent = _wire_subject(r, link, conn, after, answer, protocol.Sub, "subject")
    yield "subscribe", judge.judge_sent_subject(case.data["expect"], inp["subject"], sent)


def _request(r: PathRun, case: vectors.Case) -> Iterator[tuple[str, Judgement]]:
    inp = case.data["input"]
    link = r.link("request", reactions=[answer_requests(HEADER_BLOCK)])
    conn, _ = link.get()
    after = conn.count()
    # The fake server answers at once; the answer is not judged (what went out is), so the
    # library's own timeout follows the requests answered so far.
    started = time.monotonic()
    answer = r.s.call(
        "request", subject=inp["subject"], headers=None, payload_b64="",
        timeout_ms=int(patience(r.round_trips.typical(), STEP) * 1000),
    )  # fmt: skip
    if answer.ok:
        r.round_trips.add(time.monotonic() - started)
    elif answer.error_type == "timeout":
        answer = DriverReply(True, {}, None, None)  # judged by what went out, not the answer
    sent = _wire_subject(r, link, conn, after, answer, protocol.Pub | protocol.HPub, "subject")
    yield "request", judge.judge_sent_subject(case.data["expect"], inp["subject"], sent)


# Operations a client library sends: through its API (PING: by a flush), or (PONG) to answer
# the fake server's PING. CONNECT is the library's own; the other operations only a server sends.
API_OPS = frozenset({"PUB", "HPUB", "SUB", "UNSUB", "PING", "PONG"})


def _send_applies(case: vectors.Case) -> bool:
    return case.data["input"]["op"]["op"] in API_OPS


def _send_limit(case: vectors.Case) -> str | None:
    op = case.data["input"]["op"]
    if op["op"] == "HPUB" and _header_pairs(op) is None:
        return "the header block is not header fields a client API can be given"
    return None


def _header_pairs(op: dict[str, Any]) -> list[list[str]] | None:
    block = headers.parse_block(vectors.decode_bytes(op.get("headers", ""), "input.op.headers"))
    if isinstance(block, headers.HeaderError) or block.status is not None:
        return None
    return [[name, value] for name, value in block.fields]


def _send_needs(op: protocol.Op) -> str | None:
    """The capability asking the library for ``op`` takes beyond the basics, if any: a library
    whose hello does not declare it is not asked (a flush without its round trip need not
    send a PING at all)."""
    if isinstance(op, protocol.HPub):
        return "headers"
    if isinstance(op, protocol.Sub) and op.queue is not None:
        return "queue_groups"
    if isinstance(op, protocol.Unsub) and op.max_msgs is not None:
        return "unsubscribe_max"
    return "flush_roundtrip" if isinstance(op, protocol.Ping) else None


def _send(r: PathRun, case: vectors.Case) -> Iterator[tuple[str, Judgement]]:
    """Ask the library to send the case's operation; judge the operation it put on the wire."""
    fields = case.data["input"]["op"]
    asked = protocol.op_from_fields(vectors.op_pattern(fields, "input.op"))
    need = _send_needs(asked)
    if need is not None and (lacking := r.s.client.lacks(need)) is not None:
        raise Verdict("skip", lacking)
    link = r.link("send")
    conn, _ = link.get()
    chosen = frozenset()
    kind: Any = type(asked)
    if isinstance(asked, protocol.Unsub):
        handle, sid = _subscribe_all(r, conn, 1).popitem()
        asked = protocol.Unsub(sid, asked.max_msgs)
        after = conn.count()
        answer = r.s.call("unsubscribe", sub=handle, max=asked.max_msgs)
    elif isinstance(asked, protocol.Sub):
        after, chosen = conn.count(), frozenset({"sid"})
        answer = r.s.call("subscribe", subject=asked.subject, queue=asked.queue)
    elif isinstance(asked, protocol.Ping):
        after = conn.count()
        answer = r.s.call("flush", timeout_ms=int(STEP * 1000))
    elif isinstance(asked, protocol.Pong):
        after = conn.count()
        conn.send(encode_op(protocol.Ping()))
        answer = DriverReply(True, {}, None, None)  # nothing asked of the driver
    else:
        after, kind = conn.count(), protocol.Pub | protocol.HPub
        answer = r.s.call(
            "publish", subject=asked.subject, reply=asked.reply,
            headers=_header_pairs(fields) if isinstance(asked, protocol.HPub) else None,
            payload_b64=_b64(asked.payload),
        )  # fmt: skip
    sent = _wire_op(r, link, conn, after, answer, kind)
    yield "send", judge.judge_sent_op(case.data["expect"], asked, sent, chosen=chosen)


def _needed_sids(case: vectors.Case) -> set[str]:
    return {str(e["sid"]) for e in judge.expected_deliveries(case.data["expect"]["events"])}


def _subscribe_all(r: PathRun, conn: FakeConnection, count: int) -> dict[str, str]:
    """``count`` subscriptions to ``>``: {driver handle: the sid the library put on the wire}."""
    handles = {}
    for _ in range(count):
        after = conn.count()
        answer = r.s.call("subscribe", subject=">", queue=None)
        sub = conn.wait_for(protocol.Sub, timeout=STEP, after=after) if answer.ok else None
        if sub is None:
            raise Verdict("error", f"could not subscribe: {answer.error_message or 'no SUB sent'}")
        handles[str(answer.result.get("sub"))] = sub.sid
    return handles


def _input_bytes(case: vectors.Case) -> bytes:
    return vectors.decode_bytes(case.data["input"]["bytes"], "input.bytes")


def _receive(
    r: PathRun, case: vectors.Case, layout: frame_layouts.Layout | None = None
) -> Iterator[tuple[str, Judgement]]:
    """The fake server sends the case's bytes to a library subscribed (to ``>``) under the sids
    the case uses (in the frames of ``layout``, when given), then a PING: what the library
    delivers, answers, reports and closes."""
    inp, expect = case.data["input"], case.data["expect"]
    needed = _needed_sids(case)
    count = max([int(sid) for sid in needed if sid.isdigit()], default=1)
    limits = inp.get("limits", {})
    info = {"max_payload": limits["max_payload"]} if "max_payload" in limits else {}
    options = {} if inp.get("headers", True) else {"headers": False}
    with connected(r.s, options=options, info=info) as (server, conn):
        handles = _subscribe_all(r, conn, count)
        if not needed <= set(handles.values()):
            raise Verdict(
                "skip",
                f"the case needs sid(s) {sorted(needed)}; the library numbered its "
                f"subscriptions {sorted(handles.values())}",
            )
        rtt = _timed_flush(r)
        wanted = inp.get("headers", True)
        if conn.wait_connect(timeout=STEP) and conn.model.headers_enabled != wanted:
            raise Verdict(
                "skip",
                f"the case is for a connection with headers {_enabled(wanted)}; the library's "
                f"CONNECT left them {_enabled(conn.model.headers_enabled)}",
            )
        r.s.discard_events()
        after = conn.count()
        if layout is None:
            conn.send(_input_bytes(case))
        else:
            _send_framed(conn, layout, _input_bytes(case), server.info_line())
        sent = time.monotonic()
        probed = not expect.get("incomplete", False)
        pings = sum(1 for e in expect["events"] if e.get("op") == "PING")
        if probed:
            conn.send(encode_op(protocol.Ping()))
            _wait_pongs(r, conn, after, pings + 1, patience(rtt, STEP))
            if not _lively(r, conn, after, pings + 1):
                # No sign of life yet would be a hang, a robustness claim. A library still reading
                # a line the bytes left open (one ended by LF alone) takes the first PING as that
                # line's end: a second PING, and the full deadline, tell that from a library that
                # stopped reading.
                conn.send(encode_op(protocol.Ping()))
                _wait_pongs(r, conn, after, pings + 1, HANG_AFTER)
        else:
            # Anything of an unfinished operation delivered shows by then.
            time.sleep(patience(rtt, QUIET, QUIET_FLOOR))
        wanted = len(judge.expected_deliveries(expect["events"]))
        seen = _settle_deliveries(r, wanted, patience(rtt, QUIET), sent)
        reaction = judge.Reaction(
            delivered=tuple(_delivery(e, handles) for e in seen if e.get("event") == "message"),
            pongs=len([e for e in conn.events()[after:] if isinstance(e, protocol.Pong)]),
            errors=tuple(str(e.get("message")) for e in seen if e.get("event") == "error"),
            closed=conn.closed_by_client or any(e.get("event") == "closed" for e in seen),
            probed=probed,
        )
    yield "receive", judge.judge_reaction(expect, reaction)


def _send_framed(
    conn: FakeConnection, layout: frame_layouts.Layout, data: bytes, info: bytes
) -> None:
    """``data`` in ``layout``'s frames; a deflated layout over a connection that did not
    negotiate permessage-deflate is an error (the driver declares compression its library did
    not offer)."""
    problem = layout.unsendable(conn.stream.deflating)
    if problem:
        raise Verdict("error", problem)
    frames = layout.frames(data, info)
    assert frames is not None  # the path applies only where the layout does
    conn.send_frames(frames, fragments=layout.fragments)


def _enabled(on: bool) -> str:
    return "enabled" if on else "not enabled"


def _timed_flush(r: PathRun) -> float | None:
    """Flush (a PING the library sends and the fake server answers); the round trip it took,
    as the path judges it (None when the flush failed: nothing was observed)."""
    started = time.monotonic()
    answer = r.s.call("flush", timeout_ms=int(STEP * 1000))
    return r.round_trips.add(time.monotonic() - started) if answer.ok else r.round_trips.typical()


def _wait_pongs(r: PathRun, conn: FakeConnection, after: int, want: int, wait: float) -> None:
    """Until the client sent ``want`` PONGs after ``after``, closed, or ``wait`` passed."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not conn.closed_by_client:
        pongs = [e for e in conn.events()[after:] if isinstance(e, protocol.Pong)]
        if len(pongs) >= want or any(e.get("event") == "closed" for e in r.s.seen()):
            return
        time.sleep(0.01)


def _lively(r: PathRun, conn: FakeConnection, after: int, want: int) -> bool:
    """Whether the client showed a sign of life after ``after``: ``want`` PONGs, a close, or an
    error it reported."""
    pongs = [e for e in conn.events()[after:] if isinstance(e, protocol.Pong)]
    seen = r.s.seen()
    return (
        len(pongs) >= want
        or conn.closed_by_client
        or any(e.get("event") in ("closed", "error") for e in seen)
    )


def _settle_deliveries(r: PathRun, wanted: int, wait: float, sent: float) -> list[dict[str, Any]]:
    """The driver's events, once ``wanted`` messages arrived (a library may answer a PING before
    its message callbacks ran) or ``wait`` passed; then a look for more (the bytes were
    ``sent`` then)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if sum(1 for e in r.s.seen() if e.get("event") == "message") >= wanted:
            break
        time.sleep(0.01)
    return r.s.seen(timeout=look_for_more(time.monotonic() - sent))


def _delivery(event: dict[str, Any], handles: dict[str, str]) -> judge.Delivery:
    has_block = event.get("headers") is not None or event.get("status") is not None
    return judge.Delivery(
        sid=handles.get(str(event.get("sub")), f"handle {event.get('sub')}"),
        subject=str(event.get("subject")),
        reply=event.get("reply"),
        payload=_payload(event),
        block=driver_block(event) if has_block else None,
    )


def _receive_applies(case: vectors.Case) -> bool:
    return case.data["input"]["direction"] == "server"


def _useevent_is(*uses: str) -> Callable[[vectors.Case], bool]:
    return lambda case: case.data["input"]["use"] in uses


# The paths through a server, each with code of its own (the fake server; a real server's JetStream
# API). A kind's LibraryCall (conformance.vector_kinds) is its first path, before these.
SERVER_PATHS: dict[str, tuple[ClientPath, ...]] = {
    "headers.parse": (
        ClientPath("hmsg", "headers", "Delivered in an HMSG by the fake server", _hmsg,
                   rows=_hmsg_rows, wire=True),
    ),
    "headers.encode": (
        ClientPath("hpub", "headers", "Published to the fake server, the header block on the wire",
                   _hpub, _headers_only, wire=True),
    ),
    "subject.validate": (
        ClientPath("publish", None, "Published to the fake server", _publish,
                   _useevent_is("publish", "reply"), wire=True),
        ClientPath("subscribe", None, "Subscribed at the fake server", _subscribe,
                   _useevent_is("subscribe"), wire=True),
        ClientPath("request", "request", "Requested from the fake server", _request,
                   _useevent_is("publish"), wire=True),
    ),
    "protocol.encode": (
        ClientPath("send", None, "Sent through the library's API to the fake server", _send,
                   _send_applies, _send_limit, wire=True),
    ),
    "protocol.parse": (
        ClientPath("receive", None, "Sent by the fake server to the library", _receive,
                   _receive_applies, wire=True),
    ),
    "name.validate": (
        ClientPath(client_jetstream.SUFFIX, None,
                   "Created through the library's JetStream, key-value or object store API",
                   client_jetstream.run, client_jetstream.applies, client_jetstream.limit),
    ),
}  # fmt: skip
# Every path a client library is asked a case of each kind by, in the order of its rows.
PATHS: dict[str, tuple[ClientPath, ...]] = {
    name: (*(() if kind.library is None else (_asked(kind.library),)), *SERVER_PATHS.get(name, ()))
    for name, kind in KINDS.items()
    if kind.library is not None or name in SERVER_PATHS
}
NOT_REACHED = "client"  # the row suffix of a case no path reaches


def _not_yet(kind: str) -> str:
    """Why a case no path of its kind can ask gives a skip row (a CONNECT to encode, say)."""
    return f"no client path reaches this {kind} case yet"


# Why a kind of client-role cases that no path asks is not asked: every such kind is named here
# (tests/test_vector_kinds.py).
_STREAMING_ONLY = (
    "a core NATS client has no NATS Streaming API: the streaming client libraries run these "
    "cases (harness.clients.streaming_clients)"
)
NOT_REACHED_REASONS = {
    "streaming.client": _STREAMING_ONLY,
    "streaming.encode": _STREAMING_ONLY,
    "streaming.decode": _STREAMING_ONLY,
    "streaming.subject": _not_yet("streaming.subject"),
}


def client_cases(loaded: Iterable[vectors.Case]) -> list[vectors.Case]:
    """The cases every client library is checked with on its own: those whose roles name
    ``client``, except interop cases (the interop matrix runs those, a pair of libraries each)
    and frame layouts (every protocol.parse case runs in each: ``_framed``)."""
    apart = ("interop", frame_layouts.KIND)
    return [case for case in loaded if "client" in case.roles and case.kind not in apart]


def _result(
    case: vectors.Case,
    spec: RowSpec,
    how: str,
    outcome: str,
    message: str,
    ms: float,
    transcript: str = "",
    category: str = CONFORMANCE,
    *,
    observed: str = "",
    transport: str = DEFAULT_TRANSPORT,
) -> Checked:
    """A path's row over ``transport``: the one place a client vector row's ``Found`` is
    built."""
    description = f"{how} (vector {case.id}): {case.data['description']}"
    shown = transcript if outcome in ("fail", "error") else ""  # evidence, not for skips
    found = Found(outcome, message, round(ms, 3), shown, observed, category)
    rid = row_id(f"{case.id}@{spec.suffix}", transport, spec.layout)
    source = spec.source or case.source
    return Checked(CaseRef(rid, spec.level, source, description, case.group), found)


def _run_case(
    r: PathRun, path: ClientPath, case: vectors.Case, specs: list[RowSpec]
) -> list[Checked]:
    started = time.monotonic()
    r.s.begin_case()  # a call past driver_session.CASE_SECONDS ends the case as an error (Overrun)
    produced: dict[str, Judgement] = {}
    ending: Verdict | None = None
    try:
        for suffix, judgement in path.run(r, case):
            produced[suffix] = judgement
    except Verdict as verdict:
        ending = verdict
    except DriverError as exc:
        ending = Verdict.of_driver(exc, case.id)  # robustness when it died on the server's bytes
    except Exception as exc:  # a bug in a path: the other cases still run
        ending = Verdict("error", f"path {path.name} raised {type(exc).__name__}: {exc}")
    if (late := r.s.crashed()) is not None:  # the driver died during the case, unnoticed
        produced, ending = {}, Verdict.of_driver(late, case.id)
    ms = (time.monotonic() - started) * 1000
    out = []
    for spec in specs:
        got = produced.get(spec.suffix)
        observed, category = "", CONFORMANCE
        if got is not None:
            outcome, message, observed = got.outcome, got.message, observation(got.observed)
            category = got.category
        elif ending is not None:
            outcome, message, category = ending.outcome, ending.message, ending.category
        else:
            outcome, message = "error", "the path gave no verdict for this row"
        row = _result(case, spec, path.how, outcome, message, ms, r.s.transcript, category,
                      observed=observed, transport=r.s.transport)  # fmt: skip
        out.append(row)
    return out


def _by_kind(cases: Iterable[vectors.Case]) -> dict[str, list[vectors.Case]]:
    by_kind: dict[str, list[vectors.Case]] = {}
    for case in client_cases(cases):
        by_kind.setdefault(case.kind, []).append(case)
    return by_kind


def _unreached(cases: list[vectors.Case], paths: Sequence[ClientPath]) -> list[vectors.Case]:
    return [case for case in cases if not any(path.applies(case) for path in paths)]


def _paths(kind: str, transport: str) -> tuple[ClientPath, ...]:
    """The paths of ``kind`` over ``transport``: every one over plain TCP, those through the
    fake server over the others, and over a WebSocket transport the receive path in each frame
    layout that transport carries."""
    paths = PATHS.get(kind, ())
    if transport == DEFAULT_TRANSPORT:
        return paths
    delivered = kind == frame_layouts.DELIVERED_KIND
    framed = tuple(p for over, p in _framed() if over == transport and delivered)
    return tuple(p for p in paths if p.wire) + framed


@cache
def _framed() -> tuple[tuple[str, ClientPath], ...]:
    """The receive path in each frame layout the bundled ``frames.layout`` vectors give client
    libraries, with the transport it runs over."""
    defined = frame_layouts.defined(vectors.bundled_cases(), "client")
    return tuple((layout.transport, _framed_path(case, layout)) for case, layout in defined)


def _framed_path(of: vectors.Case, layout: frame_layouts.Layout) -> ClientPath:
    """``_receive`` in ``layout`` (vector ``of``): a row only for a case it has somewhere to cut
    (``Layout.applies``), at the lower of the two cases' levels, resting on the layout's
    statement."""

    def applies(case: vectors.Case) -> bool:
        return _receive_applies(case) and layout.applies([_input_bytes(case)])

    def rows(case: vectors.Case) -> list[RowSpec]:
        return [RowSpec("receive", derived_level(case.level, of.level), layout.name, of.source)]

    how = f"Sent by the fake server to the library in the frames of layout {layout.name} ({of.id})"
    return ClientPath(layout.name, None, how, partial(_receive, layout=layout), applies,
                      rows=rows, wire=True)  # fmt: skip


# Transports a library runs over at once: each lane is a driver process and a fake server of its
# own, and a driver's runtime (a JVM, Node.js) takes a core while it starts; more lanes than the
# cores would put command deadlines at the mercy of the machine's load.
CLIENT_LANES = 3


def run_client_vectors(
    client: ClientTarget,
    cases: list[vectors.Case],
    transports: tuple[str, ...] = (DEFAULT_TRANSPORT,),
) -> Iterator[Checked]:
    """Every client-role case through every path of its kind, over each of ``transports``, as
    rows in the order of ``planned_rows``, each as soon as it and every row before it are
    known. The transports run side by side (``CLIENT_LANES`` at a time), each with its own
    driver sessions and fake servers."""
    by_kind = _by_kind(cases)
    work = [partial(_over_transport, client, by_kind, transport) for transport in transports]
    return lanes.in_order(work, at_once=CLIENT_LANES)


def _over_transport(
    client: ClientTarget, by_kind: dict[str, list[vectors.Case]], transport: str
) -> Iterator[Checked]:
    """The rows of every case over one transport (a lane of ``run_client_vectors``)."""
    for kind, kind_cases in by_kind.items():
        if kind == client_scripts.KIND:
            yield from client_scripts.run_scripts(client, kind_cases, transport)
            continue
        if transport == DEFAULT_TRANSPORT:
            for case in _unreached(kind_cases, PATHS.get(kind, ())):
                reason = NOT_REACHED_REASONS.get(kind) or _not_yet(kind)
                yield _result(case, RowSpec(NOT_REACHED, case.level), "Not reached", "skip",
                              reason, 0.0)  # fmt: skip
        for path in _paths(kind, transport):
            cases_of = [c for c in kind_cases if path.applies(c)]
            yield from _run_path(client, path, cases_of, transport)


def planned_rows(
    cases: Iterable[vectors.Case], transports: tuple[str, ...] = (DEFAULT_TRANSPORT,)
) -> Iterator[tuple[str, str, vectors.Case]]:
    """(row id, level, case) of each row ``run_client_vectors`` gives ``cases`` over
    ``transports``, in its order: one per row of every path that applies, ``ID@client`` (over
    tcp) when none does, the case id for a client script; ``@<transport>`` added over a
    transport other than tcp."""
    by_kind = _by_kind(cases)
    for transport in transports:
        for kind, kind_cases in by_kind.items():
            if kind == client_scripts.KIND:
                scripts = client_scripts.script_cases(kind_cases, transport)
                yield from ((row_id(c.id, transport), c.level, c) for c in scripts)
                continue
            if transport == DEFAULT_TRANSPORT:
                for case in _unreached(kind_cases, PATHS.get(kind, ())):
                    yield f"{case.id}@{NOT_REACHED}", case.level, case
            for path in _paths(kind, transport):
                for case in (c for c in kind_cases if path.applies(c)):
                    for spec in path.row_specs(case):
                        rid = row_id(f"{case.id}@{spec.suffix}", transport, spec.layout)
                        yield rid, spec.level, case


def _run_path(
    client: ClientTarget, path: ClientPath, cases: list[vectors.Case], transport: str
) -> Iterator[Checked]:
    lacking = client.lacks_transport(transport)
    if lacking is None and path.capability:
        lacking = client.lacks(path.capability)
    with ExitStack() as stack:
        s = stack.enter_context(Session(client, transport))
        r = PathRun(s, stack)
        for case in cases:
            specs = path.row_specs(case)
            reason = lacking or path.limit(case)
            if reason is not None:
                for spec in specs:
                    yield _result(case, spec, path.how, "skip", reason, 0.0, transport=transport)
                continue
            yield from _run_case(r, path, case, specs)
