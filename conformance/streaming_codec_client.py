"""streaming.encode / streaming.decode cases asked of a NATS Streaming client library, sans-I/O.

``@send``: an encode case of a message a client produces becomes a streaming.client session
(``send_session``) whose steps make the library send that message with the case's values where
its API takes them; the message it sent, decoded by the reference codec, is judged with
``conformance.streaming_client``'s ``sent`` patterns: the fields the case gives are compared,
the ones the library generates (GUIDs, inboxes, connID) must be set and are not compared, and
fields the case leaves out are the library's choice. A value no API can express is a skip that
names the field and why.

``@receive``: a decode case of a message a server sends (``receive_plan``) is delivered to the
library at the moment it expects that message; what the library reports is judged against the
case's ``fields`` or ``error`` (``delivery_problems``, ``answer_problems``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import streaming_messages as pb
from .vector_values import decode_bytes

CLIENT_ID = "conformance-codec"  # a clientID the case does not fix: the library must have one
SUBJECT = "conformance.codec"  # a channel the case does not fix
JSON_EXACT = 2**53 - 1  # JSON numbers in the driver protocol are exact up to here (JavaScript)

# Fields a library fills in itself; the case's value is not compared, the field must be set.
GENERATED = {
    "ConnectRequest": ("heartbeatInbox", "connID"),
    "PubMsg": ("guid", "connID"),
    "SubscriptionRequest": ("inbox",),
    "Ping": ("connID",),
}
# Fields of client messages that no driver command sets, and why.
UNREACHABLE = {
    ("ConnectRequest", "protocol"): "the libraries send their own protocol version; no API "
    "chooses it",
    ("ConnectRequest", "pingInterval"): "the libraries' ping options are not in the driver "
    "protocol (nats-conformance-stan-driver/1)",
    ("ConnectRequest", "pingMaxOut"): "the libraries' ping options are not in the driver "
    "protocol (nats-conformance-stan-driver/1)",
    ("ConnectRequest", "pingTimeout"): "the libraries' protocol.proto has no pingTimeout "
    "(streaming-fields.md's field 6), so no API sets it",
    ("PubMsg", "reply"): "a streaming publish takes no reply subject in the libraries' APIs",
    ("PubMsg", "sha256"): "no library API sets it",
    ("UnsubscribeRequest", "durableName"): "no API sets it: whether unsubscribing a durable "
    "subscription sends its durableName the documents leave open (see the info case "
    "streaming.client.unsubscribe.durable)",
    ("UnsubscribeRequest", "inbox"): "it is the ackInbox the server returned, which the "
    "reference streaming server chooses",
}
# The request whose answer carries each server message, for @receive.
ANSWERS = {
    "ConnectResponse": "ConnectRequest",
    "SubscriptionResponse": "SubscriptionRequest",
    "CloseResponse": "CloseRequest",
    "PubAck": "PubMsg",
}
SERVER_MESSAGES = (*ANSWERS, "MsgProto", "PingResponse")
CLIENT_MESSAGES = ("ConnectRequest", "PubMsg", "SubscriptionRequest", "UnsubscribeRequest",
                   "Ack", "CloseRequest", "Ping")  # fmt: skip


@dataclass(frozen=True)
class SendSession:
    """A streaming.client session (``input``, ``expect``) that makes the library send the
    case's message, and for an Ack the MsgProto to deliver on subscription ``s`` first."""

    input: dict[str, Any]
    expect: dict[str, Any]
    deliver: pb.MsgProto | None = None


class Unreachable(Exception):
    """The case's values cannot be asked of a library; the message says which and why."""


