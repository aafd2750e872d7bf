"""A scriptable fake NATS server on 127.0.0.1, for checking client libraries.

It plays the server role of the reference. It sends an INFO it controls, reads the client's bytes
with ``conformance.protocol.Parser(Direction.CLIENT)`` (what the check script sees), and answers
as the reference server model ``conformance.server.ServerModel`` does: +OK in verbose mode, PONG
for PING (the script can withhold or delay it), MSG for the connection's own subscriptions, -ERR
and a close for protocol errors (the script can turn these off). Beyond that it does what the
check script tells it: wait for an operation (the CONNECT, a SUB and its sid), push arbitrary
bytes at a chosen moment (split into TCP segments at given offsets, with small pauses), react to
operations as they arrive (answer a request), close. What it sends comes from the reference
encoder and the model, or is bytes the script wrote; there is no protocol logic here.

It serves one transport (``conformance.transports.TRANSPORTS``) through the streams the wire
client uses, in the server's role (``accept_stream``): plain TCP; TLS after a plaintext INFO that
says ``tls_required``; TLS before the INFO (TLS-first); WebSocket (binary messages), over TLS,
and with permessage-deflate accepted when the client offers it. The certificate is the run's
(``harness.runtime.certs``), for 127.0.0.1 and localhost.

Every wait has a deadline (a client that never finishes a handshake is noted and let go), every
thread is joined by ``close``, and everything on the wire is recorded in a
``harness.runtime.transcripts.Transcript``: the NATS bytes (``send``: the fake server's,
``recv``: the client's), whatever carried them, with the handshakes and what happened beneath
the NATS bytes (a text frame, a ping, a close frame) as notes.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ...conformance import frame_layouts, protocol, server, subjects, transport_model
from ...conformance.transports import DEFAULT_TRANSPORT, TLS_TRANSPORTS, TRANSPORTS
from ..runtime.certs import run_certificates
from ..runtime.limits import READ_LIMITS
from ..runtime.streams import (
    URL_SCHEMES,
    HandshakeError,
    SocketStream,
    Stream,
    accept_stream,
    server_context,
)
from ..runtime.transcripts import Direction, Transcript

HOST = "127.0.0.1"
# The client may send anything (the suite's own generous read limits): only bytes that break
# the protocol are parse errors.
CLIENT_LIMITS = READ_LIMITS
# Flood guard: a connection stops reading after this many bytes from the client.
RECEIVE_BUDGET = 64 << 20
RECEIVED_KEPT = 8 << 20  # the client's bytes kept for byte-exact checks (the first ones)
CHUNK = 1 << 16
POLL = 0.02  # how often idle threads look at the stop flag and pending PONGs
SEND_TIMEOUT = 5.0  # seconds one send may wait for a client that does not read
JOIN_TIMEOUT = 2.0
HANDSHAKE_TIMEOUT = 3.0  # seconds a client has for each handshake (TLS, the WebSocket upgrade)
OPENING_BYTES = 16  # how much of what a client sends first is read for its ``opening``
PADDING_FIELD = "nats_conformance_padding"  # an INFO field no client knows, to make INFO long
DEFAULT_INFO: dict[str, Any] = {
    "server_id": "NATSCONFORMANCEFAKESERVER",
    "server_name": "nats-conformance-fake",
    "version": "2.10.0",
    "proto": 1,
    "go": "go1.22",
    "host": HOST,
    "headers": True,
    "max_payload": protocol.DEFAULT_MAX_PAYLOAD,
}
# What the INFO adds over a transport that carries TLS: client-protocol.txt's tls_required ("the
# client should try to connect using TLS"), as a nats-server's TLS listeners say it (its
# WebSocket listener with TLS too).
TLS_INFO: dict[str, Any] = {"tls_required": True}

OpT = TypeVar("OpT")
Reaction = Callable[["FakeConnection", protocol.Event], None]


class HeadersNotEnabled(Exception):
    """Bytes carrying a header-bearing message (HMSG) for a connection whose CONNECT did not
    enable headers: a server sends such a client none, so what it would do with one is not a
    question a case can ask (a skip, with this reason)."""

    def __init__(self) -> None:
        super().__init__(
            "the library's CONNECT did not enable headers (headers: true), and a server sends "
            "such a connection no header-bearing message (HMSG): not asked"
        )


def carries_headers(data: bytes) -> bool:
    """Whether ``data``, from a server, holds a header-bearing message (as the reference parser
    reads it for a connection without headers)."""
    events, _ = protocol.parse(data, protocol.Direction.SERVER, headers=False)
    return any(
        isinstance(e, protocol.ProtocolError) and e.reason == "headers_not_enabled" for e in events
    )


def encode(op: protocol.Op, *, any_headers: bool = False) -> bytes:
    """The reference encoding of ``op``; a script asking for an unencodable one is a bug."""
    data = protocol.encode(op, any_headers=any_headers)
    if isinstance(data, protocol.EncodeError):
        raise ValueError(f"cannot encode {op!r}: {data.reason} ({data.detail})")
    return data


def split(data: bytes, offsets: Iterable[int]) -> list[bytes]:
    """``data`` cut at each offset (0 < offset < len): the pieces, in order, none empty."""
    cuts = sorted({o for o in offsets if 0 < o < len(data)})
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@dataclass
class Received:
    """An event parsed from the client's bytes, with when it completed (seconds since accept)."""

    at: float
    event: protocol.Event


