"""NATS Streaming client sessions (vector kind ``streaming.client``), sans-I/O.

A case's ``input`` lists the steps a client library is asked to take (connect, publish,
subscribe, ack, unsubscribe, close, sleep); its ``expect`` says what must hold:

- ``sent``: the protocol messages the client must send, per message name, in order. A pattern
  compares only the fields it gives (JSON names, as ``streaming.encode``); ``generated`` names
  fields the client chooses (GUIDs, inboxes): set, value not compared. A field value
  ``{"ack_inbox_of": SUB}`` stands for the ackInbox the server gave that subscription. Message
  names the case does not list (Ping, say) are not judged.
- ``unique``: per message name, fields whose values must differ between its messages.
- ``puback_guids``: each publish step reports the guid of the PubMsg it sent.
- ``received``: per subscription, the messages the client must report (sequence, data,
  redelivered): what the reference streaming server (``conformance.streaming_server``)
  delivers for the steps, never what a library did.

``simulate`` runs the steps with a reference client against the reference server on a virtual
clock; ``vectors check`` judges its outcome with ``judge`` like any client's, so every case
agrees with the reference before it meets a library. Every step must succeed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import streaming_messages as pb
from .streaming_messages import DecodeError
from .streaming_server import Outbound, StreamingServerModel
from .vector_values import decode_bytes

KIND = "streaming.client"
START_NS = 1_700_000_000_000_000_000  # the virtual clock's start; any value works


@dataclass(frozen=True)
class Reported:
    """What a client reported for one step: success, and for a publish the acked guid."""

    ok: bool
    guid: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Delivery:
    """A message the client reported receiving on a subscription."""

    sequence: int
    data: bytes
    redelivered: bool = False


@dataclass
class Observed:
    """A client's session: what it sent (decoded by the reference, in order), what it reported
    per step and received per subscription, and the ackInbox of each subscription in order."""

    sent: list[tuple[str, pb.Message | DecodeError]] = field(default_factory=list)
    steps: list[Reported] = field(default_factory=list)
    received: dict[str, list[Delivery]] = field(default_factory=dict)
    ack_inboxes: list[str] = field(default_factory=list)


def subscribe_request_fields(step: dict[str, Any]) -> dict[str, Any]:
    """The SubscriptionRequest fields (attribute names) a subscribe step asks for."""
    start = step["start"]
    fields: dict[str, Any] = {
        "subject": step["subject"],
        "q_group": step.get("queue") or "",
        "durable_name": step.get("durable_name") or "",
        "max_in_flight": step.get("max_in_flight") or 0,
        "ack_wait_in_secs": step.get("ack_wait_s") or 0,
        "start_position": pb.from_json(
            "SubscriptionRequest", {"startPosition": start["position"]}, decode=decode_bytes
        ).start_position,  # type: ignore[attr-defined]
    }
    if "sequence" in start:
        fields["start_sequence"] = start["sequence"]
    if "time_delta_ms" in start:
        # The documents give startTimeDelta no unit; int64 nanoseconds, as the clients send it.
        fields["start_time_delta"] = start["time_delta_ms"] * 1_000_000
    return fields


def subscribe_steps(steps: list[dict[str, Any]]) -> list[str]:
    """The subscription names, in the order their subscribe steps come."""
    return [step["sub"] for step in steps if step["do"] == "subscribe"]


# --- the reference client ----------------------------------------------------------------------


@dataclass
class _Sub:
    name: str
    subject: str
    inbox: str
    ack_inbox: str
    manual_ack: bool
    durable_name: str


class _ReferenceClient:
    """A client that does what the documents say, driven against the server model."""

    def __init__(self, model: StreamingServerModel, client_id: str) -> None:
        self.model = model
        self.client_id = client_id
        self.now = START_NS
        self.response = pb.ConnectResponse()
        self.subs: dict[str, _Sub] = {}
        self.by_inbox: dict[str, _Sub] = {}
        self.observed = Observed()
        self._guids = 0
        self._pending: list[tuple[_Sub, bytes]] = []  # deliveries, taken after the step

    def _request(self, subject: str, message: pb.Message) -> list[Outbound]:
        out = self.model.handle(subject, "_INBOX.reply", pb.encode(message), self.now)
        answers = [o for o in out if o.subject == "_INBOX.reply"]
        self._pending += [(self.by_inbox[o.subject], o.payload) for o in out
                          if o.subject in self.by_inbox]  # fmt: skip
        return answers

    def _deliver(self, sub: _Sub, payload: bytes) -> None:
        msg = pb.decode("MsgProto", payload)
        assert isinstance(msg, pb.MsgProto)
        self.observed.received.setdefault(sub.name, []).append(
            Delivery(msg.sequence, msg.data, msg.redelivered)
        )
        if not sub.manual_ack:
            self._ack(sub, msg.sequence)

    def _ack(self, sub: _Sub, sequence: int) -> None:
        self.model.handle(sub.ack_inbox, None, pb.encode(pb.Ack(sub.subject, sequence)), self.now)

    def do(self, step: dict[str, Any]) -> Reported:
        """Take one step, then process what it delivered (a subscription knows its ackInbox
        only once the step is done)."""
        reported = self._step(step)
        while self._pending:
            self._deliver(*self._pending.pop(0))
        return reported

    def _step(self, step: dict[str, Any]) -> Reported:
        action = step["do"]
        if action == "sleep":
            self.now += step["ms"] * 1_000_000
            return Reported(True)
        if action == "connect":
            request = pb.ConnectRequest(self.client_id, "_INBOX.heartbeat")
            [answer] = self._request(self.model.discover_subject, request)
            self.response = pb.decode("ConnectResponse", answer.payload)  # type: ignore[assignment]
            return Reported(not self.response.error, error=self.response.error or None)
        if action == "publish":
            self._guids += 1
            guid = f"guid-{self._guids}"
            data = decode_bytes(step["data"], "data")
            pub = pb.PubMsg(self.client_id, guid, step["subject"], data=data)
            subject = pb.publish_subject(self.response.pub_prefix, step["subject"])
            [answer] = self._request(subject, pub)
            ack = pb.decode("PubAck", answer.payload)
            assert isinstance(ack, pb.PubAck)
            return Reported(not ack.error, guid=ack.guid, error=ack.error or None)
        if action == "subscribe":
            inbox = f"_INBOX.sub.{step['sub']}"
            sub = _Sub(step["sub"], step["subject"], inbox, "", bool(step.get("manual_ack")),
                       step.get("durable_name") or "")  # fmt: skip
            self.by_inbox[inbox] = sub  # deliveries may come with the response
            request = pb.SubscriptionRequest(
                client_id=self.client_id, inbox=inbox, **subscribe_request_fields(step)
            )
            [answer] = self._request(self.response.sub_requests, request)
            resp = pb.decode("SubscriptionResponse", answer.payload)
            assert isinstance(resp, pb.SubscriptionResponse)
            sub.ack_inbox = resp.ack_inbox
            self.subs[sub.name] = sub
            return Reported(not resp.error, error=resp.error or None)
        if action == "ack":
            self._ack(self.subs[step["sub"]], step["sequence"])
            return Reported(True)
        if action == "unsubscribe":
            sub = self.subs.pop(step["sub"])
            request = pb.UnsubscribeRequest(
                self.client_id, sub.subject, sub.ack_inbox, sub.durable_name
            )
            [answer] = self._request(self.response.unsub_requests, request)
            resp = pb.decode("SubscriptionResponse", answer.payload)
            assert isinstance(resp, pb.SubscriptionResponse)
            return Reported(not resp.error, error=resp.error or None)
        if action == "close":
            [answer] = self._request(self.response.close_requests, pb.CloseRequest(self.client_id))
            resp = pb.decode("CloseResponse", answer.payload)
            assert isinstance(resp, pb.CloseResponse)
            return Reported(not resp.error, error=resp.error or None)
        raise ValueError(f"unknown step {action!r}")


def simulate(inp: dict[str, Any]) -> Observed:
    """The case's steps taken by the reference client against the reference server."""
    model = StreamingServerModel(cluster_id=inp["cluster_id"])
    client = _ReferenceClient(model, inp["client_id"])
    for step in inp["steps"]:
        client.observed.steps.append(client.do(step))
    client.observed.sent = list(model.received)
    client.observed.ack_inboxes = list(model.ack_inboxes)
    return client.observed


