"""Byte streams to a NATS server over each transport the suite speaks: the NATS bytes go in and
out as they are, whatever carries them (plain TCP, TLS, WebSocket frames).

``Stream`` is what a wire client reads and writes through; ``open_stream`` opens one for a
transport. Every wait is bounded: a handshake that fails or hangs raises ``HandshakeError``
(the caller turns it into a row), a read that times out raises ``TimeoutError``, and a peer that
closes (a TCP close, a WebSocket close frame) reads as ``b""``. WebSocket framing is the
sans-I/O ``wsproto`` library's; TLS is the standard library's.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from typing import Protocol

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.extensions import PerMessageDeflate
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

# Every transport, in the order runs take them: plain TCP; TLS after the server's plaintext INFO;
# TLS before anything is read (the server's ``handshake_first``); WebSocket, over TLS, and with
# permessage-deflate offered.
TRANSPORTS = ("tcp", "tls", "tls-first", "ws", "wss", "ws-deflate")
DEFAULT_TRANSPORT = "tcp"
TLS_TRANSPORTS = ("tls", "tls-first", "wss")  # those that verify a certificate
WEBSOCKET_TRANSPORTS = ("ws", "wss", "ws-deflate")
CHUNK = 1 << 16


class HandshakeError(Exception):
    """A TLS handshake or WebSocket upgrade that failed or did not end in time: what the
    connection could not become, and why."""


def parse_transports(text: str) -> tuple[str, ...]:
    """``tcp,tls,...`` as the transports it names, in ``TRANSPORTS`` order, once each;
    ValueError names an unknown one (or an empty list)."""
    named = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in named if name not in TRANSPORTS]
    if unknown or not named:
        what = f"unknown transport {unknown[0]!r}" if unknown else "no transport"
        raise ValueError(f"{what}: name some of {', '.join(TRANSPORTS)}")
    return tuple(name for name in TRANSPORTS if name in named)


class Stream(Protocol):
    """A connection's NATS bytes, whatever carries them."""

    @property
    def transport(self) -> str: ...  # one of TRANSPORTS

    @property
    def negotiated(self) -> str: ...  # what its handshakes agreed ("" for plain TCP)

    def send(self, data: bytes, *, timeout: float, text: bool = False) -> None:
        """Send all of ``data`` (with ``text``, in one WebSocket text frame: ValueError where the
        transport has no frames, or the bytes are not UTF-8): TimeoutError when the peer does not
        take it in time, OSError when the connection is gone."""
        ...

    def receive(self, size: int, *, timeout: float) -> bytes:
        """Up to ``size`` NATS bytes, ``b""`` once the peer closed; TimeoutError when none
        came within ``timeout`` seconds, OSError when the connection broke."""
        ...

    def notes(self) -> list[str]:
        """What happened beneath the NATS bytes since the last call (a frame the documents do
        not allow, a ping answered, a close frame), for the transcript."""
        ...

    def limit_frames(self, size: int) -> None:
        """Send at most ``size`` NATS bytes per frame, where the transport has frames."""
        ...

    def close(self) -> None: ...


def _wrap(
    sock: socket.socket, context: ssl.SSLContext | None, hostname: str, timeout: float
) -> ssl.SSLSocket:
    """``sock`` after a TLS handshake as a client (within ``timeout`` seconds)."""
    if context is None:
        raise HandshakeError("a TLS handshake needs a TLS context")
    sock.settimeout(timeout)
    try:
        return context.wrap_socket(sock, server_hostname=hostname)
    except TimeoutError:
        raise HandshakeError(f"the TLS handshake did not end within {timeout:g} s") from None
    except (ssl.SSLError, OSError) as exc:
        raise HandshakeError(f"the TLS handshake failed: {exc}") from exc