@dataclass
class FakeConnection:
    """One client connection, driven by the check script; the reader thread runs on its own."""

    stream: Stream
    started: float
    model: server.ServerModel
    answer_pings: bool = True  # send the model's PONGs
    pong_delay: float = 0.0  # seconds each PONG is held back
    model_answers: bool = True  # send the model's other answers (+OK, MSG, -ERR and its close)
    transcript: Transcript = field(default_factory=Transcript)
    received: list[Received] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)
    closed_by_client: bool = False  # the client closed (or reset) the connection
    # When (time.monotonic()) the fake server last gave the client something: bytes, or its
    # close. A library that crashes or hangs after that may have done so on what it was given.
    fed_at: float = 0.0
    parse_error: protocol.ProtocolError | None = None
    _closing: bool = False
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _send_lock: threading.Lock = field(default_factory=threading.Lock)
    _pongs_due: list[float] = field(default_factory=list)
    _received: bytearray = field(default_factory=bytearray)  # the client's bytes, RECEIVED_KEPT
    _parser: protocol.Parser = field(
        default_factory=lambda: protocol.Parser(protocol.Direction.CLIENT, limits=CLIENT_LIMITS)
    )
    _thread: threading.Thread | None = None

    # --- recording ---------------------------------------------------------------------------

    def _record(self, direction: Direction, data: bytes) -> None:
        with self._changed:
            self.transcript.add(time.monotonic() - self.started, direction, data)
            if direction == "recv" and len(self._received) < RECEIVED_KEPT:
                self._received += data[: RECEIVED_KEPT - len(self._received)]

    def note(self, text: str) -> None:
        self._record("note", text.encode())

    def _take_notes(self) -> None:
        """What the stream saw beneath the NATS bytes (a text frame, a ping, a close frame)."""
        for text in self.stream.notes():
            self.note(text)

    # --- sending -----------------------------------------------------------------------------

    def send(self, data: bytes, *, split_at: Iterable[int] = (), pause: float = 0.005) -> bool:
        """Send ``data``, as separate writes cut at ``split_at`` with ``pause`` s between them.

        With TCP_NODELAY each write leaves as its own segment (over WebSocket, its own frame).
        Nothing else (no automatic PONG) is sent between the pieces. False (and a note) when
        the client does not take the bytes; HeadersNotEnabled, and nothing sent, for a
        header-bearing message the client's CONNECT did not ask for.
        """
        self._check_headers(data)
        pieces = split(data, split_at)
        with self._send_lock:
            for i, piece in enumerate(pieces):
                if i:
                    time.sleep(pause)
                self._record("send", piece)
                self.fed_at = time.monotonic()
                try:
                    self.stream.send(piece, timeout=SEND_TIMEOUT)
                except OSError as exc:  # the client closed or reset, or stopped reading
                    self._take_notes()
                    self.note(f"send failed: {exc.strerror or exc}")
                    return False
        return True

    def send_frames(self, frames: Sequence[bytes], *, fragments: bool = False) -> bool:
        """Send ``frames`` (a frame layout's, ``conformance.frame_layouts``), each a WebSocket
        message of its own (with ``fragments``, the fragments of one message), in one write:
        ValueError over a transport without frames; else as ``send``."""
        data = b"".join(frames)
        self._check_headers(data)
        with self._send_lock:
            self._record("send", data)
            self.note(frame_layouts.frames_note(frames))
            self.fed_at = time.monotonic()
            try:
                self.stream.send_frames(frames, timeout=SEND_TIMEOUT, fragments=fragments)
            except OSError as exc:  # the client closed or reset, or stopped reading
                self._take_notes()
                self.note(f"send failed: {exc.strerror or exc}")
                return False
        return True

    def _check_headers(self, data: bytes) -> None:
        """HeadersNotEnabled (and a note) for a header-bearing message the client's CONNECT did
        not ask for: a server sends such a client none."""
        if not self.model.headers_enabled and carries_headers(data):
            self.note("not sent: a header-bearing message, and the CONNECT did not enable headers")
            raise HeadersNotEnabled()

    def send_op(self, op: protocol.Op, *, split_at: Iterable[int] = ()) -> bool:
        return self.send(encode(op), split_at=split_at)

    # --- waiting for the client ----------------------------------------------------------------

    def events(self) -> list[protocol.Event]:
        with self._changed:
            return [r.event for r in self.received]

    def ops(self, kind: type[OpT]) -> list[OpT]:
        """Every operation of type ``kind`` the client has sent so far, in order."""
        return [e for e in self.events() if isinstance(e, kind)]

    def wait_for(
        self,
        kind: type[OpT],
        *,
        timeout: float,
        match: Callable[[OpT], bool] = lambda op: True,
        after: int = 0,
    ) -> OpT | None:
        """The first operation of type ``kind`` matching ``match`` among the client's operations
        from index ``after`` on, waiting up to ``timeout`` s; None when none came (or the client
        closed, or its bytes stopped parsing)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for r in self.received[after:]:
                    if isinstance(r.event, kind) and match(r.event):
                        return r.event
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._finished():
                    return None
                self._changed.wait(remaining)

    def wait_connect(self, *, timeout: float) -> protocol.Connect | None:
        return self.wait_for(protocol.Connect, timeout=timeout)

    def received_bytes(self) -> bytes:
        """Everything the client sent so far, as one byte string."""
        with self._changed:
            return bytes(self._received)

    def count(self) -> int:
        """How many events the client's bytes gave so far (an ``after`` for ``wait_for``)."""
        with self._changed:
            return len(self.received)

    def wait_closed(self, *, timeout: float) -> bool:
        """Whether the client closes the connection within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self.closed_by_client:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closing:
                    break
                self._changed.wait(remaining)
            return self.closed_by_client

    def _finished(self) -> bool:
        return self.closed_by_client or self._closing or self.parse_error is not None

    def sid_for(self, subject: str) -> str | None:
        """The sid of the client's latest subscription whose subject matches ``subject``."""
        subs = [s for s in self.ops(protocol.Sub) if subjects.matches(s.subject, subject)]
        return subs[-1].sid if subs else None

    # --- the reader thread ---------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._read, name="fake-nats-conn", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        budget = RECEIVE_BUDGET
        while not self._closing and budget > 0:
            self._send_due_pongs()
            try:
                data = self.stream.receive(CHUNK, timeout=self._next_wait())
            except TimeoutError:
                self._take_notes()
                continue
            except (OSError, ValueError) as exc:  # ValueError: the socket was closed under us
                self._take_notes()
                if not self._closing:
                    self._client_closed(f"connection lost: {getattr(exc, 'strerror', None) or exc}")
                return
            self._take_notes()
            if not data:
                if not self._closing:  # not the fake server's own shutdown
                    self._client_closed("connection closed by the client")
                return
            self._record("recv", data)
            budget -= len(data)
            events = self._parser.feed(data)
            answers = self.model.receive(data)  # first: a script that sees an event sees its state
            self._keep(events)
            if self._answer(answers):
                return
            for event in events:
                for react in list(self.reactions):
                    try:
                        react(self, event)
                    except Exception as exc:  # a script's bug must not end the reading
                        self.note(f"reaction {react!r} raised {type(exc).__name__}: {exc}")
        if budget <= 0:
            self.note(f"stopped reading after {RECEIVE_BUDGET} bytes (flood guard)")

    def _next_wait(self) -> float:
        if not self._pongs_due:
            return POLL
        return min(POLL, max(self._pongs_due[0] - time.monotonic(), 0.001))

    def _keep(self, events: list[protocol.Event]) -> None:
        """Record what the client's bytes gave, for the script's waits."""
        with self._changed:
            for event in events:
                self.received.append(Received(time.monotonic() - self.started, event))
                if isinstance(event, protocol.ProtocolError) and self.parse_error is None:
                    self.parse_error = event
            self._changed.notify_all()
        for event in events:
            if isinstance(event, protocol.ProtocolError):
                self.note(f"the client's bytes break the protocol: {event.reason} ({event.detail})")

    def _answer(self, answers: list[protocol.Op]) -> bool:
        """Send the model's answers as scripted, in order (a delayed PONG goes later); True when
        the model closed the connection and the fake server did too."""
        out = []
        for op in answers:
            if isinstance(op, protocol.Pong):
                if not self.answer_pings:
                    continue
                if self.pong_delay > 0:
                    self._pongs_due.append(time.monotonic() + self.pong_delay)
                    continue
            elif not self.model_answers:
                continue
            out.append(encode(op))
        if out:
            self.send(b"".join(out))
        if self.model.closed and self.model_answers:
            self.note("the reference server model closes the connection")
            self._shut()
            return True
        return False

    def _send_due_pongs(self) -> None:
        now = time.monotonic()
        due = [t for t in self._pongs_due if t <= now]
        if due:
            self._pongs_due = [t for t in self._pongs_due if t > now]
            self.send(encode(protocol.Pong()) * len(due))

    def _client_closed(self, how: str) -> None:
        self._record("close", how.encode())
        # The fake server ends its side too, as a server does: a client closing a TLS or
        # WebSocket connection may wait for the server's end of it.
        self.stream.shutdown()
        if self._parser.incomplete:
            self.note("the connection ended inside an operation")
        with self._changed:
            self.closed_by_client = True
            self._changed.notify_all()

    # --- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection from the server side and join the reader thread."""
        self._shut()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_TIMEOUT)
        self.stream.close()

    def _shut(self) -> None:
        with self._changed:
            already = self._closing
            self._closing = True
            self._changed.notify_all()
        if not already and not self.closed_by_client:
            self._record("close", b"connection closed by the fake server")
            self.fed_at = time.monotonic()
        self.stream.shutdown()  # a WebSocket close frame first, as a server sends one