# --- judging -----------------------------------------------------------------------------------


def _field_problem(
    message: pb.Message, json_name: str, want: Any, ack_inboxes: dict[str, str]
) -> str | None:
    specs = {spec.json_name: spec for spec in pb.field_table(type(message))}
    got = getattr(message, specs[json_name].attr)
    if isinstance(want, dict) and "ack_inbox_of" in want:
        expected: Any = ack_inboxes.get(want["ack_inbox_of"])
    else:
        one = pb.from_json(message.NAME, {json_name: want}, decode=decode_bytes)
        expected = getattr(one, specs[json_name].attr)
    if got != expected:
        return f"{json_name} is {got!r}, expected {expected!r}"
    return None


def sent_problems(exp: dict[str, Any], observed: Observed, subs: list[str]) -> list[str]:
    """Why what the client sent does not match ``exp``'s ``sent`` and ``unique`` (``subs``:
    the subscription names, in subscribe order, for ``ack_inbox_of``)."""
    ack_inboxes = dict(zip(subs, observed.ack_inboxes, strict=False))
    patterns: dict[str, list[dict[str, Any]]] = {}
    for pattern in exp.get("sent", []):
        patterns.setdefault(pattern["message"], []).append(pattern)
    problems = []
    for name, wanted in patterns.items():
        got = [m for n, m in observed.sent if n == name]
        bad = [m for m in got if isinstance(m, DecodeError)]
        if bad:
            problems.append(f"the client sent a {name} the reference cannot decode: {bad[0]}")
            continue
        if len(got) != len(wanted):
            problems.append(f"expected {len(wanted)} {name}, the client sent {len(got)}: {got}")
            continue
        for i, (pattern, message) in enumerate(zip(wanted, got, strict=True)):
            assert isinstance(message, pb.Message)
            for json_name, want in pattern.get("fields", {}).items():
                if problem := _field_problem(message, json_name, want, ack_inboxes):
                    problems.append(f"{name} #{i + 1}: {problem}")
            for json_name in pattern.get("generated", []):
                spec = next(s for s in pb.field_table(type(message)) if s.json_name == json_name)
                if getattr(message, spec.attr) == spec.type.default:
                    problems.append(f"{name} #{i + 1}: {json_name} is not set")
    for name, json_names in exp.get("unique", {}).items():
        got = [m for n, m in observed.sent if n == name and isinstance(m, pb.Message)]
        for json_name in json_names:
            spec = next(s for s in pb.field_table(pb.MESSAGES[name]) if s.json_name == json_name)
            values = [getattr(m, spec.attr) for m in got]
            if len(set(values)) != len(values):
                problems.append(f"{name} {json_name} values repeat: {values}")
    return problems