def _start(fields: dict[str, Any], req: pb.SubscriptionRequest) -> dict[str, Any]:
    """The subscribe step's ``start`` for the case's start fields."""
    position = req.start_position
    if "startPosition" not in fields:
        position = (
            pb.StartPosition.SEQUENCE_START if req.start_sequence
            else pb.StartPosition.TIME_DELTA_START if req.start_time_delta
            else pb.StartPosition.NEW_ONLY
        )  # fmt: skip
    if req.start_sequence and position != pb.StartPosition.SEQUENCE_START:
        raise Unreachable("startSequence: a library sends it only with SequenceStart")
    if req.start_time_delta and position != pb.StartPosition.TIME_DELTA_START:
        raise Unreachable("startTimeDelta: a library sends it only with TimeDeltaStart")
    if not isinstance(position, pb.StartPosition):
        raise Unreachable(f"startPosition: {position} is no position a library API names")
    start: dict[str, Any] = {"position": position.proto_name}
    if position == pb.StartPosition.SEQUENCE_START:
        if req.start_sequence > JSON_EXACT:
            raise Unreachable(
                f"startSequence: {req.start_sequence} is beyond what the driver protocol's JSON "
                "numbers carry exactly (2^53 - 1)"
            )
        start["sequence"] = _at_least("startSequence", "sequence", req.start_sequence)
    if position == pb.StartPosition.TIME_DELTA_START:
        ms, rest = divmod(req.start_time_delta, 1_000_000)
        if rest:
            raise Unreachable(
                f"startTimeDelta: {req.start_time_delta} ns is not a whole number of "
                "milliseconds, and the libraries take the delta in milliseconds (node) or the "
                "driver protocol does (time_delta_ms)"
            )
        start["time_delta_ms"] = _at_least("startTimeDelta", "time_delta_ms", ms)
    return start


# SubscriptionRequest fields -> the subscribe step's options
_SUBSCRIBE_OPTIONS = {"qGroup": "queue", "durableName": "durable_name",
                      "maxInFlight": "max_in_flight", "ackWaitInSecs": "ack_wait_s"}  # fmt: skip
REPORTED = ("sequence", "subject", "data", "redelivered", "timestamp")  # a message event's


def _subscribe(fields: dict[str, Any], req: pb.SubscriptionRequest) -> dict[str, Any]:
    step: dict[str, Any] = {"do": "subscribe", "sub": "s", "subject": req.subject or SUBJECT,
                            "start": _start(fields, req)}  # fmt: skip
    for json_name, key in _SUBSCRIBE_OPTIONS.items():
        if json_name in fields:
            step[key] = _at_least(json_name, key, getattr(req, pb_attr("SubscriptionRequest",
                                                                       json_name)))  # fmt: skip
    return step


def _at_least(json_name: str, key: str, value: Any) -> Any:
    """``value`` for the driver protocol's ``key``, whose numbers start at 1 (its schema)."""
    if isinstance(value, int) and value < 1:
        raise Unreachable(f"{json_name}: the driver protocol (nats-conformance-stan-driver/1) "
                          f"takes {key} from 1, not {value}")  # fmt: skip
    return value


def pb_attr(message: str, json_name: str) -> str:
    """The dataclass attribute of a field named by its JSON name."""
    return next(s.attr for s in pb.field_table(pb.MESSAGES[message]) if s.json_name == json_name)


def _steps(message: str, fields: dict[str, Any], msg: Any) -> list[dict[str, Any]]:
    """The steps after connect that make a library send ``message``."""
    if message == "PubMsg":
        return [{"do": "publish", "subject": msg.subject or SUBJECT,
                 "data": fields.get("data", "")}]  # fmt: skip
    if message == "SubscriptionRequest":
        return [_subscribe(fields, msg)]
    if message == "UnsubscribeRequest":
        sub = pb.SubscriptionRequest(subject=msg.subject, durable_name=msg.durable_name)
        return [_subscribe({k: v for k, v in fields.items() if k == "durableName"}, sub),
                {"do": "unsubscribe", "sub": "s"}]  # fmt: skip
    if message == "Ack":
        return [_subscribe({}, pb.SubscriptionRequest(subject=msg.subject))]
    if message == "CloseRequest":
        return [{"do": "close"}]
    return []  # ConnectRequest: connecting sends it


def send_session(message: str, fields: dict[str, Any]) -> SendSession:
    """The session that makes a library send the encode case's message (Unreachable when its
    values cannot be asked of a library)."""
    if message not in CLIENT_MESSAGES:
        raise Unreachable(f"a client never sends a {message} (a server does)")
    generated = [name for name in fields if name in GENERATED.get(message, ())]
    compared = {name: value for name, value in fields.items() if name not in generated}
    if not fields:
        raise Unreachable(
            f"the case gives every field its proto3 default, and a {message} a library sends "
            "is never all defaults (it names its client, subject or connection)"
        )
    if not compared:
        raise Unreachable(f"every field the case gives is one the library generates "
                          f"({', '.join(generated)})")  # fmt: skip
    for name in compared:
        if reason := UNREACHABLE.get((message, name)):
            raise Unreachable(f"{name}: {reason}")
    msg = pb.from_json(message, fields, decode=decode_bytes)
    client_id = getattr(msg, "client_id", None)
    if "clientID" in fields and not client_id:
        raise Unreachable("clientID: a library connects with a non-empty client ID")
    steps = [{"do": "connect"}, *_steps(message, fields, msg)]
    pattern = {"message": message, "fields": compared, "generated": generated}
    deliver = None
    if isinstance(msg, pb.Ack):
        deliver = pb.MsgProto(msg.sequence, msg.subject or SUBJECT, data=b"ack me", timestamp=1)
    return SendSession(
        {"cluster_id": "nats-conformance", "client_id": client_id or CLIENT_ID, "steps": steps},
        {"sent": [pattern]},
        deliver,
    )


