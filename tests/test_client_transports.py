"""Client libraries over every transport: the fake server serves each one (the suite's own client
streams in-process, and nats-py through its driver), every handshake is bounded, the client rows
of a run carry their transport in the same ids as server rows, and a driver that lacks a
transport's capabilities gets skip rows without being asked."""

from __future__ import annotations

import base64
import socket
import ssl
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import protocol, vectors
from nats_conformance.conformance.transports import (
    DEFAULT_TRANSPORT,
    TLS_TRANSPORTS,
    TRANSPORTS,
    WEBSOCKET_TRANSPORTS,
    row_id,
    transport_of,
)
from nats_conformance.harness import plan
from nats_conformance.harness.clients import client_vectors, fake_server
from nats_conformance.harness.clients.client_specs import parse_client_spec
from nats_conformance.harness.clients.client_targets import ClientTarget, open_client
from nats_conformance.harness.clients.driver import TRANSPORT_CAPABILITIES, transport_options
from nats_conformance.harness.clients.driver_session import Session, connected
from nats_conformance.harness.clients.fake_server import FakeServer, msg_op
from nats_conformance.harness.clients.library import LibrarySuite
from nats_conformance.harness.clients.scripts import KIND as SCRIPT
from nats_conformance.harness.runtime.certs import run_certificates
from nats_conformance.harness.runtime.streams import SocketStream, Stream, open_stream
from nats_conformance.harness.suites import PlannedRow

BUNDLED = vectors.load_all([vectors.BUNDLED_DIR]).cases
CLIENT_CASES = client_vectors.client_cases(BUNDLED)
WAIT = 5.0
HOST = fake_server.HOST


# --- the fake server over each transport, to the suite's own client streams ---------------------


def _read_until(stream: Stream, marker: bytes) -> bytes:
    """What the server sends, until ``marker`` is among it."""
    got = b""
    deadline = time.monotonic() + WAIT
    while marker not in got:
        data = stream.receive(1 << 16, timeout=deadline - time.monotonic())
        assert data, f"closed before {marker!r}: {got!r}"
        got += data
    return got


def _client(server: FakeServer) -> tuple[Stream, bytes]:
    """A client stream to ``server`` over its transport, verifying the run's CA, and the INFO
    it was sent (read in clear before the upgrade over tls)."""
    context = ssl.create_default_context(cafile=run_certificates().ca)
    stream = open_stream(server.transport, HOST, server.port, timeout=WAIT, context=context)
    info = _read_until(stream, b"\r\n")
    if server.transport == "tls":
        assert isinstance(stream, SocketStream)
        stream.start_tls(context, HOST, timeout=WAIT)
    return stream, info


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_fake_server_speaks_nats_over_each_transport(transport: str) -> None:
    with FakeServer(transport=transport) as server:
        assert server.url.startswith(("nats://", "tls://", "ws://", "wss://"))
        stream, info = _client(server)
        assert info.startswith(b"INFO ")
        assert (b'"tls_required":true' in info) == (transport in TLS_TRANSPORTS)
        stream.send(b'CONNECT {"verbose":false}\r\nPING\r\n', timeout=WAIT)
        conn = server.accept(timeout=WAIT)
        assert conn is not None and conn.wait_connect(timeout=WAIT) is not None
        assert _read_until(stream, b"PONG\r\n").endswith(b"PONG\r\n")
        stream.send(b"SUB a 1\r\nPUB b 2\r\nhi\r\n", timeout=WAIT)
        sub = conn.wait_for(protocol.Sub, timeout=WAIT)
        pub = conn.wait_for(protocol.Pub, timeout=WAIT)
        assert sub is not None and pub is not None and pub.payload == b"hi"
        conn.send(msg_op("a", sub.sid, b"yo"))
        assert _read_until(stream, b"yo\r\n").endswith(b"MSG a 1 2\r\nyo\r\n")
        stream.close()
        assert conn.wait_closed(timeout=WAIT)
        text = server.transcript_text()
    # The transcript holds the NATS bytes, whatever carried them, and the handshakes as notes.
    assert "> INFO {" in text and "< CONNECT {" in text and "> MSG a 1 2" in text
    assert ("TLS established" in text) == (transport in TLS_TRANSPORTS)
    assert ("WebSocket upgrade: HTTP 101" in text) == transport.startswith("ws")
    if transport == "tls":  # the INFO in clear, then the handshake
        assert text.index("> INFO") < text.index("TLS established")
    if transport == "tls-first":  # the handshake before anything is sent
        assert text.index("TLS established") < text.index("> INFO")


