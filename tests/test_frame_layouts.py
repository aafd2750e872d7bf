"""Frame layouts (conformance.frame_layouts): seeded property-based splits of the layout function,
the layouts the vectors define and the rows they give, their frames over a real loopback
socket (wsproto on both ends, deflated frames with RSV1 set), and a negative control: a client
parser that takes only whole operations per frame fails the must rows of the split layouts and
passes them where the frames hold whole operations."""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Request
from wsproto.extensions import PerMessageDeflate

from nats_conformance.conformance import frame_layouts, headers, judge, protocol, vectors
from nats_conformance.conformance.frame_layouts import CUTS, LINE, PAYLOAD, Layout
from nats_conformance.conformance.transports import row_id, transport_of
from nats_conformance.harness.clients import client_vectors
from nats_conformance.harness.gate import Baseline
from nats_conformance.harness.runtime.streams import Stream, accept_stream, open_stream
from nats_conformance.harness.servers import runner

BUNDLED = vectors.bundled_cases()
CLIENT_LAYOUTS = frame_layouts.defined(BUNDLED, "client")
SERVER_LAYOUTS = frame_layouts.defined(BUNDLED, "server")
PARSE = [case for case in BUNDLED if case.kind == "protocol.parse"]
RECEIVED = [case for case in PARSE if case.data["input"]["direction"] == "server"]
INFO = b'INFO {"server_id":"X","max_payload":1048576}\r\n'
WAIT = 5.0

tokens = st.text("abcxyz.>*", min_size=1, max_size=6)
payloads = st.binary(max_size=40)


@st.composite
def operations(draw: st.DrawFn) -> protocol.Op:
    """An operation a server sends, through the reference encoder."""
    kind = draw(st.sampled_from(["MSG", "HMSG", "PING", "PONG", "OK", "INFO", "ERR"]))
    subject, sid = draw(tokens).strip(".") or "a", str(draw(st.integers(1, 99)))
    reply = draw(st.none() | st.just("r.1"))
    if kind == "MSG":
        return protocol.Msg(subject, sid, reply, draw(payloads))
    if kind == "HMSG":
        return protocol.HMsg(subject, sid, reply, b"NATS/1.0\r\nA: b\r\n\r\n", draw(payloads))
    if kind == "INFO":
        return protocol.Info({"server_id": draw(tokens)})
    if kind == "ERR":
        return protocol.Err("'Unknown Protocol Operation'")
    return {"PING": protocol.Ping(), "PONG": protocol.Pong(), "OK": protocol.Ok()}[kind]


def _encoded(op: protocol.Op) -> bytes:
    data = protocol.encode(op, any_headers=True)
    assert isinstance(data, bytes), data
    return data


# --- the layout function -------------------------------------------------------------------------


@seed(20261128)
@settings(max_examples=300)
@given(st.binary(max_size=200), st.sampled_from(CUTS), st.binary(max_size=20))
def test_frames_rebuild_the_bytes_and_none_is_empty(data: bytes, cut: str, before: bytes) -> None:
    out = frame_layouts.frames(data, cut, before)
    at = frame_layouts.cuts(data, cut)
    if out is None:  # nowhere to cut: no frames, no row
        assert not data or (cut != "none" and not at)
        return
    assert b"".join(out) == before + data
    assert all(out) and len(out) == len(at) + 1
    assert at == sorted(set(at)) and all(0 < a < len(data) for a in at)
    if cut == "every-byte":
        assert [len(f) for f in out[1:]] == [1] * (len(data) - 1)


@seed(20261128)
@given(st.binary(max_size=300))
def test_regions_cover_the_bytes_in_order(data: bytes) -> None:
    found = frame_layouts.regions(data)
    assert [r.start for r in found] == [0, *[r.end for r in found[:-1]]][: len(found)]
    assert (found[-1].end if found else 0) == len(data)
    assert all(r.end > r.start for r in found)
    for r in found:  # a line ends at its LF (or the bytes' end), and a payload follows a line
        if r.kind == LINE:
            assert b"\n" not in data[r.start : r.end - 1]
    kinds = [r.kind for r in found]
    assert all(a == LINE for a, b in itertools.pairwise(kinds) if b == PAYLOAD)


