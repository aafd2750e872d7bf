"""A reference model of one NATS server connection, sans-I/O: client bytes in, server ops out.

It answers what the documents say a server answers on a single connection: +OK in verbose mode,
PONG for PING, MSG/HMSG for the connection's own matching subscriptions (echo), -ERR for protocol
errors with the documented consequence. It is what wire scripts in the vectors are checked
against before they are run against real servers, and what the fake server plays later.

Where the documents leave a choice, the model takes the documents' words and says so:
- "verbose ... set to true (the default value)" (client-protocol.txt, "+OK/ERR"): verbose is on
  until a CONNECT turns it off, and a CONNECT without "verbose" leaves it on.
- +OK acknowledges "each well-formed protocol message"; PING is acknowledged by its PONG, and
  PONG needs no acknowledgement, so neither gets +OK.
- "echo: ... If set to true, the server ... will not send originating messages" reads inverted
  against the option's name and every client; the model treats echo=false as "do not echo".
- Time passes only where a script says so (``elapse``): the authentication timeout, "(default 1
  second)", ends an unauthenticated connection with -ERR 'Authorization Timeout' at exactly that
  time; with a ping interval the server PINGs at each whole interval, and a connection that
  leaves more than max_pings_out unanswered gets -ERR 'Stale Connection' at the next one
  ("PING/PONG" example: PING, PING, -ERR, closed). Each operation carries the model time it is
  sent at (``take_timed``), so a script's timing bands are checked against it too.
- Permissions: a publish or subscription outside the user's allow list or inside its deny list
  gets -ERR 'Permissions Violation for Publish to <subject>' (or "for Subscription to") and the
  connection stays open, as "+OK/ERR" lists them; nothing is delivered or subscribed.
- CONNECT "protocol" other than 0 or 1 (an int: "optional int") gets -ERR 'Invalid Client
  Protocol' and closes. A connection that did not enable headers gets a message published with
  headers as MSG with the payload alone (the documents are silent; cases on it are info).
- Connections share one server: a message published on one is delivered to the matching
  subscriptions of every connection (a queue group gets one copy: its first member).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import subjects
from .protocol import (
    DEFAULT_MAX_CONTROL_LINE,
    DEFAULT_MAX_PAYLOAD,
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
    Ping,
    Pong,
    ProtocolError,
    Pub,
    Sub,
    Unsub,
    protocol_error,
)


@dataclass(frozen=True)
class ServerConfig:
    max_control_line: int = DEFAULT_MAX_CONTROL_LINE
    max_payload: int = DEFAULT_MAX_PAYLOAD
    user: str | None = None
    password: str | None = None
    token: str | None = None
    auth_timeout: float = 1.0  # "(default 1 second)", client-protocol.txt "+OK/ERR"
    permissions: dict[str, dict[str, list[str]]] | None = None
    ping_interval: float | None = None  # None: no keep-alive PING within a script's time
    max_pings_out: int = 2
    jetstream: bool = False
    # The listeners' settings a case gives (tls.txt, websocket.txt): what the model of a
    # connection's transport (``conformance.transport_model``) reads; the protocol ignores them.
    tls: dict[str, object] | None = None
    allow_non_tls: bool = False
    websocket: dict[str, object] | None = None

    @property
    def auth_required(self) -> bool:
        return self.user is not None or self.token is not None


@dataclass
class _Subscription:
    subject: str
    queue: str | None
    max_msgs: int | None = None
    delivered: int = 0


# Slack for float division when counting whole ping intervals (0.6 / 0.2 is 2.9999999999999996).
_TICK_EPSILON = 1e-9
# CONNECT "protocol": 0 (or absent) and 1 are the versions the documents define; bools are not.
_PROTOCOLS = (0, 1)


def _is_protocol(value: object) -> bool:
    return not isinstance(value, bool) and value in _PROTOCOLS


class Broker:
    """What every connection of one server shares: the configuration and the connections."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.connections: list[ServerModel] = []

    def route(self, pub: Pub | HPub, sender: ServerModel) -> None:
        """Deliver to each matching subscription of every open connection; a queue group gets
        one copy (its first member, in connection then subscription order)."""
        groups_served: set[str] = set()
        for conn in self.connections:
            if conn.closed or (conn is sender and not sender.echo):
                continue
            for sid, sub in list(conn.subscriptions.items()):
                if not subjects.matches(sub.subject, pub.subject):
                    continue
                if sub.queue is not None:
                    if sub.queue in groups_served:
                        continue
                    groups_served.add(sub.queue)
                conn.deliver(sid, sub, pub)


