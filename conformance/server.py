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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conformance import subjects
from conformance.protocol import (
    DEFAULT_MAX_CONTROL_LINE,
    DEFAULT_MAX_PAYLOAD,
    Connect,
    Direction,
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

    @property
    def auth_required(self) -> bool:
        return self.user is not None or self.token is not None


@dataclass
class _Subscription:
    subject: str
    queue: str | None
    max_msgs: int | None = None
    delivered: int = 0


@dataclass
class ServerModel:
    """One client connection as the documents describe the server side of it."""

    config: ServerConfig = field(default_factory=ServerConfig)
    verbose: bool = True
    echo: bool = True
    authenticated: bool = False
    closed: bool = False
    subscriptions: dict[str, _Subscription] = field(default_factory=dict)
    parser: Parser = field(init=False)

    def __post_init__(self) -> None:
        limits = Limits(self.config.max_control_line, self.config.max_payload)
        self.parser = Parser(Direction.CLIENT, limits=limits, headers=False, pedantic=False)
        self.authenticated = not self.config.auth_required

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

    def receive(self, data: bytes) -> list[Op]:
        """Feed client bytes; return what the server sends back, in order."""
        out: list[Op] = []
        for event in self.parser.feed(data):
            if self.closed:
                break
            self._handle(event, out)
        return out

    def _fail(self, error: ProtocolError, out: list[Op]) -> None:
        err = error.to_err()
        if err is not None:
            out.append(err)
        if error.closes:
            self.closed = True

    def _handle(self, event: Event, out: list[Op]) -> None:
        if isinstance(event, ProtocolError):
            self._fail(event, out)
            return
        if not self.authenticated and not isinstance(event, Connect):
            self._fail(protocol_error("authorization_violation", Direction.CLIENT), out)
            return
        if isinstance(event, Ping):
            out.append(Pong())
            return
        if isinstance(event, Pong):
            return
        if isinstance(event, Connect):
            if not self._authorize(event.options):
                self._fail(protocol_error("authorization_violation", Direction.CLIENT), out)
                return
            self.verbose = event.options.get("verbose", True) is not False
            self.echo = event.options.get("echo", True) is not False
        elif isinstance(event, Sub):
            self.subscriptions[event.sid] = _Subscription(event.subject, event.queue)
        elif isinstance(event, Unsub):
            self._unsubscribe(event)
        if self.verbose:
            out.append(Ok())
        if isinstance(event, Pub | HPub) and self.echo:
            self._deliver(event, out)

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

    def _deliver(self, pub: Pub | HPub, out: list[Op]) -> None:
        """Deliver to each matching subscription; a queue group gets one copy (its first member)."""
        groups_served: set[str] = set()
        for sid, sub in list(self.subscriptions.items()):
            if not subjects.matches(sub.subject, pub.subject):
                continue
            if sub.queue is not None:
                if sub.queue in groups_served:
                    continue
                groups_served.add(sub.queue)
            if isinstance(pub, HPub):
                out.append(HMsg(pub.subject, sid, pub.reply, pub.headers, pub.payload))
            else:
                out.append(Msg(pub.subject, sid, pub.reply, pub.payload))
            sub.delivered += 1
            if sub.max_msgs is not None and sub.delivered >= sub.max_msgs:
                del self.subscriptions[sid]