@pytest.mark.parametrize("offered", [True, False])
def test_ws_deflate_is_accepted_when_the_client_offers_it(offered: bool) -> None:
    client_transport = "ws-deflate" if offered else "ws"
    with FakeServer(transport="ws-deflate") as server:
        stream = open_stream(client_transport, HOST, server.port, timeout=WAIT)
        _read_until(stream, b"\r\n")
        stream.send(b"CONNECT {}\r\nPING\r\n", timeout=WAIT)  # deflated when accepted
        conn = server.accept(timeout=WAIT)
        assert conn is not None and conn.wait_connect(timeout=WAIT) is not None
        stream.close()
        assert ("extensions accepted: <PerMessageDeflate" in server.transcript_text()) == offered
        assert ("PerMessageDeflate" in stream.negotiated) == offered


def test_a_websocket_client_that_sends_text_frames_is_noted() -> None:
    """websocket.txt: clients MUST send in Binary. The bytes still count (a case judges them);
    the note says what carried them."""
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import Request, TextMessage

    with FakeServer(transport="ws") as server:
        sock = socket.create_connection((HOST, server.port), timeout=WAIT)
        ws = WSConnection(ConnectionType.CLIENT)
        sock.sendall(ws.send(Request(host=f"{HOST}:{server.port}", target="/")))
        ws.receive_data(sock.recv(1 << 16))  # the 101 (and the INFO)
        assert list(ws.events())
        sock.sendall(ws.send(TextMessage(data="CONNECT {}\r\n")))
        conn = server.accept(timeout=WAIT)
        assert conn is not None and conn.wait_connect(timeout=WAIT) is not None
        sock.close()
        conn.wait_closed(timeout=WAIT)
        assert "a text frame (12 bytes): the client must send binary" in server.transcript_text()


@pytest.mark.parametrize("transport", ["tls", "tls-first", "ws", "wss"])
def test_a_client_that_never_finishes_a_handshake_is_noted_in_bounded_time(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake_server, "HANDSHAKE_TIMEOUT", 0.3)
    with FakeServer(transport=transport) as server:
        sock = socket.create_connection((HOST, server.port), timeout=WAIT)
        started = time.monotonic()
        assert server.accept(timeout=1.5) is None  # never handed out: no script waits on it
        deadline = time.monotonic() + WAIT
        while not server.failed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert time.monotonic() - started < 2.0
        (failed,) = server.failed
        assert "handshake:" in failed.text() and "within 0.3 s" in failed.text()
        assert "failed handshake 1:" in server.transcript_text()
        sock.close()


@pytest.mark.parametrize("transport", ["tls-first", "wss"])
def test_a_client_speaking_nats_in_clear_fails_the_handshake_at_once(transport: str) -> None:
    with FakeServer(transport=transport) as server:
        with socket.create_connection((HOST, server.port), timeout=WAIT) as sock:
            sock.sendall(b"CONNECT {}\r\nPING\r\n")
            started = time.monotonic()
            deadline = started + WAIT
            while not server.failed and time.monotonic() < deadline:
                time.sleep(0.01)
        assert time.monotonic() - started < fake_server.HANDSHAKE_TIMEOUT
        assert "the TLS handshake failed" in server.failed[0].text()
        assert server.connections == []


def test_close_ends_a_handshake_in_progress() -> None:
    server = FakeServer(transport="ws")
    with socket.create_connection((HOST, server.port), timeout=WAIT):
        time.sleep(0.1)  # the greeting thread is waiting for the upgrade request
        started = time.monotonic()
        server.close()
        assert time.monotonic() - started < 1.0


# --- what the harness asks of a driver ----------------------------------------------------------