# --- @receive -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceivePlan:
    """How a decode case's bytes reach a library: in answer to ``request`` (``keep``: followed
    by the server's own answer), or (request None) as a MsgProto on a subscription; then
    ``steps`` (after connect, for an answer to ConnectRequest: including it)."""

    payload: bytes
    request: str | None
    keep: bool
    steps: list[dict[str, Any]]


def receive_plan(inp: dict[str, Any], expect: dict[str, Any]) -> ReceivePlan:
    """How to deliver a decode case's bytes to a library (Unreachable when no path does)."""
    message = inp["message"]
    payload = decode_bytes(inp["bytes"], "bytes")
    subscribe = {"do": "subscribe", "sub": "s", "subject": SUBJECT,
                 "start": {"position": "NewOnly"}}  # fmt: skip
    connect = {"do": "connect"}
    if message == "MsgProto":
        return ReceivePlan(payload, None, False, [connect, subscribe])
    if message == "PingResponse":
        raise Unreachable(
            "the libraries send Pings on their own timer and report a PingResponse only by "
            "closing the connection; the driver protocol has no step that awaits one"
        )
    if message == "PubAck" and "error" not in expect:
        raise Unreachable(
            "guid: a library matches a PubAck to its publish by the GUID it generated, so a "
            "PubAck with the case's guid answers no publish of the library"
        )
    if message not in ANSWERS:
        raise Unreachable(f"a client never receives a {message} (a server does)")
    tail = {"ConnectResponse": [], "SubscriptionResponse": [subscribe],
            "CloseResponse": [{"do": "close"}],
            "PubAck": [{"do": "publish", "subject": SUBJECT, "data": "x"}]}[message]  # fmt: skip
    # A malformed PubAck is followed by the real one: the publish must still complete.
    return ReceivePlan(payload, ANSWERS[message], message == "PubAck", [connect, *tail])


@dataclass(frozen=True)
class ReportedMessage:
    """A message a library reported (the driver's message event)."""

    sequence: int
    subject: str
    data: bytes
    redelivered: bool
    timestamp: int


def delivery_problems(expect: dict[str, Any], got: ReportedMessage | None, said: str) -> list[str]:
    """A MsgProto case: what the library reported for the bytes (``said``: its errors)."""
    if "error" in expect:
        if got is None:
            return []
        return [f"the library reported {got} for bytes the documents reject "
                f"({expect['error']})"]  # fmt: skip
    if got is None:
        return [f"the library reported no message for the bytes ({said or 'no error'})"]
    want = pb.from_json("MsgProto", expect["fields"], decode=decode_bytes)
    assert isinstance(want, pb.MsgProto)
    return [
        f"{name} is {getattr(got, name)!r}, expected {getattr(want, name)!r}"
        for name in REPORTED
        if getattr(got, name) != getattr(want, name)
    ]


def answer_problems(
    message: str,
    expect: dict[str, Any],
    ok: bool,
    error: str | None,
    detail: str = "",
    said: str = "",
) -> list[str]:
    """An answer case: whether the step the answer completed reported what the case's bytes
    say (``detail``: for a PubAck, why the publish's own answer was not what it reported;
    ``said``: errors the library reported apart from the step, which count as reporting the
    answer's error)."""
    did = f"the step {'succeeded' if ok else f'failed ({error})'}"
    if message == "PubAck":  # malformed, and followed by the real PubAck
        return [f"{did}; {detail}"] if detail or not ok else []
    if "error" in expect:
        return [f"{did} on {message} bytes the documents reject ({expect['error']})"] if ok else []
    want = expect["fields"].get("error", "")
    if want and want not in said and (ok or want not in (error or "")):
        return [f"{did}; expected it to fail with the {message}'s error {want!r}"]
    if not want and not ok:
        return [f"{did}; the {message} carries no error"]
    return []
