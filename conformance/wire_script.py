"""Wire scripts, sans-I/O: which connection each exchange uses, what it keeps, and how what a
server sent in one exchange is judged. ``evaluate`` runs a script against the reference server
model; ``harness.servers.wire`` runs the same script against a live server and judges it with
``compare_exchange``, so the model and a real server are held to one reading of the script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import headers, protocol, server
from .transport_model import TLS_AFTER_INFO, TLS_FIRST, TransportModel, Upgraded
from .transports import DEFAULT_TRANSPORT, WEBSOCKET_TRANSPORTS
from .vector_values import (
    BytesError,
    Mismatch,
    decode_bytes,
    excerpt,
    op_pattern,
)

DEFAULT_CONNECTION = "main"
# Operations a server may send at any time (keep-alive, async INFO): left out of what an
# exchange compares unless its connection keeps them.
UNSOLICITED = ("INFO", "PING")
# Pattern keys that are not operation fields.
_PATTERN_KEYS = ("optional", "matches", "within_ms", "options_include")
_ABSENT = object()
# INFO fields that differ between two runs of the same server (ids, addresses, versions, the
# nonce): an observation leaves them out, so that it changes only when behaviour does.
VOLATILE_INFO = frozenset({
    "server_id", "server_name", "version", "go", "git_commit", "host", "port", "nonce",
    "client_id", "client_ip", "ip", "connect_urls", "ws_connect_urls", "xkey", "cluster",
    "api_lvl",
})  # fmt: skip
# Payload bytes an observation quotes; a longer payload is recorded by its size.
PAYLOAD_SHOWN = 64


@dataclass(frozen=True)
class ConnectionPlan:
    """One connection of a script: what it keeps of the unsolicited operations, whether it
    answers the server's PINGs, whether the runner reads the server's INFO before the first
    exchange (``greeting``; otherwise the exchanges compare it), and whether the connection makes
    the TLS handshake its transport makes (``starts_tls``; otherwise an exchange's ``start_tls``
    says when, if ever)."""

    name: str
    keep: frozenset[str] = frozenset()
    answer_pings: bool = True
    greeting: bool = True
    starts_tls: bool = True


def connections(wire: dict[str, Any]) -> dict[str, ConnectionPlan]:
    """The script's connections by name, in declaration order (one, ``main``, by default)."""
    declared = wire.get("connections") or {DEFAULT_CONNECTION: {}}
    return {
        name: ConnectionPlan(
            name,
            frozenset(options.get("keep", ())),
            options.get("answer_pings", True),
            options.get("greeting", True),
            options.get("starts_tls", True),
        )
        for name, options in declared.items()
    }


def transport_of(wire: dict[str, Any]) -> str | None:
    """The transport a script is pinned to (it runs over that one only), or None: over each
    transport of the run."""
    return wire.get("transport")


def connection_of(wire: dict[str, Any], index: int) -> str:
    """The connection exchange ``index`` runs on; a name the script does not declare is a
    ``Mismatch`` naming the field."""
    plans = connections(wire)
    name = wire["exchanges"][index].get("on", next(iter(plans)))
    if name not in plans:
        raise Mismatch(f"wire.exchanges[{index}].on", f"{name!r} is not a connection of the script")
    return name


def kept(plan: ConnectionPlan, events: list[protocol.Event]) -> list[protocol.Event]:
    """What an exchange compares: everything but the unsolicited operations not kept."""
    dropped = {protocol.OP_NAMES[t] for t in (protocol.Info, protocol.Ping)} - plan.keep
    return [e for e in events if protocol.OP_NAMES.get(type(e)) not in dropped]


def _matches(pattern: dict[str, Any], path: str, actual: dict[str, Any] | None) -> bool:
    if actual is None:
        return False
    want = op_pattern({k: v for k, v in pattern.items() if k not in _PATTERN_KEYS}, path)
    if any(actual.get(k, _ABSENT) != v for k, v in want.items()):
        return False
    for key, regex in pattern.get("matches", {}).items():
        value = actual.get(key)
        if not isinstance(value, str) or re.search(regex, value) is None:
            return False
    options = actual.get("options")
    for key, value in pattern.get("options_include", {}).items():
        if not isinstance(options, dict) or options.get(key, _ABSENT) != value:
            return False
    return True