class SocketStream:
    """NATS bytes straight over a socket: plain TCP, upgraded to TLS by ``start_tls`` (after
    the INFO, or at once for TLS-first)."""

    def __init__(self, sock: socket.socket, transport: str = DEFAULT_TRANSPORT) -> None:
        self._sock = sock
        self.transport = transport
        self.negotiated = ""

    def start_tls(self, context: ssl.SSLContext | None, hostname: str, *, timeout: float) -> None:
        """Upgrade to TLS; HandshakeError when the handshake fails or does not end in time."""
        self._sock = _wrap(self._sock, context, hostname, timeout)
        self.negotiated = f"TLS established: {self._sock.version()}"

    def send(self, data: bytes, *, timeout: float, text: bool = False) -> None:
        if text:
            raise ValueError(f"a {self.transport} connection has no frames to send text in")
        self._sock.settimeout(timeout)
        self._sock.sendall(data)

    def receive(self, size: int, *, timeout: float) -> bytes:
        if timeout <= 0:
            raise TimeoutError
        self._sock.settimeout(timeout)
        return self._sock.recv(size)

    def notes(self) -> list[str]:
        return []

    def limit_frames(self, size: int) -> None:
        pass  # a byte stream: no frames

    def close(self) -> None:
        self._sock.close()