def _permitted(rules: dict[str, list[str]] | None, subject: str) -> bool:
    if rules is None:
        return True
    allow = rules.get("allow")
    allowed = allow is None or any(subjects.matches(pattern, subject) for pattern in allow)
    return allowed and not any(subjects.matches(p, subject) for p in rules.get("deny", []))


class ServerModel:
    """One client connection as the documents describe the server side of it.

    ``receive`` feeds what the client sends and returns what the server sends back on this
    connection, including what other connections' messages delivered to it since the last call;
    ``take`` returns that without sending anything, ``elapse`` lets time pass (``take_timed``:
    each operation with the seconds since the connection opened at which it was sent).
    """

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        broker: Broker | None = None,
        answers_pings: bool = True,
    ) -> None:
        self.broker = broker or Broker(config or ServerConfig())
        self.config = self.broker.config
        self.broker.connections.append(self)
        self.answers_pings = answers_pings  # whether the client answers the server's PINGs
        self.verbose = True
        self.echo = True
        self.closed = False
        self.subscriptions: dict[str, _Subscription] = {}
        self.authenticated = not self.config.auth_required
        self.elapsed = 0.0
        self.pings_out = 0
        self._pending: list[tuple[float, Op]] = []
        limits = Limits(self.config.max_control_line, self.config.max_payload)
        self.parser = Parser(Direction.CLIENT, limits=limits, headers=False, pedantic=False)

    def info(self) -> Info:
        """The INFO a server sends first (the fields this model can vouch for)."""
        options: dict[str, object] = {
            "max_payload": self.config.max_payload,
            "proto": 1,
            "headers": True,
        }
        if self.config.auth_required:
            options["auth_required"] = True
        return Info(options)

    def greet(self, fields: dict[str, object]) -> None:
        """Send the INFO now, with ``fields`` (what the connection's transport says of itself)
        over the model's own."""
        self._send(Info({**self.info().options, **fields}))

    def close(self, message: str | None = None) -> None:
        """End the connection now, with -ERR ``message`` first when given."""
        if message is not None:
            self._send(Err(message))
        self.closed = True

    def receive(self, data: bytes) -> list[Op]:
        """Feed client bytes; return what the server sends back on this connection, in order."""
        self.feed(data)
        return self.take()

    def feed(self, data: bytes) -> None:
        """Feed client bytes; what the server sends back waits for ``take``."""
        for event in self.parser.feed(data):
            if self.closed:
                break
            self._handle(event)

    def take(self) -> list[Op]:
        """What the server sent on this connection since the last ``receive`` or ``take``."""
        return [op for _, op in self.take_timed()]

    def take_timed(self) -> list[tuple[float, Op]]:
        """``take``, each operation with the model time (seconds) it was sent at."""
        out, self._pending = self._pending, []
        return out

    def _send(self, op: Op) -> None:
        self._pending.append((self.elapsed, op))

    def elapse(self, seconds: float) -> None:
        """Let ``seconds`` pass: the authentication timeout and keep-alive PINGs, each at the
        moment it is due."""
        end = self.elapsed + seconds
        cfg = self.config
        due: list[tuple[float, str]] = []
        if not self.authenticated and cfg.auth_timeout <= end:
            due.append((max(cfg.auth_timeout, self.elapsed), "auth"))
        if cfg.ping_interval is not None:
            first = math.floor(self.elapsed / cfg.ping_interval + _TICK_EPSILON) + 1
            last = math.floor(end / cfg.ping_interval + _TICK_EPSILON)
            due += [(k * cfg.ping_interval, "ping") for k in range(first, last + 1)]
        for at, what in sorted(due):
            if self.closed:
                break
            self.elapsed = at
            if what == "auth":
                self.close("'Authorization Timeout'")
            elif self.pings_out >= cfg.max_pings_out:
                self.close("'Stale Connection'")
            else:
                self._send(Ping())
                if not self.answers_pings:
                    self.pings_out += 1
        self.elapsed = end

    @property
    def headers_enabled(self) -> bool:
        """Whether this connection's CONNECT enabled headers (only then may it get HMSG)."""
        return self.parser.headers

    def message_for(self, sid: str, pub: Pub | HPub) -> Msg | HMsg:
        """What subscription ``sid`` of this connection gets for ``pub``: without headers
        enabled in its CONNECT, the payload alone, as MSG."""
        if isinstance(pub, HPub) and self.headers_enabled:
            return HMsg(pub.subject, sid, pub.reply, pub.headers, pub.payload)
        return Msg(pub.subject, sid, pub.reply, pub.payload)

    def deliver(self, sid: str, sub: _Subscription, pub: Pub | HPub) -> None:
        """Queue one message of ``pub`` for subscription ``sid`` of this connection."""
        self._send(self.message_for(sid, pub))
        sub.delivered += 1
        if sub.max_msgs is not None and sub.delivered >= sub.max_msgs:
            del self.subscriptions[sid]

    def _fail(self, error: ProtocolError) -> None:
        err = error.to_err()
        if err is not None:
            self._send(err)
        if error.closes:
            self.closed = True

    def _handle(self, event: Event) -> None:
        if isinstance(event, ProtocolError):
            self._fail(event)
            return
        if not self.authenticated and not isinstance(event, Connect):
            self._fail(protocol_error("authorization_violation", Direction.CLIENT))
            return
        if isinstance(event, Ping):
            self._send(Pong())
            return
        if isinstance(event, Pong):
            self.pings_out = 0
            return
        perms = self.config.permissions or {}
        if isinstance(event, Pub | HPub) and not _permitted(perms.get("publish"), event.subject):
            self._send(Err(f"'Permissions Violation for Publish to {event.subject}'"))
            return
        if isinstance(event, Sub) and not _permitted(perms.get("subscribe"), event.subject):
            self._send(Err(f"'Permissions Violation for Subscription to {event.subject}'"))
            return
        if isinstance(event, Connect):
            if not _is_protocol(event.options.get("protocol", 0)):
                self.close("'Invalid Client Protocol'")
                return
            if not self._authorize(event.options):
                self._fail(protocol_error("authorization_violation", Direction.CLIENT))
                return
            self.verbose = event.options.get("verbose", True) is not False
            self.echo = event.options.get("echo", True) is not False
        elif isinstance(event, Sub):
            self.subscriptions[event.sid] = _Subscription(event.subject, event.queue)
        elif isinstance(event, Unsub):
            self._unsubscribe(event)
        if self.verbose:
            self._send(Ok())
        if isinstance(event, Pub | HPub):
            self.broker.route(event, self)

    def _authorize(self, options: dict[str, object]) -> bool:
        cfg = self.config
        if cfg.token is not None:
            ok = options.get("auth_token") == cfg.token
        elif cfg.user is not None:
            ok = options.get("user") == cfg.user and options.get("pass") == cfg.password
        else:
            ok = True
        self.authenticated = ok
        return ok

    def _unsubscribe(self, op: Unsub) -> None:
        sub = self.subscriptions.get(op.sid)
        if sub is None:
            return
        if op.max_msgs is not None and sub.delivered < op.max_msgs:
            sub.max_msgs = op.max_msgs
        else:
            del self.subscriptions[op.sid]