def _late_or_early(pattern: dict[str, Any], at_ms: float | None) -> str | None:
    """Why an operation that arrived ``at_ms`` after the clock started is outside the pattern's
    ``within_ms`` band; None when it is inside or the pattern has none."""
    band = pattern.get("within_ms")
    if band is None or at_ms is None:
        return None
    low, high = band
    if at_ms < low:
        return f"came {at_ms:.0f} ms after the clock started, earlier than {low} ms"
    if at_ms > high:
        return f"came {at_ms:.0f} ms after the clock started, later than {high} ms"
    return None


def compare_exchange(
    exchange: dict[str, Any],
    index: int,
    received: list[protocol.Event],
    closed: bool,
    peer: str,
    raw: bytes | None = None,
    arrived_ms: list[float] | None = None,
    websocket: Upgraded | None = None,
) -> Mismatch | None:
    """Judge what a server sent back in one exchange of a wire script; None when it conforms.

    ``received`` is what the server sent after this exchange's ``send`` (parsed by the
    reference, so bytes that break the protocol appear as errors; unsolicited operations the
    connection does not keep already left out), ``raw`` the bytes as they came (for
    ``expect_bytes``), ``closed`` whether it closed the connection, ``peer`` how to name the
    server, ``arrived_ms`` when each operation of ``received`` came, in milliseconds after the
    exchange's clock started (None: time is not judged). The clock starts when the connection is
    established in the exchange that opens it (a server's timers start when it accepts), else
    when the exchange's ``send`` has gone out. Operations compare as patterns: only the fields
    given, ``matches`` as regular expressions, an ``optional`` pattern skipped when the next
    operation does not fit it, ``within_ms`` the band its arrival must be in, ``options_include``
    INFO or CONNECT options that must be there with these values. ``websocket`` is what the
    connection's WebSocket upgrade accepted and the frames the server sent (None: no WebSocket),
    for ``extensions`` and ``server_frames``.
    """
    path = f"wire.exchanges[{index}]"
    if "expect_bytes" in exchange:
        want = decode_bytes(exchange["expect_bytes"], f"{path}.expect_bytes")
        got_bytes = raw if raw is not None else b""
        if got_bytes != want:
            return Mismatch(
                f"{path}.expect_bytes",
                f"expected exactly {excerpt(want)}, {peer} sends {excerpt(got_bytes)}",
            )
    else:
        got = [protocol.event_fields(event) for event in received]
        at = 0
        for j, pattern in enumerate(exchange["expect"]):
            actual = got[at] if at < len(got) else None
            if _matches(pattern, f"{path}.expect[{j}]", actual):
                when = None if arrived_ms is None else arrived_ms[at]
                off = _late_or_early(pattern, when)
                if off is not None:
                    return Mismatch(f"{path}.expect[{j}].within_ms", f"{excerpt(actual)} {off}")
                at += 1
            elif not pattern.get("optional", False):
                want_fields = {k: v for k, v in pattern.items() if k != "optional"}
                return Mismatch(
                    f"{path}.expect[{j}]",
                    f"expected {excerpt(want_fields)}, {peer} sends {excerpt(actual)} "
                    f"(all: {excerpt(got)})",
                )
        if at < len(got):
            return Mismatch(f"{path}.expect", f"{peer} sends more: {excerpt(got[at:])}")
    for key in ("extensions", "server_frames"):
        if key in exchange and websocket is None:
            return Mismatch(f"{path}.{key}", "the connection had no WebSocket upgrade")
    if websocket is not None and "extensions" in exchange:
        want, got_ext = sorted(exchange["extensions"]), sorted(websocket.extensions)
        if got_ext != want:
            return Mismatch(
                f"{path}.extensions",
                f"expected the upgrade to accept {want}, {peer} accepts {got_ext}",
            )
    if (
        websocket is not None
        and exchange.get("server_frames") == "binary"
        and websocket.text_frames
    ):
        return Mismatch(
            f"{path}.server_frames",
            f"expected binary frames only, {peer} sent {websocket.text_frames} text frame(s)",
        )
    state = "closed" if closed else "open"
    if exchange["then"] != state:
        return Mismatch(
            f"{path}.then", f"expected the connection {exchange['then']}, {peer} left it {state}"
        )
    return None


