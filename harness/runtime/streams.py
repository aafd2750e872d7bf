"""Byte streams between a NATS client and server over each transport the suite speaks: the NATS
bytes go in and out as they are, whatever carries them (plain TCP, TLS, WebSocket frames).

``Stream`` is what both sides read and write through: ``open_stream`` opens one to a server (the
wire client), ``accept_stream`` makes one of a connection a listener accepted (the fake server
that checks client libraries), with the same handshakes in the server's role. Every wait is
bounded: a handshake that fails or hangs raises ``HandshakeError`` (the caller turns it into a
row), a read that times out raises ``TimeoutError``, and a peer that closes (a TCP close, a
WebSocket close frame) reads as ``b""``. One thread may read a stream while another writes it
(a read waits without the socket's timeout, which bounds writes). WebSocket framing is the
sans-I/O ``wsproto`` library's; TLS is the standard library's.
"""

from __future__ import annotations

import contextlib
import functools
import select
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from wsproto import ConnectionState, ConnectionType, WSConnection
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

from ...conformance.transports import (
    DEFAULT_TRANSPORT,
    TRANSPORTS,
    WEBSOCKET_TRANSPORTS,
)

# The scheme of a URL that names each transport (tls-first and ws-deflate are the options of a
# tls:// and a ws:// connection).
URL_SCHEMES = {"tcp": "nats", "tls": "tls", "tls-first": "tls", "ws": "ws", "wss": "wss",
               "ws-deflate": "ws"}  # fmt: skip
CHUNK = 1 << 16
CLOSE_WAIT = 1.0  # seconds a WebSocket close frame may take to leave when this side ends


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

    def send_frames(
        self, frames: Sequence[bytes], *, timeout: float, fragments: bool = False
    ) -> None:
        """Send each of ``frames`` in a binary WebSocket message of its own (with ``fragments``,
        as the fragments of one message: a first frame, then continuation frames), all in one
        write (ValueError where the transport has no frames); ``send``'s errors otherwise."""
        ...

    @property
    def deflating(self) -> bool:
        """Whether permessage-deflate was negotiated: every message sent is deflated."""
        ...

    def shutdown(self) -> None:
        """End the connection from this side now (a WebSocket close frame first), keeping the
        socket: a thread reading it reads the end; ``close`` lets the socket go."""
        ...

    def close(self) -> None: ...