def test_connect_options_name_the_transport() -> None:
    ca = str(run_certificates().ca)
    assert transport_options("tcp") == {} and transport_options("ws") == {}
    assert transport_options("tls") == {"tls_ca_file": ca}
    assert transport_options("tls-first") == {"tls_ca_file": ca, "tls_first": True}
    assert transport_options("wss") == {"tls_ca_file": ca}
    assert transport_options("ws-deflate") == {"ws_compression": True}
    assert set(TRANSPORT_CAPABILITIES) == set(TRANSPORTS)


# --- row ids and rows ---------------------------------------------------------------------------

# Vector ids, with a path after @ or without (a script's row).
CASE_IDS = st.from_regex(
    r"[a-z][a-z0-9_-]{0,8}(\.[a-z0-9_-]{1,8}){1,4}(@[a-z][a-z-]{0,12})?", fullmatch=True
)


@given(CASE_IDS, st.sampled_from(TRANSPORTS))
def test_a_row_id_gives_back_its_case_and_transport(case_id: str, transport: str) -> None:
    if transport_of(case_id) != (case_id, DEFAULT_TRANSPORT):
        return  # an id that already ends in @<transport>: no tcp row has one
    assert transport_of(row_id(case_id, transport)) == (case_id, transport)


def _pinned(case: vectors.Case) -> str | None:
    """The transport a client script of the transports themselves runs over (None: every one)."""
    return case.data["input"].get("transport") if case.kind == SCRIPT else None


def _wire(row: str) -> bool:
    """Whether a tcp row id is one of a path through the fake server, or a client script that is
    not pinned to a transport."""
    head, _, suffix = row.partition("@")
    case = next(c for c in CLIENT_CASES if c.id == head)
    if case.kind == SCRIPT:
        return not suffix and _pinned(case) is None
    paths = client_vectors.PATHS.get(case.kind, ())
    return any(p.wire and p.name == suffix.split("-")[0] for p in paths)


def test_only_rows_through_the_fake_server_travel_over_other_transports() -> None:
    tcp = [rid for rid, _, _ in client_vectors.planned_rows(CLIENT_CASES)]
    every = [rid for rid, _, _ in client_vectors.planned_rows(CLIENT_CASES, TRANSPORTS)]
    wire = [rid for rid in tcp if _wire(rid)]
    # A frame layout's rows (test_frame_layouts.py): over WebSocket only, each laying out a
    # row through the fake server.
    framed = [rid for rid in every if "~" in rid]
    every = [rid for rid in every if "~" not in rid]
    assert framed and all(transport_of(rid)[1] in WEBSOCKET_TRANSPORTS for rid in framed)
    assert {transport_of(rid)[0] for rid in framed} <= set(wire)
    pinned = {t: [c.id for c in CLIENT_CASES if _pinned(c) == t] for t in TRANSPORTS}
    assert pinned["tcp"] and pinned["tls"]  # client-transport.json's cases
    assert every[: len(tcp)] == tcp  # the tcp rows keep their ids, first
    assert set(pinned["tcp"]) <= set(tcp) and not set(tcp) & set(pinned["tls"])
    others = sum(len(ids) for t, ids in pinned.items() if t != DEFAULT_TRANSPORT)
    assert len(every) == len(tcp) + (len(TRANSPORTS) - 1) * len(wire) + others
    for transport in TRANSPORTS[1:]:
        over = [head for head, t in map(transport_of, every) if t == transport]
        # A pinned script travels over its own transport only.
        assert [head for head in over if head not in pinned[transport]] == wire
        assert sorted(set(over) - set(wire)) == sorted(pinned[transport])
    # the library's own code is asked over tcp only
    assert not any("@decode@" in rid or "@validate@" in rid for rid in every)


def _lacking(capabilities: set[str]) -> ClientTarget:
    """A client target whose hello (never asked: set here) declares ``capabilities``."""
    client = ClientTarget(parse_client_spec("client:nats-py"))
    client.hello = {"version": "0.0.0", "capabilities": sorted(capabilities)}
    client.capabilities = frozenset(capabilities)
    return client