@seed(20261128)
@settings(max_examples=200)
@given(st.lists(operations(), min_size=1, max_size=8), st.sampled_from(CUTS))
def test_cuts_land_inside_the_lines_and_payloads_the_reference_reads(
    ops: list[protocol.Op], cut: str
) -> None:
    """On well-formed operations the regions are the reference parser's: a control line per
    operation and a payload for MSG and HMSG; a control-line cut lands strictly inside a line, a
    payload cut strictly inside a payload (with its CRLF), so the reference parser is inside an
    operation there; and fed the frames it reads what it reads of the whole."""
    encoded = [_encoded(op) for op in ops]
    data = b"".join(encoded)
    expected = []
    pos = 0
    for op, raw in zip(ops, encoded, strict=True):
        line_end = raw.index(b"\n") + 1
        expected.append((pos, pos + line_end, LINE))
        if isinstance(op, protocol.Msg | protocol.HMsg):
            expected.append((pos + line_end, pos + len(raw), PAYLOAD))
        pos += len(raw)
    assert [(r.start, r.end, r.kind) for r in frame_layouts.regions(data)] == expected
    kind = {"control-line": LINE, "payload": PAYLOAD}.get(cut)
    at = frame_layouts.cuts(data, cut)
    if kind is not None:
        wanted = [s + (e - s) // 2 for s, e, k in expected if k == kind]
        assert at == wanted
        assert all(any(s < a < e for s, e, k in expected if k == kind) for a in at)
        for a in at:
            parser = protocol.Parser(protocol.Direction.SERVER)
            parser.feed(data[:a])
            assert parser.incomplete, (cut, a, data)
    out = frame_layouts.frames(data, cut)
    if out is None:
        assert cut == "payload" and not any(k == PAYLOAD for *_, k in expected)
        return
    parser = protocol.Parser(protocol.Direction.SERVER)
    events = [e for frame in out for e in parser.feed(frame)]
    assert events == protocol.parse(data, protocol.Direction.SERVER)[0]


def _parser(inp: dict[str, object]) -> protocol.Parser:
    """The reference parser a protocol.parse case's input asks for."""
    limits = inp.get("limits", {})
    assert isinstance(limits, dict)
    return protocol.Parser(
        protocol.Direction(str(inp["direction"])), limits=protocol.Limits(**limits),
        headers=inp.get("headers", True) is True, pedantic=inp.get("pedantic", False) is True,
    )  # fmt: skip


@pytest.mark.parametrize("layout", [lay for _, lay in CLIENT_LAYOUTS + SERVER_LAYOUTS],
                         ids=lambda lay: f"{lay.reader}-{lay.name}")  # fmt: skip
def test_every_parse_case_reads_the_same_in_each_layout(layout: Layout) -> None:
    """The reference parser reads each protocol.parse case's bytes in a layout's frames as it
    reads them whole: a layout changes only where frames end."""
    for case in PARSE:
        inp = case.data["input"]
        data = vectors.decode_bytes(inp["bytes"])
        out = layout.frames(data, INFO)
        if out is None:  # no payload to cut inside; one byte (a lone LF) to cut nowhere
            assert layout.cut == "payload" or len(data) == 1, case.id
            continue
        whole, framed = _parser(inp), _parser(inp)
        joined = frame_layouts.joined(layout.join, INFO)
        want = [protocol.event_fields(e) for e in whole.feed(joined + data)]
        got = [protocol.event_fields(e) for frame in out for e in framed.feed(frame)]
        assert got == want, case.id  # the fields a vector compares (not the error's detail)
        assert framed.incomplete == whole.incomplete, case.id


def test_a_layout_with_nowhere_to_cut_gives_no_frames() -> None:
    assert frame_layouts.frames(b"PING\r\n", "payload") is None
    assert frame_layouts.frames(b"P", "every-byte") is None
    assert frame_layouts.frames(b"", "none") is None
    assert frame_layouts.frames(b"PING\r\n", "none", b"PONG\r\n") == [b"PONG\r\nPING\r\n"]
    with pytest.raises(ValueError, match="unknown cut"):
        frame_layouts.cuts(b"PING\r\n", "sideways")
    assert frame_layouts.joined(["PONG", "INFO"], INFO) == b"PONG\r\n" + INFO
    with pytest.raises(ValueError, match="cannot join"):
        frame_layouts.joined(["PING"], INFO)


# --- the layouts the vectors define, and their rows ----------------------------------------------


def test_the_vectors_define_each_layout_for_each_role_at_the_level_its_words_give() -> None:
    client = {layout.name: (case.level, layout.transport) for case, layout in CLIENT_LAYOUTS}
    server = {layout.name: (case.level, layout.transport) for case, layout in SERVER_LAYOUTS}
    # websocket.txt's sentence addresses writers of client libraries: must for them, info for
    # servers.
    assert client == {
        "byte-frames": ("must", "ws"), "split-line": ("must", "ws"),
        "split-payload": ("must", "ws"), "joined": ("must", "ws"),
        "deflated": ("must", "ws-deflate"), "fragments": ("must", "ws"),
    }  # fmt: skip
    assert set(server) == set(client) - {"joined"}
    assert {level for level, _ in server.values()} == {"info"}
    joined = next(layout for _, layout in CLIENT_LAYOUTS if layout.name == "joined")
    assert joined.join == ("PONG", "INFO") and joined.cut == "none"
    fragmented = [lay.name for _, lay in CLIENT_LAYOUTS + SERVER_LAYOUTS if lay.fragments]
    assert fragmented == ["fragments", "fragments"]
    for case, _ in CLIENT_LAYOUTS + SERVER_LAYOUTS:
        assert vectors.evaluate(case) is None
        assert case.source.document == "websocket.txt"


def test_a_layout_for_the_wrong_role_is_a_vector_problem() -> None:
    case, _ = SERVER_LAYOUTS[0]
    wrong = vectors.Case(case.file, case.group, {**case.data, "roles": ["reference", "client"]})
    problem = vectors.evaluate(wrong)
    assert problem is not None and problem.field == "roles"


@given(st.sampled_from(CLIENT_LAYOUTS))
def test_client_rows_in_each_layout_say_it_and_take_the_lower_level(
    defined: tuple[vectors.Case, Layout],
) -> None:
    layout_case, layout = defined
    rows = list(client_vectors.planned_rows(RECEIVED, (layout.transport,)))
    mine = {rid: level for rid, level, _ in rows if f"~{layout.name}@" in rid}
    for case in RECEIVED:
        rid = row_id(f"{case.id}@receive", layout.transport, layout.name)
        data = vectors.decode_bytes(case.data["input"]["bytes"])
        if layout.frames(data, INFO) is None:
            assert rid not in mine
            continue
        assert mine[rid] == (case.level if layout_case.level == "must" else layout_case.level)
        assert rid == f"{case.id}@receive~{layout.name}@{layout.transport}"
        # Read back as the row it lays out: what a baseline says of that row holds for it.
        assert transport_of(rid) == (f"{case.id}@receive", layout.transport)
    # A layout's rows over another transport: none.
    other = "ws-deflate" if layout.transport == "ws" else "ws"
    assert not [r for r, _, _ in client_vectors.planned_rows(RECEIVED, (other,))
                if f"~{layout.name}@" in r]  # fmt: skip


def test_server_rows_in_each_layout_are_info_and_rest_on_websocket_txt() -> None:
    cases = runner.server_cases(vectors.load_all([vectors.BUNDLED_DIR]))
    rows = [r for r in runner.server_rows(cases, ("ws", "ws-deflate")) if r.framed is not None]
    assert {r.framed.layout.name for r in rows if r.framed} == {
        lay.name for _, lay in SERVER_LAYOUTS
    }
    for r in rows:
        assert r.level == "info" and r.case.kind == "protocol.parse"
        assert r.id == f"{r.case.id}~{r.framed.layout.name}@{r.transport}"  # type: ignore[union-attr]
        assert transport_of(r.id) == (r.case.id, r.transport)
        ref = r.ref()
        assert ref.source is not None and ref.source.document == "websocket.txt"


@given(st.sampled_from(CLIENT_LAYOUTS + SERVER_LAYOUTS), st.sampled_from(["c.1", "c.1@receive"]))
def test_a_layout_row_takes_the_baseline_entry_of_the_row_it_lays_out(
    defined: tuple[vectors.Case, Layout], base: str
) -> None:
    """The same deviation in frames is the implementation's, listed once under its tcp row;
    another case's entry covers nothing."""
    _, layout = defined
    entry = {"class": "deviation", "reason": "fail"}
    baseline = Baseline({"x": {"1": {base: entry}}})
    rid = row_id(base, layout.transport, layout.name)
    assert baseline.entry("x", "1", rid) == entry and baseline.inherited("x", "1", rid)
    assert baseline.entry("x", "1", row_id("c.2", layout.transport, layout.name)) is None


def test_a_layout_row_id_needs_a_websocket_transport() -> None:
    assert row_id("a.b@receive", "ws", "byte-frames") == "a.b@receive~byte-frames@ws"
    with pytest.raises(ValueError, match="WebSocket"):
        row_id("a.b", "tcp", "byte-frames")


# --- over a real socket: wsproto on both ends ----------------------------------------------------


@dataclass(frozen=True)
class Header:
    """What a WebSocket frame's header says (RFC 6455 5.2)."""

    fin: bool
    rsv1: bool
    opcode: int  # 2: binary, 0: continuation
    size: int


def _frame_headers(raw: bytes) -> list[Header]:
    """The header of each WebSocket frame in ``raw``."""
    out, pos = [], 0
    while pos < len(raw):
        first, second = raw[pos], raw[pos + 1]
        size, pos = second & 0x7F, pos + 2
        if size == 126:
            size, pos = int.from_bytes(raw[pos : pos + 2], "big"), pos + 2
        elif size == 127:
            size, pos = int.from_bytes(raw[pos : pos + 8], "big"), pos + 8
        pos += (4 if second & 0x80 else 0) + size
        out.append(Header(bool(first & 0x80), bool(first & 0x40), first & 0x0F, size))
    assert pos == len(raw)
    return out


def _as_laid_out(got: list[Header], layout: Layout, count: int) -> None:
    """``got`` are ``count`` frames as ``layout`` sends them: each a binary message of its own,
    or one message's fragments (binary, then continuation frames, only the last final); deflated
    (RSV1, on a message's first frame) over ws-deflate."""
    assert len(got) == count
    deflated = layout.transport == "ws-deflate"
    for i, header in enumerate(got):
        first = i == 0 or not layout.fragments
        assert header.fin == (not layout.fragments or i == count - 1)
        assert header.opcode == (2 if first else 0)
        assert header.rsv1 == (deflated and first)


@contextmanager
def _pair(transport: str) -> Iterator[tuple[Stream, socket.socket, WSConnection]]:
    """The suite's server-side stream (``accept_stream``, as the fake server makes it) and a raw
    wsproto client on the other end of a loopback connection, upgraded."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        peer = socket.create_connection(listener.getsockname(), timeout=WAIT)
        client = WSConnection(ConnectionType.CLIENT)
        extensions = [PerMessageDeflate()] if transport == "ws-deflate" else []
        peer.sendall(client.send(Request(host="127.0.0.1", target="/", extensions=extensions)))
        sock, _ = listener.accept()
        stream = accept_stream(sock, transport, timeout=WAIT)
        try:
            client.receive_data(peer.recv(1 << 16))
            assert any(isinstance(e, AcceptConnection) for e in client.events())
            yield stream, peer, client
        finally:
            stream.close()
            peer.close()


def _read_raw(peer: socket.socket, frames: int) -> bytes:
    """Raw bytes from ``peer`` until they hold ``frames`` whole frames."""
    raw = b""
    while True:
        try:
            if len(_frame_headers(raw)) >= frames:
                return raw
        except (IndexError, AssertionError):
            pass  # a frame not whole yet
        data = peer.recv(1 << 16)
        assert data, "closed early"
        raw += data


@pytest.mark.parametrize("defined", CLIENT_LAYOUTS, ids=lambda d: d[1].name)
def test_a_layouts_frames_arrive_as_those_frames(defined: tuple[vectors.Case, Layout]) -> None:
    """What the fake server's stream sends in a layout a wsproto client reads back frame by
    frame, each a whole message; over ws-deflate every frame is compressed (RSV1 set)."""
    _, layout = defined
    data = b"MSG foo 1 5\r\nhello\r\nPING\r\nMSG bar 2 0\r\n\r\n"
    frames = layout.frames(data, INFO)
    assert frames is not None
    with _pair(layout.transport) as (stream, peer, client):
        stream.send_frames(frames, timeout=WAIT, fragments=layout.fragments)
        raw = _read_raw(peer, len(frames))
        _as_laid_out(_frame_headers(raw), layout, len(frames))
        client.receive_data(raw)
        messages = [e for e in client.events() if isinstance(e, BytesMessage)]
    assert [m.data for m in messages] == frames
    assert [m.message_finished for m in messages][-1]
    assert all(m.message_finished for m in messages) or layout.fragments


@pytest.mark.parametrize("limit", [0, 7])
@pytest.mark.parametrize("name", ["split-line", "deflated", "fragments"])
def test_a_clients_frames_reach_the_server_as_those_frames(name: str, limit: int) -> None:
    """The wire client's stream (``open_stream``) sends a server layout's frames, masked and
    (over ws-deflate) compressed, each a message a wsproto server reads whole; with a frame limit
    (the server's max_payload: nats-server refuses a compressed frame that inflates beyond it),
    a frame above it is cut at it too."""
    layout = next(lay for _, lay in SERVER_LAYOUTS if lay.name == name)
    transport = layout.transport
    cut = layout.frames(b'CONNECT {"verbose":false}\r\nPUB foo 5\r\nhello\r\nPING\r\n')
    assert cut is not None and len(cut) > 2
    frames = [f[i : i + limit] for f in cut for i in range(0, len(f), limit)] if limit else cut
    assert all(len(f) <= (limit or len(f)) for f in frames)
    got: list[BytesMessage] = []
    raw = bytearray()
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            sock, _ = listener.accept()
            with sock:
                server = WSConnection(ConnectionType.SERVER)
                while not got or not got[-1].message_finished or len(got) < len(frames):
                    data = sock.recv(1 << 16)
                    if not data:
                        return
                    if server.state.name == "OPEN":
                        raw.extend(data)
                    server.receive_data(data)
                    for event in server.events():
                        if isinstance(event, Request):
                            accepted = [PerMessageDeflate()] if event.extensions else []
                            sock.sendall(server.send(AcceptConnection(extensions=accepted)))
                        elif isinstance(event, BytesMessage):
                            got.append(event)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        host, port = listener.getsockname()
        stream = open_stream(transport, host, port, timeout=WAIT)
        try:
            if limit:
                stream.limit_frames(limit)
            stream.send_frames(cut, timeout=WAIT, fragments=layout.fragments)
            thread.join(WAIT)
        finally:
            stream.close()
    assert b"".join(m.data for m in got) == b"".join(frames)
    if not layout.fragments:  # a fragment's data may come in other pieces than its frame's
        assert [m.data for m in got] == frames
    _as_laid_out(_frame_headers(bytes(raw)), layout, len(frames))


# --- a negative control: a client that parses each frame as whole operations --------------------


def _whole_frames_client(frames: list[bytes], probed: bool) -> judge.Reaction:
    """What a client that parses each frame on its own (whole operations only, as nats-pure.rb
    read lines before #174) does with ``frames`` and the probe PING after them: a frame that
    ends inside an operation is a parse error, reported, and the connection closed."""
    delivered: list[judge.Delivery] = []
    pongs = 0
    for frame in [*frames, b"PING\r\n"]:
        events, incomplete = protocol.parse(frame, protocol.Direction.SERVER)
        if incomplete or any(isinstance(e, protocol.ProtocolError) for e in events):
            return judge.Reaction(tuple(delivered), pongs, ("Parse Error",), True, probed)
        for e in events:
            if isinstance(e, protocol.Ping):
                pongs += 1
            elif isinstance(e, protocol.Msg | protocol.HMsg):
                block = None
                if isinstance(e, protocol.HMsg):
                    parsed = headers.parse_block(e.headers)
                    assert isinstance(parsed, headers.HeaderBlock)
                    block = parsed
                delivered.append(judge.Delivery(e.sid, e.subject, e.reply, e.payload, block))
    return judge.Reaction(tuple(delivered), pongs, (), False, probed)


# The must cases whose verdict needs the client to read every operation: whole operations, none
# rejected and no -ERR (after one, closing or not is the client's choice, so a client that
# stops reading passes them in any layout).
WHOLE = [
    case for case in RECEIVED
    if case.level == "must" and not case.data["expect"].get("incomplete", False)
    and not any("error" in e or e.get("op") == "-ERR" for e in case.data["expect"]["events"])
]  # fmt: skip


def test_a_client_parsing_whole_frames_fails_the_must_rows_of_every_split_layout() -> None:
    assert len(WHOLE) >= 10
    failed: dict[str, int] = {}
    for layout_case, layout in CLIENT_LAYOUTS:
        for case in WHOLE:
            data = vectors.decode_bytes(case.data["input"]["bytes"])
            frames = layout.frames(data, INFO)
            if frames is None:
                continue
            expect = case.data["expect"]
            verdict = judge.judge_reaction(expect, _whole_frames_client(frames, probed=True))
            level = client_vectors.derived_level(case.level, layout_case.level)
            assert level == "must"
            if layout.cut == "none":  # whole operations, joined: it reads them
                assert verdict.outcome == "pass", (layout.name, case.id, verdict.message)
            else:
                assert verdict.outcome == "fail", (layout.name, case.id)
                failed[layout.name] = failed.get(layout.name, 0) + 1
        # ... and, sent whole in one frame (the plain ws row), it passes every one.
    assert set(failed) == {lay.name for _, lay in CLIENT_LAYOUTS if lay.cut != "none"}
    for case in WHOLE:
        data = vectors.decode_bytes(case.data["input"]["bytes"])
        verdict = judge.judge_reaction(case.data["expect"], _whole_frames_client([data], True))
        assert verdict.outcome == "pass", (case.id, verdict.message)