class WebSocketStream:
    """NATS bytes in binary WebSocket messages (client side), over a socket that may carry TLS.

    The upgrade is bounded by ``timeout``; permessage-deflate is offered with ``deflate``
    (``wsproto`` then inflates and deflates). Pings are answered; a close frame is the peer
    closing. Text frames are passed on as their bytes, with a note: the documents allow binary
    frames only, and what to make of one is a case's to judge.
    """

    def __init__(
        self,
        sock: socket.socket,
        transport: str,
        host: str,
        port: int,
        *,
        deflate: bool,
        timeout: float,
        prefix: str = "",
    ) -> None:
        self._sock = sock
        self.transport = transport
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._buffer = bytearray()
        self._notes: list[str] = []
        self._closed = False
        self._accepted = False
        self._frame_limit = 0  # NATS bytes per frame at most (0: a send is one frame)
        self.extensions = ""  # what the server's Sec-WebSocket-Extensions accepted ("" none)
        self.accepted: tuple[str, ...] = ()  # those extensions' names
        self.text_frames = 0  # text messages the server sent
        self.negotiated = ""
        shown = f"[{host}]" if ":" in host else host
        extensions = [PerMessageDeflate()] if deflate else []
        request = Request(host=f"{shown}:{port}", target="/", extensions=extensions)
        deadline = time.monotonic() + timeout
        try:
            self._write(self._ws.send(request), timeout)
            while not self._accepted:
                # What came with the answer (messages, even a close) is kept for ``receive``.
                if not self._fill(deadline - time.monotonic()) and not self._accepted:
                    raise HandshakeError("the server closed the connection during the upgrade")
        except TimeoutError:
            why = f"the WebSocket upgrade did not end within {timeout:g} s"
            raise HandshakeError(why) from None
        except OSError as exc:
            raise HandshakeError(f"the WebSocket upgrade failed: {exc}") from exc
        answer = "no extension"
        if self.extensions:
            answer = f"extensions accepted: {self.extensions}"
        self.negotiated = f"{prefix}WebSocket upgrade: HTTP 101, {answer}"

    def _write(self, data: bytes, timeout: float) -> None:
        if timeout <= 0:
            raise TimeoutError
        self._sock.settimeout(timeout)
        self._sock.sendall(data)

    def _fill(self, timeout: float) -> bool:
        """Read once from the socket and handle what it held; False when the peer closed."""
        if timeout <= 0:
            raise TimeoutError
        self._sock.settimeout(timeout)
        data = self._sock.recv(CHUNK)
        if not data:  # closed without a close frame (wsproto would make one up: 1006)
            self._closed = True
            return False
        try:
            self._ws.receive_data(data)
            for event in self._ws.events():
                self._handle(event, timeout)
        except RemoteProtocolError as exc:
            raise ConnectionError(f"the server's WebSocket frames are broken: {exc}") from None
        return not self._closed

    def _handle(self, event: Event, timeout: float) -> None:
        if isinstance(event, AcceptConnection):
            self._accepted = True
            # The extensions the server's Sec-WebSocket-Extensions answer accepted, as wsproto
            # read it (wsproto keeps that header to itself).
            self.extensions = ", ".join(map(repr, event.extensions))
            self.accepted = tuple(extension.name for extension in event.extensions)
        elif isinstance(event, RejectConnection):
            raise HandshakeError(f"the server refused the WebSocket upgrade: {event.status_code}")
        elif isinstance(event, BytesMessage):
            self._buffer += event.data
        elif isinstance(event, TextMessage):
            data = event.data.encode()
            self.text_frames += 1
            self._notes.append(f"a text frame ({len(data)} bytes): the server must send binary")
            self._buffer += data
        elif isinstance(event, Ping):
            self._notes.append("WebSocket ping answered")
            self._write(self._ws.send(event.response()), max(timeout, 0.001))
        elif isinstance(event, CloseConnection):
            self._notes.append(f"WebSocket close frame: {event.code} {event.reason or ''}".strip())
            self._closed = True
            with contextlib.suppress(OSError, LocalProtocolError):  # closed: answering is courtesy
                self._write(self._ws.send(event.response()), max(timeout, 0.001))

    def limit_frames(self, size: int) -> None:
        self._frame_limit = max(size, 1)

    def send(self, data: bytes, *, timeout: float, text: bool = False) -> None:
        """``data`` in one binary message, or in as many as the frame limit asks (the documents
        let a frame hold part of an operation, and a server must parse partial operations);
        with ``text``, in one text message (the documents allow a client binary frames only:
        what a server does with one is a case's to record)."""
        size = self._frame_limit or max(len(data), 1)
        try:
            if text:
                frames = self._ws.send(TextMessage(data=data.decode("utf-8")))
            else:
                frames = b"".join(
                    self._ws.send(BytesMessage(data=data[i : i + size]))
                    for i in range(0, max(len(data), 1), size)
                )
        except LocalProtocolError as exc:  # closing or closed
            raise ConnectionError(f"cannot send: the WebSocket is {self._ws.state.name}") from exc
        self._write(frames, timeout)

    def receive(self, size: int, *, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while not self._buffer and not self._closed:
            self._fill(deadline - time.monotonic())
        out = bytes(self._buffer[:size])
        del self._buffer[:size]
        return out

    def notes(self) -> list[str]:
        out, self._notes = self._notes, []
        return out

    def close(self) -> None:
        self._sock.close()


def open_stream(
    transport: str,
    host: str,
    port: int,
    *,
    timeout: float,
    context: ssl.SSLContext | None = None,
    handshake: bool = True,
) -> Stream:
    """A stream to ``host:port`` over ``transport``, its handshakes done (for ``tls`` none yet:
    the caller upgrades after the server's INFO; for ``tls-first`` none without ``handshake``:
    a case that starts TLS later, or never). OSError when no connection opens,
    HandshakeError when a handshake fails or hangs (each bounded by ``timeout``); ``context``
    verifies the server for the TLS transports."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}")
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        if transport not in WEBSOCKET_TRANSPORTS:
            stream = SocketStream(sock, transport)
            if transport == "tls-first" and handshake:
                stream.start_tls(context, host, timeout=timeout)
            return stream
        prefix = ""
        if transport == "wss":
            sock = _wrap(sock, context, host, timeout)
            prefix = f"TLS established: {sock.version()}; "
        deflate = transport == "ws-deflate"
        return WebSocketStream(
            sock, transport, host, port, deflate=deflate, timeout=timeout, prefix=prefix
        )
    except BaseException:
        sock.close()
        raise