@pytest.mark.parametrize("transport", TRANSPORTS[1:])
def test_a_transport_the_driver_lacks_gives_skip_rows_without_asking(transport: str) -> None:
    """Every row over the transport is a skip naming the missing capability; no driver starts
    (this is a unit test: starting one fails it), and nothing waits."""
    everything = {"headers", "request", "websocket", "tls", "tls_first", "websocket_compression"}
    client = _lacking(everything - {TRANSPORT_CAPABILITIES[transport][-1]})
    started = time.monotonic()
    rows = list(client_vectors.run_client_vectors(client, CLIENT_CASES, (transport,)))
    assert time.monotonic() - started < 5.0
    planned = [rid for rid, _, _ in client_vectors.planned_rows(CLIENT_CASES, (transport,))]
    assert [r.case.case_id for r in rows] == planned
    assert {r.found.outcome for r in rows} == {"skip"}
    assert {r.transport for r in rows} == {transport}
    lacked = TRANSPORT_CAPABILITIES[transport][-1]
    assert all(f"lacks {lacked}" in r.found.message for r in rows)


def test_a_run_selects_transports_for_client_libraries_too() -> None:
    targets = plan.Targets([], ["client:nats-py"], True, ("tcp", "wss"))
    (suite, *_) = plan.suites(targets, [], CLIENT_CASES)
    assert isinstance(suite, LibrarySuite) and suite.transports == ("tcp", "wss")
    rows = suite.planned()
    assert {transport_of(r.row_id)[1] for r in rows} == {"tcp", "wss"}
    # Rows asked for by id run their cases over the transports they name only.
    picked = [r for r in rows if r.row_id.endswith("@wss")][:2]
    narrowed = suite.only(picked)
    assert narrowed.transports == ("wss",)
    assert {c.id for c in narrowed.cases} == {r.case_id for r in picked}
    assert all(isinstance(r, PlannedRow) for r in narrowed.planned())


# --- a real client library through its driver ---------------------------------------------------


@pytest.fixture(scope="module")
def nats_py() -> Iterator[ClientTarget]:
    with open_client("client:nats-py") as client:
        client.driver().close()  # built, and its hello read
        yield client


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nats_py_talks_to_the_fake_server_over_each_transport(
    nats_py: ClientTarget, transport: str
) -> None:
    lacking = nats_py.lacks_transport(transport)
    if lacking is not None:  # nats-py has no option to offer permessage-deflate
        assert transport == "ws-deflate" and "websocket_compression" in lacking
        return
    with Session(nats_py, transport) as s, connected(s) as (server, conn):
        assert server.url.partition("://")[0] in ("nats", "tls", "ws", "wss")
        connect = conn.wait_connect(timeout=WAIT)
        assert connect is not None
        s.call("subscribe", subject="a", queue=None)
        sub = conn.wait_for(protocol.Sub, timeout=WAIT)
        s.call("publish", subject="b", reply=None, headers=None, payload_b64="aGk=")
        pub = conn.wait_for(protocol.Pub, timeout=WAIT)
        assert sub is not None and pub is not None and pub.payload == b"hi"
        conn.send(msg_op("a", sub.sid, b"yo"))
        event = s.wait_event(lambda e: e.get("event") == "message", timeout=WAIT)
        assert event is not None and base64.b64decode(event["payload_b64"]) == b"yo"
        assert s.call("flush", timeout_ms=2000).ok  # its PING, the fake server's PONG
        text = server.transcript_text()
    assert ("TLS established" in text) == (transport in TLS_TRANSPORTS)
    assert ("WebSocket upgrade" in text) == transport.startswith("ws")


def test_client_vectors_over_tls_give_the_rows_they_give_over_tcp(nats_py: ClientTarget) -> None:
    """A few wire cases and a script over tcp and tls: the same outcomes, ids apart."""
    picked = [c for c in CLIENT_CASES if c.kind == "protocol.parse"][:3]
    picked += [c for c in CLIENT_CASES if c.kind == SCRIPT][:2]
    rows = list(client_vectors.run_client_vectors(nats_py, picked, ("tcp", "tls")))
    by_transport: dict[str, dict[str, str]] = {"tcp": {}, "tls": {}}
    for row in rows:
        head, transport = transport_of(row.case.case_id)
        assert row.transport == transport
        by_transport[transport][head] = row.found.outcome
    assert by_transport["tls"] == by_transport["tcp"]
    assert set(by_transport["tcp"].values()) <= {"pass", "skip"}