def queue_members(wire: dict[str, Any], name: str) -> dict[str, str]:
    """The sids the script's SUBs on connection ``name`` put in a queue group, with the group:
    which member of a group gets a message is the server's choice (nats-server picks one at
    random), so an observation names the group instead of the member."""
    parser = protocol.Parser(protocol.Direction.CLIENT)
    members: dict[str, str] = {}
    for i, exchange in enumerate(wire["exchanges"]):
        if connection_of(wire, i) != name:
            continue
        try:
            sent = decode_bytes(exchange.get("send", ""), f"wire.exchanges[{i}].send")
        except BytesError:  # the runner cannot send it either: no SUB from here on
            break
        for event in parser.feed(sent):
            if isinstance(event, protocol.Sub) and event.queue is not None:
                members[event.sid] = event.queue
    return members


def observed_op(event: protocol.Event, queues: dict[str, str] | None = None) -> dict[str, Any]:
    """One operation a server sent, as an observation records it: what the reference parser read
    (an -ERR's text, a message's subject, sid (the queue group, for a member of one: ``queues``),
    reply, payload and header block), an INFO without its volatile fields, bytes that break the
    protocol by the reason."""
    if isinstance(event, protocol.ProtocolError):
        return {"op": "broken", "reason": event.reason}
    name = protocol.OP_NAMES[type(event)]
    if isinstance(event, protocol.Err):
        return {"op": name, "message": event.message}
    if isinstance(event, protocol.Info):
        stable = {k: v for k, v in event.options.items() if k not in VOLATILE_INFO}
        return {"op": name, "options": stable}
    if not isinstance(event, protocol.Msg | protocol.HMsg):
        return {"op": name}
    out: dict[str, Any] = {"op": name, "subject": event.subject}
    if queues and event.sid in queues:
        out["queue"] = queues[event.sid]
    else:
        out["sid"] = event.sid
    if event.reply is not None:
        out["reply"] = event.reply
    if len(event.payload) <= PAYLOAD_SHOWN:
        out["payload"] = event.payload.decode("utf-8", "backslashreplace")
    else:
        out["payload_size"] = len(event.payload)
    if isinstance(event, protocol.HMsg):
        block = headers.parse_block(event.headers)
        if isinstance(block, headers.HeaderError):
            out["header_error"] = block.reason
        else:
            out["status"], out["description"] = block.status, block.description
            out["headers"] = [list(pair) for pair in block.fields]
    return out


def observed_connection(
    events: list[protocol.Event],
    closed: bool,
    queues: dict[str, str] | None = None,
    websocket: Upgraded | None = None,
) -> dict[str, Any]:
    """What one connection of a script saw: the server's operations in order, whether the
    server closed it, and (given) what its WebSocket upgrade accepted and how many text frames
    it sent. Within a run of consecutive messages, those for different subscriptions are put in
    one order (the documents order no deliveries across subscriptions, and a server may take its
    subscriptions in any order, run to run); each subscription's own messages keep theirs."""
    ops = [observed_op(event, queues) for event in events]
    seen: dict[str, Any] = {"sent": _deliveries_in_one_order(ops), "closed": closed}
    if websocket is not None:
        seen["extensions"] = sorted(websocket.extensions)
        seen["text_frames"] = websocket.text_frames
    return seen