class FakeServer:
    """Listens on 127.0.0.1 (a free port) over one transport; every connection gets the INFO as
    soon as its handshakes allow, then waits for the check script. Use as a context manager:
    ``close`` ends every connection and thread."""

    def __init__(
        self,
        *,
        info: Mapping[str, Any] | None = None,
        info_bytes: bytes | None = None,
        info_size: int = 0,
        answer_pings: bool = True,
        pong_delay: float = 0.0,
        model_answers: bool = True,
        reactions: Iterable[Reaction] = (),
        transport: str = DEFAULT_TRANSPORT,
        serves: str | None = None,
        report: Callable[[str], None] | None = None,
        allow_non_tls: bool = False,
    ) -> None:
        """``info`` is merged over ``DEFAULT_INFO`` (and ``TLS_INFO`` over a transport with TLS;
        a None value removes a key); ``info_size`` pads the INFO line to at least that many
        bytes with a filler field; ``info_bytes`` replaces the INFO line altogether (a broken
        one). ``answer_pings``, ``pong_delay``, ``model_answers`` and ``reactions`` are each
        connection's initial settings; ``transport`` is what carries every connection.

        A case of the transports themselves sets ``serves``: the transport the fake server
        speaks when it is not the one the client is asked for (``url``), e.g. plain TCP to a
        client that wants TLS, or a WebSocket that declines compression (ws) to a client that
        offers it (ws-deflate); and ``report``, which is told what each connection's handshakes
        saw (the reference's reading of the client's first bytes, what they agreed). With
        ``allow_non_tls`` a server serving ``tls`` is marked "tls available" (tls.txt): its INFO
        says what the reference's listener says then (``transport_model.Listener``), and it
        takes the TLS handshake where the client's first bytes after the INFO start one, and
        stays in clear otherwise."""
        if transport not in TRANSPORTS or (serves or transport) not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r} or {serves!r}")
        self.transport = transport
        self.serves = serves or transport
        if allow_non_tls and self.serves != "tls":
            raise ValueError(f"allow_non_tls marks a server of tls, not of {self.serves}")
        self._available = allow_non_tls
        self._report = report
        self._context: ssl.SSLContext | None = None
        tls_info: dict[str, Any] = {}
        if self.serves in TLS_TRANSPORTS:
            files = run_certificates()
            self._context = server_context(files.chain, files.key)
            tls_info = TLS_INFO
            if allow_non_tls:
                listener = transport_model.Listener.of(self.serves, {"allow_non_tls": True})
                tls_info = {"tls_required": None, **listener.info_fields()}
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(POLL)
        self.port: int = self._listener.getsockname()[1]
        merged = {**DEFAULT_INFO, "port": self.port, **tls_info, **(info or {})}
        self.info = {k: v for k, v in merged.items() if v is not None}
        self._info_bytes = info_bytes
        self._info_size = info_size
        self._answer_pings = answer_pings
        self._pong_delay = pong_delay
        self._model_answers = model_answers
        self._reactions = list(reactions)
        self._stop = threading.Event()
        self._accepted = threading.Condition()
        self.connections: list[FakeConnection] = []
        self.failed: list[Transcript] = []  # connections whose handshakes failed, what they said
        self._greeting: dict[threading.Thread, socket.socket] = {}  # handshakes in progress
        self._handed_out = 0
        self._thread = threading.Thread(target=self._accept, name="fake-nats-accept", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The URL a client connects with: its scheme names the transport."""
        return f"{URL_SCHEMES[self.transport]}://{HOST}:{self.port}"

    def info_line(self) -> bytes:
        if self._info_bytes is not None:
            return self._info_bytes
        return padded_info(self.info, self._info_size)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            # Each connection's handshakes on a thread of its own: a client that stalls in one
            # holds up no other.
            greeter = threading.Thread(
                target=self._greet, args=(sock, time.monotonic()), name="fake-nats-greet",
                daemon=True,
            )  # fmt: skip
            with self._accepted:
                if self._stop.is_set():
                    sock.close()
                    return
                self._greeting[greeter] = sock
            greeter.start()

    def _greet(self, sock: socket.socket, started: float) -> None:
        """The handshakes the transport asks for and the INFO, in the transport's order; then
        the connection is handed out (``accept``), or noted among ``failed``."""
        sock.settimeout(SEND_TIMEOUT)
        transcript = Transcript()
        conn: FakeConnection | None = None
        # Where the client speaks first (a TLS-first handshake, a WebSocket upgrade), its first
        # bytes come before the server's; else after the INFO in clear.
        first = self.serves not in (DEFAULT_TRANSPORT, "tls")
        try:
            if first:
                self._opening(sock, started, transcript)
            stream = accept_stream(
                sock, self.serves, timeout=HANDSHAKE_TIMEOUT, context=self._context
            )
            conn = FakeConnection(
                stream,
                started,
                self._model(),
                answer_pings=self._answer_pings,
                pong_delay=self._pong_delay,
                model_answers=self._model_answers,
                reactions=list(self._reactions),
                transcript=transcript,
            )
            if stream.negotiated:
                self._saw(conn.note, stream.negotiated)
            conn.send(self.info_line())
            read = None if first else self._opening(sock, started, transcript)
            # The upgrade after the INFO, which said tls_required; or, "tls available", where
            # the client starts it.
            if self.serves == "tls" and (not self._available or read == transport_model.TLS_RECORD):
                assert isinstance(stream, SocketStream)
                stream.start_tls(self._context, HOST, timeout=HANDSHAKE_TIMEOUT)
                self._saw(conn.note, stream.negotiated)
        except (HandshakeError, OSError) as exc:
            transcript.add(time.monotonic() - started, "note", f"handshake: {exc}".encode())
            if conn is not None:
                conn.stream.close()
            with self._accepted:
                self.failed.append(transcript)
                self._greeting.pop(threading.current_thread(), None)
            return
        conn.start()
        with self._accepted:
            self._greeting.pop(threading.current_thread(), None)
            if not self._stop.is_set():  # else close() has taken its list already
                self.connections.append(conn)
                self._accepted.notify_all()
                return
        conn.close()

    def _saw(self, note: Callable[[str], None], text: str) -> None:
        """Note what a handshake saw in the transcript, and tell ``report``."""
        note(text)
        if self._report is not None:
            self._report(text)

    def _opening(self, sock: socket.socket, started: float, transcript: Transcript) -> str | None:
        """With ``report`` or "tls available": the client's first bytes on ``sock``, looked at
        (not taken) before the handshake or the protocol reads them, as the reference reads them
        (None: not looked at); nothing once the handshake's time is up or the client closed."""
        if self._report is None and not self._available:
            return None
        data, deadline = b"", time.monotonic() + HANDSHAKE_TIMEOUT
        with contextlib.suppress(OSError):
            # A TLS record's header may come in pieces: look again until it is whole.
            while len(data) < 3 and (left := deadline - time.monotonic()) > 0:
                if not select.select([sock], [], [], left)[0]:
                    break
                peeked = sock.recv(OPENING_BYTES, socket.MSG_PEEK)
                if len(peeked) == len(data):  # the client closed after them
                    break
                data = peeked
        text = transport_model.opening_note(data)
        self._saw(lambda t: transcript.add(time.monotonic() - started, "note", t.encode()), text)
        return transport_model.opening(data)

    def _model(self) -> server.ServerModel:
        """The reference server for one connection: the INFO's max_payload; no authentication
        (a script sets auth_required in INFO to see credentials, not to refuse them)."""
        max_payload = self.info.get("max_payload", protocol.DEFAULT_MAX_PAYLOAD)
        return server.ServerModel(
            server.ServerConfig(
                max_control_line=CLIENT_LIMITS.max_control_line,
                max_payload=max_payload
                if isinstance(max_payload, int)
                else CLIENT_LIMITS.max_payload,
            )
        )

    def accept(self, *, timeout: float) -> FakeConnection | None:
        """The next connection not handed out yet (its handshakes done), waiting up to
        ``timeout`` s for it."""
        deadline = time.monotonic() + timeout
        with self._accepted:
            while len(self.connections) <= self._handed_out:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stop.is_set():
                    return None
                self._accepted.wait(remaining)
            conn = self.connections[self._handed_out]
            self._handed_out += 1
            return conn

    def fed_since(self, moment: float) -> bool:
        """Whether any connection was given something (bytes, a close) after ``moment``
        (time.monotonic())."""
        with self._accepted:
            return any(conn.fed_at > moment for conn in self.connections)

    def transcript_text(self) -> str:
        """Every connection's transcript, one block each; then each failed handshake's."""
        with self._accepted:
            conns, failed = list(self.connections), list(self.failed)
        blocks = [f"connection {i + 1}:\n{c.transcript.text()}" for i, c in enumerate(conns)]
        blocks += [f"failed handshake {i + 1}:\n{t.text()}" for i, t in enumerate(failed)]
        return "\n".join(blocks)

    def close(self) -> None:
        self._stop.set()
        # A shut-down listener wakes the accept thread now (accept raises), not at its next poll.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(JOIN_TIMEOUT)
        with self._accepted:
            conns = list(self.connections)
            greeting = dict(self._greeting)
            self._accepted.notify_all()
        # A handshake in progress ends now (one already inside TLS at its deadline).
        for sock in greeting.values():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for greeter in greeting:
            greeter.join(JOIN_TIMEOUT)
        for conn in conns:
            conn.close()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- server operations a script sends (all through the reference encoder) ----------------------


def info_op(options: Mapping[str, Any]) -> bytes:
    return encode(protocol.Info(dict(options)))


def err_op(text: str) -> bytes:
    """``-ERR '<text>'``, quoted as client-protocol.txt writes every error."""
    return encode(protocol.Err(f"'{text}'"))


def msg_op(subject: str, sid: str, payload: bytes, reply: str | None = None) -> bytes:
    return encode(protocol.Msg(subject, sid, reply, payload))


def hmsg_op(
    subject: str, sid: str, block: bytes, payload: bytes, reply: str | None = None
) -> bytes:
    """An HMSG framing ``block`` by its length, whatever it holds (checks deliver bad blocks)."""
    return encode(protocol.HMsg(subject, sid, reply, block, payload), any_headers=True)


def padded_info(options: Mapping[str, Any], size: int = 0) -> bytes:
    """An INFO line of at least ``size`` bytes: ``options``, plus a filler field when short."""
    line = info_op(options)
    if len(line) >= size:
        return line
    return info_op({**options, PADDING_FIELD: "x" * (size - len(line))})


# A header block for answers to requests (the ADR-4 example's header, as the reference encodes it).
HEADER_BLOCK = b"NATS/1.0\r\nFoodGroup: vegetable\r\n\r\n"


def answer_requests(
    block: bytes, payload: bytes = b""
) -> Callable[[FakeConnection, protocol.Event], None]:
    """A reaction: answer every PUB/HPUB with a reply subject by a message carrying ``block``
    (and ``payload``) to the client's subscription matching that reply subject: an HMSG, or, as
    the reference server does for a connection that did not enable headers, a MSG."""

    def react(conn: FakeConnection, event: protocol.Event) -> None:
        if isinstance(event, protocol.Pub | protocol.HPub) and event.reply:
            sid = conn.sid_for(event.reply)
            if sid is None:
                conn.note(f"no subscription matches the reply subject {event.reply}")
                return
            answer = conn.model.message_for(sid, protocol.HPub(event.reply, None, block, payload))
            conn.send(encode(answer, any_headers=True))

    return react