def _step_problems(inp: dict[str, Any], exp: dict[str, Any], observed: Observed) -> list[str]:
    problems = []
    steps = inp["steps"]
    for i, step in enumerate(steps):
        reported = observed.steps[i] if i < len(observed.steps) else None
        if reported is None:
            problems.append(f"step {i + 1} ({step['do']}) was not done")
            break
        if not reported.ok:
            problems.append(f"step {i + 1} ({step['do']}) failed: {reported.error}")
    if exp.get("puback_guids"):
        sent = [m.guid for n, m in observed.sent if n == "PubMsg" and isinstance(m, pb.PubMsg)]
        acked = [
            r.guid for s, r in zip(steps, observed.steps, strict=False) if s["do"] == "publish"
        ]
        if acked != sent:
            problems.append(f"the client reported PubAck guids {acked}, its PubMsg guids {sent}")
    return problems


def _received_problems(exp: dict[str, Any], observed: Observed) -> list[str]:
    problems = []
    for sub, wanted in exp.get("received", {}).items():
        want = [
            Delivery(m["sequence"], decode_bytes(m["data"], "data"), m.get("redelivered", False))
            for m in wanted
        ]
        got = observed.received.get(sub, [])
        if got != want:
            problems.append(
                f"subscription {sub}: the client reported {show(got)}, expected {show(want)}"
            )
    return problems


def show(deliveries: list[Delivery]) -> str:
    """Deliveries as ``[sequence:data, ...]`` for a message."""
    return (
        "["
        + ", ".join(
            f"{d.sequence}:{d.data!r}" + (" redelivered" if d.redelivered else "")
            for d in deliveries
        )
        + "]"
    )


def judge(inp: dict[str, Any], exp: dict[str, Any], observed: Observed) -> list[str]:
    """Why a client's session does not meet the case (empty when it does)."""
    return [
        *_step_problems(inp, exp, observed),
        *sent_problems(exp, observed, subscribe_steps(inp["steps"])),
        *_received_problems(exp, observed),
    ]


def expected_count(exp: dict[str, Any], sub: str) -> int:
    """How many messages subscription ``sub`` must report (a runner waits for that many)."""
    return len(exp.get("received", {}).get(sub, []))