def _deliveries_in_one_order(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def delivery(op: dict[str, Any]) -> bool:
        return op["op"] in ("MSG", "HMSG")

    def subscription(op: dict[str, Any]) -> str:
        return f"{op.get('queue', '')}\0{op.get('sid', '')}"

    out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for op in [*ops, {"op": ""}]:
        if delivery(op):
            run.append(op)
            continue
        out += sorted(run, key=subscription)  # stable: a subscription's messages keep order
        run = []
        if op["op"]:
            out.append(op)
    return out


def evaluate(wire: dict[str, Any]) -> None:
    """Run a wire script against the reference server model; a ``Mismatch`` when it differs."""
    config = wire.get("config", {})
    broker = server.Broker(server.ServerConfig(**config))
    plans = connections(wire)
    transport = transport_of(wire) or DEFAULT_TRANSPORT
    _check_listeners(wire, transport, plans)
    models: dict[str, TransportModel] = {}
    spoken: set[str] = set()  # the connections whose first operation the script has compared
    for i, exchange in enumerate(wire["exchanges"]):
        path = f"wire.exchanges[{i}]"
        name = connection_of(wire, i)
        conn = models.get(name)
        if conn is None:
            conn = models[name] = _opened(broker, plans[name], transport, config, path)
            spoken.update([name] if plans[name].greeting else [])  # the runner read the INFO
        model = conn.server
        clock = model.elapsed  # the send goes out now (a new connection is established now)
        sent = model.take_timed()  # what other connections and time left for it
        if model.closed and not sent:
            raise Mismatch(path, "the reference closed the connection before this exchange")
        try:
            if exchange.get("start_tls", False):
                conn.start_tls()
            send = decode_bytes(exchange.get("send", ""), f"{path}.send")
            conn.feed(send, text=exchange.get("text", False))
        except ValueError as exc:
            raise Mismatch(path, str(exc)) from None
        if "wait" in exchange:
            for other in models.values():
                other.elapse(exchange["wait"])
        sent += model.take_timed()
        # The connection's first operation is compared whatever it is (the INFO, where the
        # runner does not read it as the greeting), as the runner does.
        first = sent[:1] if name not in spoken else []
        spoken.update([name] if sent else [])
        timed = first + [(at, op) for at, op in sent[len(first) :] if kept(plans[name], [op])]
        ops = [op for _, op in timed]
        # What was waiting before the clock started arrives at once, as in a socket's buffer.
        arrived = [max(at - clock, 0.0) * 1000 for at, _ in timed]
        raw = b"".join(_encoded(op) for op in ops)
        mismatch = compare_exchange(
            exchange, i, ops, model.closed, "the reference server", raw, arrived, conn.upgraded()
        )
        if mismatch is not None:
            raise mismatch


# Listener settings of a case's config, and the transports whose server has that listener.
_LISTENER_KEYS = {
    "tls": (TLS_AFTER_INFO, TLS_FIRST),
    "allow_non_tls": (TLS_AFTER_INFO,),
    "websocket": WEBSOCKET_TRANSPORTS,
}


def _check_listeners(
    wire: dict[str, Any], transport: str, plans: dict[str, ConnectionPlan]
) -> None:
    """A script's transport settings fit the transport it is pinned to: a listener's settings
    need a transport that has that listener, ``handshake_first`` TLS first, and a connection
    that stays in clear a TLS transport (after INFO: with the INFO read by its exchanges, so that
    one of them starts TLS, if any does)."""
    config = wire.get("config", {})
    for key, transports in _LISTENER_KEYS.items():
        if key in config and transport not in transports:
            why = f"{key} configures a listener of {', '.join(transports)}, not of {transport}"
            raise Mismatch(f"wire.config.{key}", why)
    if "handshake_first" in (config.get("tls") or {}) and transport != TLS_FIRST:
        why = f"handshake_first configures the {TLS_FIRST} listener, not {transport}'s"
        raise Mismatch("wire.config.tls.handshake_first", why)
    tls = transport in (TLS_AFTER_INFO, TLS_FIRST)
    for name, plan in plans.items():
        where = f"wire.connections.{name}"
        if not plan.starts_tls and not tls:
            raise Mismatch(f"{where}.starts_tls", f"a {transport} connection has no TLS to skip")
        if not plan.greeting and transport == TLS_AFTER_INFO and plan.starts_tls:
            why = "TLS after an INFO the exchanges read: set starts_tls false and start it there"
            raise Mismatch(f"{where}.greeting", why)


def _opened(
    broker: server.Broker,
    plan: ConnectionPlan,
    transport: str,
    config: dict[str, Any],
    path: str,
) -> TransportModel:
    """A connection of the model, accepted now over ``transport``; its INFO left out where the
    runner reads it before the first exchange (``greeting``), and its TLS started where the
    connection makes its transport's handshake."""
    model = server.ServerModel(broker=broker, answers_pings=plan.answer_pings)
    try:
        conn = TransportModel(model, transport, config)
    except ValueError as exc:
        raise Mismatch("wire.config.tls", str(exc)) from None
    if conn.listener.first and plan.starts_tls:
        conn.start_tls()
    conn.opened()
    if plan.greeting:  # nothing but the INFO is sent on accepting a connection
        greeted = [op for _, op in model.take_timed()]
        if [type(op) for op in greeted] != [protocol.Info]:
            raise Mismatch(path, "the reference sends no INFO on connecting: set greeting false")
    if conn.listener.tls and not conn.listener.first and plan.starts_tls:
        conn.start_tls()
    return conn


def _encoded(op: protocol.Op) -> bytes:
    data = protocol.encode(op, any_headers=True)
    return data if isinstance(data, bytes) else b""