@functools.cache
def server_context(chain: Path, key: Path) -> ssl.SSLContext:
    """A server's TLS context presenting the certificate chain ``chain`` with its ``key`` (made
    once per pair of files)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain, key)
    return context


def _wrap(
    sock: socket.socket,
    context: ssl.SSLContext | None,
    hostname: str,
    timeout: float,
    *,
    server_side: bool = False,
) -> ssl.SSLSocket:
    """``sock`` after a TLS handshake (within ``timeout`` seconds) as a client verifying
    ``hostname``, or as the server."""
    if context is None:
        raise HandshakeError("a TLS handshake needs a TLS context")
    sock.settimeout(timeout)
    try:
        if server_side:
            wrapped = context.wrap_socket(sock, server_side=True)
        else:
            wrapped = context.wrap_socket(sock, server_hostname=hostname)
    except TimeoutError:
        raise HandshakeError(f"the TLS handshake did not end within {timeout:g} s") from None
    except (ssl.SSLError, OSError) as exc:
        raise HandshakeError(f"the TLS handshake failed: {exc}") from exc
    if wrapped.version() is None:  # the peer had gone: the ssl module makes no handshake then
        wrapped.close()
        raise HandshakeError("the TLS handshake did not start: the peer closed the connection")
    return wrapped


def _await_readable(sock: socket.socket, timeout: float) -> None:
    """Until a read of ``sock`` has something (bytes or its end), at most ``timeout`` seconds
    (TimeoutError). It waits in ``select``, not with the socket's timeout: that one bounds the
    writes another thread may be making at the same time."""
    if timeout <= 0:
        raise TimeoutError
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return  # decrypted bytes already wait inside the TLS layer
    readable, _, _ = select.select([sock], [], [], timeout)
    if not readable:
        raise TimeoutError


def _end(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already ended by the peer
        sock.shutdown(socket.SHUT_RDWR)


class SocketStream:
    """NATS bytes straight over a socket: plain TCP, upgraded to TLS by ``start_tls`` (after
    the INFO, or at once for TLS-first), as the client or, with ``server_side``, the server."""

    def __init__(
        self, sock: socket.socket, transport: str = DEFAULT_TRANSPORT, *, server_side: bool = False
    ) -> None:
        self._sock = sock
        self.transport = transport
        self.negotiated = ""
        self._server_side = server_side
        # One TLS record operation at a time (a TLS connection is not for two threads at once).
        self._lock = threading.Lock()

    def start_tls(self, context: ssl.SSLContext | None, hostname: str, *, timeout: float) -> None:
        """Upgrade to TLS (a client verifies the server's certificate for ``hostname``);
        HandshakeError when the handshake fails or does not end in time."""
        self._sock = _wrap(self._sock, context, hostname, timeout, server_side=self._server_side)
        self.negotiated = f"TLS established: {self._sock.version()}"

    def send(self, data: bytes, *, timeout: float, text: bool = False) -> None:
        if text:
            raise ValueError(f"a {self.transport} connection has no frames to send text in")
        with self._lock:
            self._sock.settimeout(timeout)
            self._sock.sendall(data)

    def receive(self, size: int, *, timeout: float) -> bytes:
        _await_readable(self._sock, timeout)
        with self._lock:
            return self._sock.recv(size)

    def notes(self) -> list[str]:
        return []

    def limit_frames(self, size: int) -> None:
        pass  # a byte stream: no frames

    def send_frames(
        self, frames: Sequence[bytes], *, timeout: float, fragments: bool = False
    ) -> None:
        raise ValueError(f"a {self.transport} connection has no frames")

    @property
    def deflating(self) -> bool:
        return False  # no frames to deflate

    def shutdown(self) -> None:
        _end(self._sock)

    def close(self) -> None:
        self._sock.close()


class WebSocketStream:
    """NATS bytes in binary WebSocket messages, over a socket that may carry TLS: the client
    side (it sends the upgrade request to ``host:port``) or, with ``server_side``, the server
    side (it answers the client's request).

    The upgrade is bounded by ``timeout``. With ``deflate`` a client offers permessage-deflate
    and a server accepts it when the client offers it (``wsproto`` then inflates and deflates).
    Pings are answered; a close frame is the peer closing. Text frames are passed on as their
    bytes, with a note: the documents allow binary frames only, and what to make of one is a
    case's to judge.
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
        server_side: bool = False,
    ) -> None:
        self._sock = sock
        self.transport = transport
        self._server_side = server_side
        self._ws = WSConnection(ConnectionType.SERVER if server_side else ConnectionType.CLIENT)
        self._peer = "client" if server_side else "server"
        self._deflate = deflate
        self._lock = threading.Lock()  # wsproto's state and the socket's writes: one at a time
        self._buffer = bytearray()
        self._notes: list[str] = []
        self._closed = False
        self._accepted = False
        self._frame_limit = 0  # NATS bytes per frame at most (0: a send is one frame)
        self.offered = ""  # the extensions the client's request offered (server side)
        self.extensions = ""  # the extensions the upgrade's answer accepted ("" none)
        self.accepted: tuple[str, ...] = ()  # those extensions' names (client side)
        self.text_frames = 0  # text messages the peer sent
        self.negotiated = ""
        deadline = time.monotonic() + timeout
        try:
            if not server_side:
                shown = f"[{host}]" if ":" in host else host
                extensions = [PerMessageDeflate()] if deflate else []
                request = Request(host=f"{shown}:{port}", target="/", extensions=extensions)
                with self._lock:
                    self._write(self._ws.send(request), timeout)
            while not self._accepted:
                # What came with the answer (messages, even a close) is kept for ``receive``.
                if not self._fill(deadline - time.monotonic()) and not self._accepted:
                    raise HandshakeError(
                        f"the {self._peer} closed the connection during the upgrade"
                    )
        except TimeoutError:
            why = f"the WebSocket upgrade did not end within {timeout:g} s"
            raise HandshakeError(why) from None
        except OSError as exc:
            raise HandshakeError(f"the WebSocket upgrade failed: {exc}") from exc
        answer = f"extensions accepted: {self.extensions}" if self.extensions else "no extension"
        if server_side:
            answer += f" (the client offered {self.offered or 'none'})"
        self.negotiated = f"{prefix}WebSocket upgrade: HTTP 101, {answer}"

    def _write(self, data: bytes, timeout: float) -> None:
        """Write ``data`` to the socket (the caller holds the lock)."""
        if timeout <= 0:
            raise TimeoutError
        self._sock.settimeout(timeout)
        self._sock.sendall(data)

    def _fill(self, timeout: float) -> bool:
        """Read once from the socket and handle what it held; False when the peer closed."""
        _await_readable(self._sock, timeout)
        with self._lock:
            data = self._sock.recv(CHUNK)
            if not data:  # closed without a close frame (wsproto would make one up: 1006)
                self._closed = True
                return False
            try:
                self._ws.receive_data(data)
                for event in self._ws.events():
                    self._handle(event, timeout)
            except RemoteProtocolError as exc:
                raise ConnectionError(
                    f"the {self._peer}'s WebSocket frames are broken: {exc}"
                ) from None
            return not self._closed

    def _handle(self, event: Event, timeout: float) -> None:
        if isinstance(event, Request):  # the server side: accept, with what it may accept
            self.offered = ", ".join(map(str, event.extensions))
            deflate = PerMessageDeflate()
            self._write(
                self._ws.send(AcceptConnection(extensions=[deflate] if self._deflate else [])),
                timeout,
            )
            self._accepted = True
            self.extensions = repr(deflate) if deflate.enabled() else ""
        elif isinstance(event, AcceptConnection):
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
            self._notes.append(
                f"a text frame ({len(data)} bytes): the {self._peer} must send binary"
            )
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
        let a frame hold part of an operation, and a peer must parse partial operations); with
        ``text``, in one text message (the documents allow a client binary frames only: what a
        server does with one is a case's to record)."""
        if text:
            self._send_messages([TextMessage(data=data.decode("utf-8"))], timeout)
            return
        size = self._frame_limit or max(len(data), 1)
        pieces = (data[i : i + size] for i in range(0, max(len(data), 1), size))
        self._send_messages([BytesMessage(data=piece) for piece in pieces], timeout)

    def send_frames(
        self, frames: Sequence[bytes], *, timeout: float, fragments: bool = False
    ) -> None:
        """Each of ``frames`` in a binary message (one frame) of its own, written at once: the
        peer reads them back to back, as a frame layout lays them out (with permessage-deflate,
        each deflated); with ``fragments``, the frames of one message (a binary frame, then
        continuation frames, the last one final). A frame above the frame limit is cut at it,
        as ``send`` cuts."""
        size = self._frame_limit
        pieces = (
            [f[i : i + size] for f in frames for i in range(0, len(f), size)] if size else frames
        )
        last = len(pieces) - 1
        messages = [
            BytesMessage(data=piece, message_finished=not fragments or i == last)
            for i, piece in enumerate(pieces)
        ]
        self._send_messages(messages, timeout)

    @property
    def deflating(self) -> bool:
        """Whether permessage-deflate was negotiated: every message sent is deflated."""
        return bool(self.extensions)

    def _send_messages(
        self, messages: Sequence[BytesMessage | TextMessage], timeout: float
    ) -> None:
        with self._lock:
            try:
                frames = b"".join(self._ws.send(message) for message in messages)
            except LocalProtocolError as exc:  # closing or closed
                state = self._ws.state.name
                raise ConnectionError(f"cannot send: the WebSocket is {state}") from exc
            self._write(frames, timeout)

    def receive(self, size: int, *, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while not self._buffer and not self._closed:
            self._fill(deadline - time.monotonic())
        with self._lock:
            out = bytes(self._buffer[:size])
            del self._buffer[:size]
            return out

    def notes(self) -> list[str]:
        with self._lock:
            out, self._notes = self._notes, []
            return out

    def shutdown(self) -> None:
        with self._lock, contextlib.suppress(OSError, LocalProtocolError):
            if self._ws.state is ConnectionState.OPEN:  # a close frame, as servers send one
                self._write(self._ws.send(CloseConnection(code=1000)), CLOSE_WAIT)
        _end(self._sock)

    def close(self) -> None:
        self._sock.close()


def _over(
    sock: socket.socket,
    transport: str,
    host: str,
    port: int,
    *,
    timeout: float,
    context: ssl.SSLContext | None,
    server_side: bool,
    handshake: bool = True,
) -> Stream:
    """A connected ``sock`` as a stream over ``transport``, its handshakes done in the client's
    or the server's role (for ``tls`` none yet, for ``tls-first`` none without ``handshake``);
    ``sock`` is closed when one fails."""
    if transport not in TRANSPORTS:
        sock.close()
        raise ValueError(f"unknown transport {transport!r}")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        if transport not in WEBSOCKET_TRANSPORTS:
            stream = SocketStream(sock, transport, server_side=server_side)
            if transport == "tls-first" and handshake:
                stream.start_tls(context, host, timeout=timeout)
            return stream
        prefix = ""
        if transport == "wss":
            sock = _wrap(sock, context, host, timeout, server_side=server_side)
            prefix = f"TLS established: {sock.version()}; "
        deflate = transport == "ws-deflate"
        return WebSocketStream(
            sock, transport, host, port, deflate=deflate, timeout=timeout, prefix=prefix,
            server_side=server_side,
        )  # fmt: skip
    except BaseException:
        sock.close()
        raise


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
    return _over(
        sock, transport, host, port, timeout=timeout, context=context, server_side=False,
        handshake=handshake,
    )  # fmt: skip


def accept_stream(
    sock: socket.socket,
    transport: str,
    *,
    timeout: float,
    context: ssl.SSLContext | None = None,
) -> Stream:
    """The server's side of ``open_stream``: a connection a listener accepted, as a stream over
    ``transport`` with its handshakes done in the server's role (for ``tls`` none yet: the
    caller upgrades, ``SocketStream.start_tls``, after sending its INFO in clear). HandshakeError
    (and ``sock`` closed) when a handshake fails or the client does not finish it within
    ``timeout``; ``context`` presents the server's certificate (``server_context``)."""
    return _over(sock, transport, "", 0, timeout=timeout, context=context, server_side=True)
