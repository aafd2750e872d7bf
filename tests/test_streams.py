"""The WebSocket stream against an in-process WebSocket server on the loopback (wsproto on the
server side): the NATS bytes out of binary and text messages, pings answered, a close frame as
the peer closing, and an upgrade that is refused or never answered as a bounded HandshakeError;
a TLS handshake never answered as an error row in bounded time."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    Pong,
    RejectConnection,
    Request,
    TextMessage,
)

from nats_conformance.harness.runtime.streams import (
    HandshakeError,
    Stream,
    WebSocketStream,
    open_stream,
)
from nats_conformance.harness.servers.specs import RunningServer, TlsOptions
from nats_conformance.harness.servers.wire import run_wire_script

Serve = Callable[[socket.socket, WSConnection], None]


def _events(sock: socket.socket, ws: WSConnection, until: type[Event]) -> list[Event]:
    """What the client sends, read until an event of type ``until`` comes."""
    seen: list[Event] = []
    while not any(isinstance(e, until) for e in seen):
        data = sock.recv(65536)
        if not data:
            break
        ws.receive_data(data)
        seen += list(ws.events())
    return seen


class WsServer:
    """Accepts one connection at a time, answers the upgrade with ``answer`` and then runs
    ``serve`` on it."""

    def __init__(self, serve: Serve, answer: Event | None = None) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.answer = answer if answer is not None else AcceptConnection()
        self.serve = serve
        self.got: list[Event] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        # The client may go away (a test that expects its handshake to fail).
        with contextlib.suppress(OSError):
            self._serve_one()

    def _serve_one(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.settimeout(5)
            ws = WSConnection(ConnectionType.SERVER)
            if not _events(conn, ws, Request):
                return
            if isinstance(self.answer, Request):  # stands for "never answer"
                time.sleep(2)
                return
            conn.sendall(ws.send(self.answer))
            if isinstance(self.answer, AcceptConnection):
                self.serve(conn, ws)

    def close(self) -> None:
        self.listener.close()
        self.thread.join(3)


@pytest.fixture
def server() -> Iterator[Callable[..., WsServer]]:
    made: list[WsServer] = []

    def make(serve: Serve, answer: Event | None = None) -> WsServer:
        made.append(WsServer(serve, answer))
        return made[-1]

    yield make
    for one in made:
        one.close()


def _read_all(stream: WebSocketStream, timeout: float = 2.0) -> bytes:
    out = b""
    while data := stream.receive(1 << 16, timeout=timeout):
        out += data
    return out


@settings(max_examples=20, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=6))
def test_binary_messages_read_as_the_bytes_they_carry(pieces: list[bytes]) -> None:
    def serve(conn: socket.socket, ws: WSConnection) -> None:
        for piece in pieces:
            conn.sendall(ws.send(BytesMessage(data=piece)))
        conn.sendall(ws.send(CloseConnection(code=1000)))

    one = WsServer(serve)
    try:
        stream = open_stream("ws", "127.0.0.1", one.port, timeout=2)
        assert isinstance(stream, WebSocketStream)
        assert _read_all(stream) == b"".join(pieces)
        assert stream.notes() == ["WebSocket close frame: 1000"]
        stream.close()
    finally:
        one.close()


def test_a_text_frame_is_passed_on_with_a_note_and_a_ping_is_answered(
    server: Callable[..., WsServer],
) -> None:
    pongs: list[Event] = []

    def serve(conn: socket.socket, ws: WSConnection) -> None:
        conn.sendall(ws.send(Ping(payload=b"p")))
        pongs.extend(e for e in _events(conn, ws, Pong) if isinstance(e, Pong))
        conn.sendall(ws.send(TextMessage(data="INFO {}\r\n")))
        conn.sendall(ws.send(CloseConnection(code=1000)))

    one = server(serve)
    stream = open_stream("ws", "127.0.0.1", one.port, timeout=2)
    assert isinstance(stream, WebSocketStream)
    assert _read_all(stream) == b"INFO {}\r\n"
    notes = stream.notes()
    assert notes[0] == "WebSocket ping answered"
    assert notes[1].startswith("a text frame (9 bytes)")
    stream.close()
    one.thread.join(3)
    assert [p.payload for p in pongs] == [b"p"]  # type: ignore[attr-defined]


def _messages_sent(
    server: Callable[..., WsServer], wanted: type[Event], send: Callable[[Stream], None]
) -> list[tuple[type, object]]:
    """The messages a WebSocket server got from the client stream that ``send`` wrote on,
    read until one of type ``wanted`` came."""
    got: list[Event] = []

    def serve(conn: socket.socket, ws: WSConnection) -> None:
        got.extend(_events(conn, ws, wanted))
        conn.sendall(ws.send(CloseConnection(code=1000)))

    one = server(serve)
    stream = open_stream("ws", "127.0.0.1", one.port, timeout=2)
    send(stream)
    assert _read_all(stream) == b""
    stream.close()
    one.thread.join(3)
    return [(type(e), e.data) for e in got if isinstance(e, BytesMessage | TextMessage)]


def test_what_the_client_sends_goes_in_binary_messages(server: Callable[..., WsServer]) -> None:
    sent = _messages_sent(server, BytesMessage, lambda s: s.send(b"PING\r\n", timeout=2))
    assert sent == [(BytesMessage, b"PING\r\n")]


@settings(max_examples=20, deadline=None)
@given(st.binary(min_size=1, max_size=300), st.integers(min_value=1, max_value=64))
def test_a_frame_limit_splits_what_is_sent_and_loses_nothing(data: bytes, limit: int) -> None:
    """With a limit (a server's max_payload) no frame holds more NATS bytes than it, and the
    frames carry the bytes in order; without one a send is one frame."""
    got: list[bytes] = []

    def serve(conn: socket.socket, ws: WSConnection) -> None:
        seen: list[Event] = []
        while sum(len(e.data) for e in seen if isinstance(e, BytesMessage)) < 2 * len(data):
            seen += _events(conn, ws, BytesMessage)
        got.extend(e.data for e in seen if isinstance(e, BytesMessage))
        conn.sendall(ws.send(CloseConnection(code=1000)))

    one = WsServer(serve)
    try:
        stream = open_stream("ws", "127.0.0.1", one.port, timeout=2)
        stream.send(data, timeout=2)  # no limit yet: one frame
        stream.limit_frames(limit)
        stream.send(data, timeout=2)
        assert _read_all(stream) == b""
        stream.close()
        one.thread.join(3)
    finally:
        one.close()
    assert got[0] == data
    assert b"".join(got[1:]) == data and all(len(frame) <= limit for frame in got[1:])
    assert len(got) - 1 == -(-len(data) // limit)


def test_a_refused_upgrade_is_a_handshake_error(server: Callable[..., WsServer]) -> None:
    one = server(lambda conn, ws: None, RejectConnection(status_code=403))
    with pytest.raises(HandshakeError, match="refused the WebSocket upgrade: 403"):
        open_stream("ws", "127.0.0.1", one.port, timeout=2)


def test_an_upgrade_never_answered_ends_at_its_deadline(server: Callable[..., WsServer]) -> None:
    one = server(lambda conn, ws: None, Request(host="", target=""))
    began = time.monotonic()
    with pytest.raises(HandshakeError, match=r"did not end within 0\.3 s"):
        open_stream("ws-deflate", "127.0.0.1", one.port, timeout=0.3)
    assert time.monotonic() - began < 1.5


def test_a_silent_server_times_out_a_receive(server: Callable[..., WsServer]) -> None:
    def serve(conn: socket.socket, ws: WSConnection) -> None:
        time.sleep(1)

    one = server(serve)
    stream = open_stream("ws", "127.0.0.1", one.port, timeout=2)
    with pytest.raises(TimeoutError):
        stream.receive(10, timeout=0.2)
    stream.close()


def test_tls_transports_need_a_context(server: Callable[..., WsServer]) -> None:
    one = server(lambda conn, ws: None)
    with pytest.raises(HandshakeError, match="needs a TLS context"):
        open_stream("wss", "127.0.0.1", one.port, timeout=1)
    with pytest.raises(ValueError, match="unknown transport"):
        open_stream("quic", "127.0.0.1", one.port, timeout=1)


def test_a_text_send_goes_in_one_text_message_and_a_byte_stream_has_none(
    server: Callable[..., WsServer],
) -> None:
    def send(stream: Stream) -> None:
        stream.limit_frames(2)  # a text send is one message whatever the frame limit
        stream.send(b"PING\r\n", timeout=2, text=True)

    assert _messages_sent(server, TextMessage, send) == [(TextMessage, "PING\r\n")]
    listener = socket.create_server(("127.0.0.1", 0))
    try:  # a tls-first stream opened without its handshake: plain bytes, no frames
        plain = open_stream("tls-first", "127.0.0.1", listener.getsockname()[1], timeout=1,
                            handshake=False)  # fmt: skip
        assert plain.negotiated == ""
        with pytest.raises(ValueError, match="no frames"):
            plain.send(b"PING\r\n", timeout=1, text=True)
        plain.close()
    finally:
        listener.close()


@pytest.mark.parametrize("transport", ["tls-first", "wss"])
def test_a_tls_handshake_never_answered_is_an_error_row_in_bounded_time(transport: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts, then says nothing
    port = listener.getsockname()[1]
    url = f"{transport}://127.0.0.1:{port}"
    running = RunningServer(url, "127.0.0.1", port, "0", None, TlsOptions(ca=None), transport)
    wire = {"exchanges": [{"send": "PING\r\n", "expect": [{"op": "PONG"}], "then": "open"}]}
    began = time.monotonic()
    try:
        result = run_wire_script(wire, running, timeout=0.3)
    finally:
        listener.close()
    assert time.monotonic() - began < 2
    assert result.found.outcome == "error"
    assert f"{transport} handshake with {url} failed" in result.found.message
    assert "did not end within 0.3 s" in result.found.message
