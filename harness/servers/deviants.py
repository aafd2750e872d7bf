"""Deviant servers: a real server behind a loopback proxy that breaks exactly one documented rule.

This measures the suite itself: a deviation the suite cannot catch is a hole in the vectors.
The proxy parses both directions with the reference parser, passes every operation through the
deviation (a small pure function over operations, from a table) and re-encodes it canonically.
Bytes the reference rejects or cannot re-encode go on exactly as they came, so the real server
(or client) judges them; with the ``none`` deviation the proxy changes nothing that matters.

``python -m nats_conformance.harness.servers.deviants`` prints the catalog.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import select
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ...conformance import subjects
from ...conformance.protocol import (
    CRLF,
    DEFAULT_MAX_CONTROL_LINE,
    DEFAULT_MAX_PAYLOAD,
    SERVER_ERRORS,
    Connect,
    Direction,
    Err,
    Event,
    HMsg,
    HPub,
    Info,
    Limits,
    Msg,
    Ok,
    Op,
    Parser,
    Pong,
    ProtocolError,
    Pub,
    Sub,
    Unsub,
    encode,
)
from ...conformance.transports import DEFAULT_TRANSPORT
from ..runtime.limits import READ_LIMITS
from .specs import RunningServer, TargetError, WireTarget

LOCALHOST = "127.0.0.1"
CHUNK = 1 << 16
POLL = 0.1  # seconds between checks whether a proxy thread should stop
SEND_TIMEOUT = 2.0  # a peer that takes no bytes for this long is dropped
CONNECT_TIMEOUT = 3.0
JOIN_TIMEOUT = SEND_TIMEOUT + 1.0  # a proxy thread ends within this after being told


class Action(Enum):
    """What a deviation can do to the connection itself, besides changing operations."""

    CLOSE = "close"  # close both sides now
    HOLD_OPEN = "hold-open"  # when the server closes, keep the client's side open


@dataclass(frozen=True)
class Delay:
    """Hold what follows in this direction back for ``seconds`` (a timer that fires late)."""

    seconds: float


# An operation to encode, bytes to send as they are, an action, or a delay.
Out = Op | bytes | Action | Delay


@dataclass
class Session:
    """What a deviation knows of one proxied connection, and its one way to add operations."""

    subs: dict[str, Sub] = field(default_factory=dict)  # the client's live subscriptions, by sid
    to_client: list[Op] = field(default_factory=list)  # made up; sent before the server's next op


Transform = Callable[[Op, Session], list[Out]]


def keep(op: Op, session: Session) -> list[Out]:
    return [op]


@dataclass(frozen=True)
class Deviation:
    """One rule broken: what the broken server does, the rule it breaks, and how."""

    name: str
    description: str  # what the server does wrong, and the document rule it breaks
    server: Transform = keep  # applied to each operation the server sends
    client: Transform = keep  # applied to each operation the client sends


def _on(types: type | tuple[type, ...], change: Callable[[Any], list[Out]]) -> Transform:
    """A transform that changes the operations of ``types`` and keeps every other one."""

    def transform(op: Op, session: Session) -> list[Out]:
        return change(op) if isinstance(op, types) else [op]

    return transform


_DELIVERIES = (Msg, HMsg)
# The -ERR texts of client-protocol.txt, "+OK/ERR", by whether the connection closes after them
# (the reference's table: the ones a wire case can provoke).
_CLOSING_ERRORS = frozenset(f"'{err}'" for err, closes in SERVER_ERRORS.values() if closes and err)
_OPEN_ERRORS = frozenset(f"'{err}'" for err, closes in SERVER_ERRORS.values() if not closes and err)


def _encoded(op: Op) -> bytes:
    data = encode(op)
    assert isinstance(data, bytes), data  # deviations only see operations that encode
    return data


def _resized(op: Op, *deltas: int) -> bytes:
    """``op`` encoded with its trailing size fields changed by ``deltas`` (payload unchanged)."""
    line, _, rest = _encoded(op).partition(CRLF)
    fields = line.split(b" ")
    for i, delta in enumerate(deltas, start=len(fields) - len(deltas)):
        fields[i] = str(int(fields[i]) + delta).encode()
    return b" ".join(fields) + CRLF + rest


def _lf_only(op: Op) -> list[Out]:
    return [_encoded(op).replace(CRLF, b"\n", 1)]  # the control line's end; a payload's stays


def _fold_header_names(op: HMsg) -> list[Out]:
    version, *lines = op.headers.split(CRLF)
    folded = [name.lower() + sep + value for name, sep, value in (x.partition(b":") for x in lines)]
    return [dataclasses.replace(op, headers=CRLF.join([version, *folded]))]


def _deliver_to_nonmatching(op: Op, session: Session) -> list[Out]:
    """Besides forwarding a publish, deliver it to each subscription whose pattern misses it."""
    if isinstance(op, Pub | HPub):
        for sid, sub in session.subs.items():
            if not subjects.matches(sub.subject, op.subject):
                session.to_client.append(
                    Msg(op.subject, sid, op.reply, op.payload)
                    if isinstance(op, Pub)
                    else HMsg(op.subject, sid, op.reply, op.headers, op.payload)
                )
    return [op]


def _spaced_msg(op: Msg) -> list[Out]:
    line, _, rest = _encoded(op).partition(CRLF)
    return [line.replace(b" ", b"  ") + CRLF + rest]


def _protocol_one(op: Connect) -> list[Out]:
    """CONNECT with a protocol version other than 0 or 1 goes on as protocol 1."""
    version = op.options.get("protocol")
    if version in (None, 0, 1) or isinstance(version, bool):
        return [op]
    return [Connect({**op.options, "protocol": 1})]


# What the server says when a timer ends a connection (nats-server's texts and the documents').
_TIMEOUT_ERRORS = ("Timeout'", "'Stale Connection'")
LATE = 1.0  # seconds a late timer's -ERR (and the close after it) is held back


def _auth_timeout_at_once(op: Info) -> list[Out]:
    """A server that requires authentication ends the connection as soon as it has greeted."""
    if not op.options.get("auth_required"):
        return [op]
    return [op, Err("'Authorization Timeout'"), Action.CLOSE]


def _ignore_max(op: Unsub) -> list[Out]:
    """An UNSUB with a max becomes one for a sid no subscription has: the server still answers
    it as an UNSUB (+OK when verbose) and changes nothing."""
    return [op] if op.max_msgs is None else [Unsub(f"{op.sid}.ignored", op.max_msgs)]


_CATALOG = [
    Deviation(
        "none",
        "No deviation: every operation re-encoded canonically and passed on (the proxy alone).",
    ),
    Deviation(
        "size-mismatch",
        "MSG announces one byte more than its payload. Breaks client-protocol.txt, MSG: "
        "'#bytes: Size of the payload in bytes'.",
        server=_on(Msg, lambda op: [_resized(op, 1)]),
    ),
    Deviation(
        "lf-only",
        "Every control line the server sends ends in LF alone. Breaks client-protocol.txt, "
        "Protocol conventions, Newlines: CR LF (0x0D0A) terminates protocol messages.",
        server=lambda op, session: _lf_only(op),
    ),
    Deviation(
        "hmsg-wrong-lengths",
        "HMSG counts its header and total sizes without the blank line that ends the header "
        "block. Breaks client-protocol.txt, HMSG: '#header bytes: The size of the headers "
        "section in bytes including the ␍␊␍␊ delimiter before the payload'.",
        server=_on(HMsg, lambda op: [_resized(op, -2, -2)]),
    ),
    Deviation(
        "headers-dropped",
        "A message published with headers is delivered as MSG, headers lost. Breaks "
        "adr-4-headers.txt: 'Clients will see HMSG protocol lines for MSGs that contain headers'.",
        server=_on(HMsg, lambda op: [Msg(op.subject, op.sid, op.reply, op.payload)]),
    ),
    Deviation(
        "header-names-case-folded",
        "Header names are delivered in lower case. Breaks client-protocol.txt, HPUB: 'Headers "
        "can be mixed case and NATS will preserve case between message publisher and message "
        "receiver(s)'.",
        server=_on(HMsg, _fold_header_names),
    ),
    Deviation(
        "err-text-changed",
        "-ERR messages are reworded (lower case). Breaks client-protocol.txt, +OK/ERR, which "
        "gives the exact texts, e.g. -ERR 'Invalid Subject'.",
        server=_on(Err, lambda op: [Err(op.message.lower())]),
    ),
    Deviation(
        "closing-err-left-open",
        "After an -ERR that closes the connection (e.g. 'Unknown Protocol Operation'), the "
        "client's connection stays open. Breaks client-protocol.txt, +OK/ERR: 'Some protocol "
        "errors result in the server closing the connection'.",
        server=_on(
            Err, lambda op: [op, Action.HOLD_OPEN] if op.message in _CLOSING_ERRORS else [op]
        ),
    ),
    Deviation(
        "non-closing-err-closes",
        "The server closes the connection after -ERR 'Invalid Subject'. Breaks "
        "client-protocol.txt, +OK/ERR: 'Protocol error messages where the connection remains "
        "open are listed below' ('Invalid Subject' among them).",
        server=_on(Err, lambda op: [op, Action.CLOSE] if op.message in _OPEN_ERRORS else [op]),
    ),
    Deviation(
        "err-not-sent",
        "The server sends no -ERR (it still closes where it would). Breaks client-protocol.txt, "
        "+OK/ERR: 'The -ERR message is used by the server indicate a protocol, authorization, "
        "or other runtime connection error to the client'.",
        server=_on(Err, lambda op: []),
    ),
    Deviation(
        "ok-not-sent",
        "A verbose connection gets no +OK. Breaks client-protocol.txt, +OK/ERR: 'When the "
        "verbose connection option is set to true ..., the server acknowledges each "
        "well-formed protocol message from the client with a +OK message'.",
        server=_on(Ok, lambda op: []),
    ),
    Deviation(
        "pong-not-sent",
        "The server does not answer PING. Breaks client-protocol.txt, PING/PONG: 'You can also "
        "ping the server and will receive a pong reply'.",
        server=_on(Pong, lambda op: []),
    ),
    Deviation(
        "msg-to-nonmatching-sub",
        "A message is also delivered to the connection's subscriptions whose subject does not "
        "match it. Breaks client-protocol.txt, Wildcards: '*' matches a single token, '>' one or "
        "more tokens at the tail, and literal tokens only themselves.",
        client=_deliver_to_nonmatching,
    ),
    Deviation(
        "unsub-max-ignored",
        "UNSUB with max_msgs is acknowledged but has no effect (the subscription stays). Breaks "
        "client-protocol.txt, UNSUB: 'auto-unsubscribes after the specified number of messages "
        "has been received'.",
        client=_on(Unsub, _ignore_max),
    ),
    Deviation(
        "reply-dropped",
        "Messages are delivered without their reply subject. Breaks client-protocol.txt, PUB: "
        "'If a reply subject is supplied, it will be delivered to eligible subscribers along "
        "with the supplied payload'.",
        server=_on(_DELIVERIES, lambda op: [dataclasses.replace(op, reply=None)]),
    ),
    Deviation(
        "payload-corrupted",
        "The lowest bit of every payload byte is flipped. Breaks client-protocol.txt, PUB: 'it "
        "will be delivered to eligible subscribers along with the supplied payload'.",
        server=_on(
            _DELIVERIES,
            lambda op: [dataclasses.replace(op, payload=bytes(b ^ 1 for b in op.payload))],
        ),
    ),
    Deviation(
        "duplicate-delivery",
        "Every message is delivered twice to the same subscription. Breaks client-protocol.txt, "
        "MSG: 'used to deliver an application message to the client' (one message, one "
        "delivery per subscription; UNSUB's max_msgs counts them).",
        server=_on(_DELIVERIES, lambda op: [op, op]),
    ),
    Deviation(
        "sid-changed",
        "Messages carry a different sid from the subscription's. Breaks client-protocol.txt, "
        "MSG: 'sid: The unique alphanumeric subscription ID of the subject'.",
        server=_on(_DELIVERIES, lambda op: [dataclasses.replace(op, sid=op.sid + "0")]),
    ),
    Deviation(
        "subject-case-changed",
        "Messages are delivered with the case of their subject swapped. Breaks "
        "client-protocol.txt, Protocol conventions: 'Subject names, including reply subject "
        "names, are case-sensitive'; MSG: 'subject: Subject name this message was received on'.",
        server=_on(
            _DELIVERIES, lambda op: [dataclasses.replace(op, subject=op.subject.swapcase())]
        ),
    ),
    Deviation(
        "permission-violation-silent",
        "A publish or subscription the user may not make is dropped without -ERR. Breaks "
        "client-protocol.txt, +OK/ERR: -ERR 'Permissions Violation for Publish to <subject>' "
        "and '... for Subscription to <subject>'.",
        server=_on(Err, lambda op: [] if "Permissions Violation" in op.message else [op]),
    ),
    Deviation(
        "timeouts-not-enforced",
        "A connection that never authenticates, or leaves the server's PINGs unanswered, is "
        "kept open (the -ERR and the close never reach the client). Breaks client-protocol.txt, "
        "+OK/ERR: 'Authorization Timeout' (default 1 second) and 'Stale Connection' close it.",
        server=_on(
            Err,
            lambda op: [Action.HOLD_OPEN] if op.message.endswith(_TIMEOUT_ERRORS) else [op],
        ),
    ),
    Deviation(
        "timers-late",
        f"The -ERR of a timer (authentication timeout, stale connection), and the close after "
        f"it, come {LATE:g} s late. Breaks client-protocol.txt, +OK/ERR: 'Authorization "
        f"Timeout': 'Client took too long to authenticate ... (default 1 second)'; PING/PONG: "
        f"PINGs 'at a configurable interval'.",
        server=_on(
            Err, lambda op: [Delay(LATE), op] if op.message.endswith(_TIMEOUT_ERRORS) else [op]
        ),
    ),
    Deviation(
        "auth-timeout-at-once",
        "A server that requires authentication sends -ERR 'Authorization Timeout' and closes "
        "right after its INFO, before any timeout has passed. Breaks client-protocol.txt, "
        "+OK/ERR: 'Authorization Timeout': 'Client took too long to authenticate to the server "
        "after establishing a connection (default 1 second)'.",
        server=_on(Info, _auth_timeout_at_once),
    ),
    Deviation(
        "stops-answering",
        "The server greets with INFO, then sends nothing more and never closes the connection: "
        "it looks hung (a robustness failure). Breaks client-protocol.txt, PING/PONG: 'You can "
        "also ping the server and will receive a pong reply'.",
        server=lambda op, session: [op] if isinstance(op, Info) else [Action.HOLD_OPEN],
    ),
    Deviation(
        "msg-fields-double-spaced",
        "MSG control lines separate their fields with two spaces. Breaks client-protocol.txt, "
        "MSG: 'MSG <subject> <sid> [reply-to] <#bytes>␍␊[payload]␍␊' (fields separated by "
        "single spaces, as the byte-exact delivery case expects).",
        server=_on(Msg, _spaced_msg),
    ),
    Deviation(
        "unknown-protocol-accepted",
        "CONNECT with a protocol version the documents do not define is accepted as protocol 1. "
        "Breaks client-protocol.txt, +OK/ERR: -ERR 'Invalid Client Protocol' closes the "
        "connection.",
        client=_on(Connect, _protocol_one),
    ),
    Deviation(
        "info-not-sent",
        "The server sends no INFO on connect. Breaks client-protocol.txt, Protocol messages: "
        "INFO is 'Sent to client after initial TCP/IP connection'.",
        server=_on(Info, lambda op: []),
    ),
]
DEVIATIONS: dict[str, Deviation] = {d.name: d for d in _CATALOG}


# --- one direction of one connection -------------------------------------------------------------

_LINES = re.compile(rb"[^\n]*\n|[^\n]+")  # every operation ends with a line end


def _passable(event: Event) -> bool:
    """An operation the reference parsed and can encode again: the deviation may handle it."""
    return not isinstance(event, ProtocolError) and isinstance(encode(event), bytes)


class ProxyStream:
    """One direction of one connection: parsed by the reference, each operation transformed and
    re-encoded. An operation the reference rejects or cannot encode goes on as the bytes that
    carried it; after an error that ends parsing, every byte does."""

    def __init__(
        self, direction: Direction, limits: Limits, transform: Callable[[Op], list[Out]]
    ) -> None:
        self._direction = direction
        self._limits = limits
        self._transform = transform
        self._parser = Parser(direction, limits)
        self._raw = False
        self._mark()

    def _mark(self) -> None:
        """The parser stands between two operations: the bytes held from here on are one span."""
        self._held = bytearray()  # bytes since the mark
        self._passed = 0  # operations of those bytes already passed on
        self._state = (self._parser.headers, self._parser.pedantic)

    def feed(self, data: bytes) -> list[bytes | Action | Delay]:
        """What to send on for ``data``: encoded operations, raw bytes and actions, in order."""
        if self._raw:
            return [data]
        self._held += data
        events = self._parser.feed(data)
        if not all(_passable(e) for e in events):
            return self._replay()
        out = self._pass(events)
        self._passed += len(events)
        if not self._parser.incomplete:
            self._mark()
        return out

    def rest(self) -> bytes:
        """At the end of the stream: the bytes of an unfinished operation, to go on as they are."""
        if self._raw or not self._parser.incomplete:
            return b""
        self._replay()  # passes nothing new: every operation of the span went on already
        return bytes(self._held)

    def _pass(self, ops: list[Event]) -> list[bytes | Action | Delay]:
        out: list[bytes | Action | Delay] = []
        for op in ops:
            assert not isinstance(op, ProtocolError)
            for item in self._transform(op):
                if isinstance(item, bytes | Action | Delay):
                    out.append(item)
                else:
                    data = encode(item)
                    if not isinstance(data, bytes):
                        raise ValueError(f"a deviation made an operation it cannot encode: {item}")
                    out.append(data)
        return out

    def _replay(self) -> list[bytes | Action | Delay]:
        """Parse the held span again, a line at a time, so that each operation the reference
        rejects or cannot encode is found with the bytes that carried it."""
        held, skip = self._held, self._passed
        headers, pedantic = self._state
        self._parser = Parser(self._direction, self._limits, headers=headers, pedantic=pedantic)
        self._mark()
        out: list[bytes | Action | Delay] = []
        lines = _LINES.findall(held)
        for i, line in enumerate(lines):
            self._held += line
            events = self._parser.feed(line)
            if not events:
                continue
            if not all(_passable(e) for e in events):
                out.append(bytes(self._held))
                if self._parser.closed:
                    self._raw = True
                    out.append(b"".join(lines[i + 1 :]))
                    return out
            else:
                out += self._pass(events[skip:])
                skip = max(0, skip - len(events))
            self._mark()
        return out


# --- the proxy -----------------------------------------------------------------------------------


class _Connection:
    """One client connection and its own connection to the server, pumped by two threads."""

    def __init__(
        self, client: socket.socket, upstream: socket.socket, deviation: Deviation, limits: Limits
    ) -> None:
        self._client, self._upstream = client, upstream
        self._deviation = deviation
        self._session = Session()
        self._lock = threading.Lock()  # the session, shared by both directions
        self._stop = threading.Event()
        self._hold_open = False
        self._finished = 0
        for sock in (client, upstream):
            sock.settimeout(SEND_TIMEOUT)  # reads wait in select(), so this bounds sends only
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        to_server = ProxyStream(Direction.CLIENT, limits, self._from_client)
        to_client = ProxyStream(Direction.SERVER, READ_LIMITS, self._from_server)
        self._threads = [
            threading.Thread(target=self._pump, args=(client, upstream, to_server), daemon=True),
            threading.Thread(target=self._pump, args=(upstream, client, to_client), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @property
    def done(self) -> bool:
        return not any(thread.is_alive() for thread in self._threads)

    def settle(self) -> None:
        """If the client has closed its side (asked of the kernel, nothing read), wait until the
        client's pump has passed on what it sent and closed the server's side: so that the server
        sees this close before the proxy's next connection, in the order the client made them."""
        poller = select.poll()
        try:
            poller.register(self._client, select.POLLRDHUP)
        except (OSError, ValueError):  # closed meanwhile
            return
        if poller.poll(0):
            self._threads[0].join(JOIN_TIMEOUT)

    def _from_client(self, op: Op) -> list[Out]:
        if isinstance(op, Sub):
            self._session.subs[op.sid] = op
        elif isinstance(op, Unsub) and op.max_msgs is None:
            self._session.subs.pop(op.sid, None)
        return self._deviation.client(op, self._session)

    def _from_server(self, op: Op) -> list[Out]:
        made_up, self._session.to_client = self._session.to_client, []
        return [*made_up, *self._deviation.server(op, self._session)]

    def _pump(self, src: socket.socket, dst: socket.socket, stream: ProxyStream) -> None:
        from_server = src is self._upstream
        server_closed = False
        try:
            server_closed = self._forward(src, dst, stream) and from_server
        finally:
            self._end(stop_other=not (server_closed and self._hold_open))

    def _forward(self, src: socket.socket, dst: socket.socket, stream: ProxyStream) -> bool:
        """Pass ``src``'s bytes through ``stream`` to ``dst``; True when ``src`` closed."""
        while not self._stop.is_set():
            if not select.select([src], [], [], POLL)[0]:
                continue
            try:
                data = src.recv(CHUNK)
            except OSError:
                data = b""
            if not data:
                self._send(dst, stream.rest())
                return True
            with self._lock:
                out = stream.feed(data)
            for item in out:
                if item is Action.CLOSE:
                    return False
                if isinstance(item, Delay):
                    if self._stop.wait(item.seconds):
                        return False
                elif item is Action.HOLD_OPEN:
                    self._hold_open = True
                elif not self._send(dst, item) and dst is self._client:
                    return False  # the client is gone
                # A server that closed takes no more bytes: ignored, what it sent first still comes.
        return False

    @staticmethod
    def _send(sock: socket.socket, data: bytes) -> bool:
        if not data:
            return True
        try:
            sock.sendall(data)
        except OSError:
            return False
        return True

    def _end(self, *, stop_other: bool) -> None:
        """One pump is done. Unless the deviation holds the client's side open after the server
        closed, the other pump stops too; the last one out closes both sockets."""
        if stop_other:
            self._stop.set()
            self._shutdown()  # now: the peers must see the close as soon as they would directly
        with self._lock:
            self._finished += 1
            last = self._finished == len(self._threads)
        if last:
            self._shutdown()
            self._client.close()
            self._upstream.close()

    def _shutdown(self) -> None:
        for sock in (self._client, self._upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self._shutdown()
        for thread in self._threads:
            thread.join(JOIN_TIMEOUT)


class DeviantProxy:
    """A TCP proxy on a free 127.0.0.1 port in front of one server, applying one deviation."""

    def __init__(self, deviation: Deviation, upstream: tuple[str, int], limits: Limits) -> None:
        self.deviation = deviation
        self._upstream = upstream
        self._limits = limits
        self._listener = socket.create_server((LOCALHOST, 0))
        self.host, self.port = LOCALHOST, self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._connections: list[_Connection] = []
        self._thread = threading.Thread(
            target=self._accept, name=f"deviant-proxy:{self.port}", daemon=True
        )
        self._thread.start()

    def _accept(self) -> None:
        try:
            while not self._stop.is_set():
                if not select.select([self._listener], [], [], POLL)[0]:
                    continue
                try:
                    client, _ = self._listener.accept()
                except OSError:
                    continue
                with self._lock:
                    self._connections = [c for c in self._connections if not c.done]
                    for connection in self._connections:
                        connection.settle()
                try:
                    upstream = socket.create_connection(self._upstream, timeout=CONNECT_TIMEOUT)
                except OSError:
                    client.close()  # the server is gone: so is the client's connection
                    continue
                connection = _Connection(client, upstream, self.deviation, self._limits)
                with self._lock:
                    self._connections.append(connection)
        finally:
            self._listener.close()

    def close(self) -> None:
        """Stop accepting, end every connection and wait for the proxy's threads."""
        self._stop.set()
        self._thread.join(JOIN_TIMEOUT)
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()


def client_limits(config: Mapping[str, Any]) -> Limits:
    """The limits the proxy parses client bytes with: the server's configured ones, else the
    documents' defaults. Anything over them goes on raw for the server to judge; the point is
    only that the proxy never waits for a line end that the server would not wait for."""
    return Limits(
        max_control_line=config.get("max_control_line", DEFAULT_MAX_CONTROL_LINE),
        max_payload=config.get("max_payload", DEFAULT_MAX_PAYLOAD),
    )


# --- the target ----------------------------------------------------------------------------------


class DeviantTarget:
    """A server target whose servers are another target's, each behind a deviant proxy.

    A ``harness.servers.specs.WireTarget``, as the target it wraps.
    """

    kind = "deviant"

    def __init__(self, deviation: Deviation, inner: WireTarget) -> None:
        self.deviation = deviation
        self.inner = inner
        self.name = f"deviant:{deviation.name}:{inner.name}"
        self.configurable = inner.configurable
        self._lock = threading.Lock()
        self._servers: dict[str, RunningServer] = {}
        self._proxies: list[DeviantProxy] = []
        self._closed = False

    def version(self) -> str:
        return self.inner.version()

    def lacks(self, transport: str) -> str | None:
        """The proxy rewrites plaintext NATS bytes: plain TCP only."""
        if transport == DEFAULT_TRANSPORT:
            return None
        return f"a deviant proxy rewrites plaintext NATS bytes: tcp only, not {transport}"

    def server(
        self, config: Mapping[str, Any], transport: str = DEFAULT_TRANSPORT
    ) -> RunningServer:
        """The inner target's server for ``config``, behind a proxy of its own (started once)."""
        lacking = self.lacks(transport)
        if lacking is not None:
            raise TargetError(lacking)
        key = json.dumps(dict(config), sort_keys=True)
        with self._lock:
            if self._closed:
                raise TargetError(f"target {self.name} is closed")
            if key not in self._servers:
                real = self.inner.server(config)
                try:
                    proxy = DeviantProxy(
                        self.deviation, (real.host, real.port), client_limits(config)
                    )
                except OSError as exc:
                    raise TargetError(f"{self.name}: cannot start a proxy: {exc}") from None
                self._proxies.append(proxy)
                url = f"nats://{proxy.host}:{proxy.port}"
                self._servers[key] = RunningServer(
                    url, proxy.host, proxy.port, real.version, real.log_path
                )
            return self._servers[key]

    def gone(
        self, config: Mapping[str, Any], transport: str = DEFAULT_TRANSPORT, *, within: float = 0.0
    ) -> str | None:
        """Why the inner target's server for ``config`` no longer runs (None: it does)."""
        return self.inner.gone(config, transport, within=within)

    def close(self) -> None:
        """Stop every proxy, then the inner target's servers."""
        with self._lock:
            self._closed = True
            proxies, self._proxies = self._proxies, []
        for proxy in proxies:
            proxy.close()
        self.inner.close()

    def __enter__(self) -> DeviantTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DeviantTarget({self.name!r})"


def catalog_text() -> str:
    return "\n".join(f"{d.name}: {d.description}" for d in DEVIATIONS.values())


if __name__ == "__main__":
    print(catalog_text())
