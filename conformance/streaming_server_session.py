"""NATS Streaming server sessions (vector kind ``streaming.server``), sans-I/O.

One scenario speaks the streaming protocol to a server the way a client does: connect, connect
again with the clientID in use, publish m1, m2 and m3 (a pause after m1, so a time delta tells
them apart), subscribe at each start position, acknowledge and leave unacknowledged, unsubscribe,
subscribe with a wildcard and with zero limits, ping, publish as a client that never connected,
close, connect again. Each step's answer is an ``Answer`` keyed by the step's name; a case's
``input.step`` names the answer it judges and its ``expect`` says, as data, what must hold
(``judge``):

- ``answer``: the name of the message each reply must be; ``error``: whether it carries one;
  ``set``: fields (JSON names) it must name; ``guid``: each PubAck carries its PubMsg's guid;
- ``delivered``: the data of the MsgProtos the step's subscription gets, in order;
- ``redelivered``: whether one of them is flagged redelivered;
- ``stamped``: each carries the channel as subject, a timestamp, and sequences that grow.

An ``info`` case expects nothing: its row records the answer, compared with the reference's.

The scenario is the one exception of the kind to "every case is data": the steps depend on what
the server answered (subjects it names, sequences it gives), so they are written once here and
run over a ``Transport``: a real NATS connection in the harness (harness.servers.streaming_checks)
or ``ModelTransport``, the reference streaming server on a virtual clock, which is what
``vectors check`` judges each case against (``evaluate``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from . import streaming_messages as pb
from .streaming_messages import DecodeError, StartPosition
from .streaming_server import Stored, StreamingServerModel, replay

KIND = "streaming.server"
CLUSTER_ID = "nats-conformance"
REPLY_TIMEOUT = 5.0  # seconds a streaming request waits for its answer
QUIET = 0.4  # seconds of silence taken to mean that nothing more is coming
TIME_GAP = 1.5  # seconds between the first published message and the next ones
TIME_DELTA_NS = 1_000_000_000  # the time-delta subscription's window: m2 and m3, not m1
ACK_WAIT = 1  # ackWaitInSecs of the redelivery subscription
REDELIVERY_WAIT = 4.0  # seconds the redelivery step waits (ACK_WAIT plus the server's timer)
# Fields naming subjects the server chooses: shown by presence, not value.
_SUBJECT_FIELDS = {"pubPrefix", "subRequests", "unsubRequests", "closeRequests",
                   "subCloseRequests", "pingRequests", "ackInbox"}  # fmt: skip
_CONNECTED = ("pubPrefix", "subRequests", "unsubRequests", "closeRequests")
_PING_FIELDS = ("protocol", "pingRequests", "pingInterval", "pingTimeout", "pingMaxOut")
# The step of each start position (``subscribe.<name>``), in the order the scenario takes them:
# time-delta first, while its window holds m2 and m3 but not m1; first next, as it shows the
# sequences the server gave (startSequence asks for m2's).
START_STEPS = {
    StartPosition.TIME_DELTA_START: "time-delta",
    StartPosition.FIRST: "first",
    StartPosition.SEQUENCE_START: "sequence",
    StartPosition.LAST_RECEIVED: "last-received",
    StartPosition.NEW_ONLY: "new-only",
}

Received = pb.Message | DecodeError | None


class Transport(Protocol):
    """A NATS connection to a streaming server, as the scenario uses it; heartbeats to
    ``heartbeat`` are answered by the transport, as a client must."""

    heartbeat: str

    def inbox(self, name: str) -> str:
        """A fresh inbox subject the connection receives on."""
        ...

    def expect(self, subject: str, kind: str) -> str:
        """Decode what arrives on ``subject`` as ``kind``."""
        ...

    def send(self, subject: str, message: pb.Message, reply: str | None = None) -> None: ...

    def request(self, subject: str, message: pb.Message, answer: str) -> Received:
        """Send ``message`` with a fresh reply inbox; its first answer (None: none came)."""
        ...

    def received(self, inbox: str) -> list[pb.Message | DecodeError]: ...

    def wait(self, done: Callable[[], bool], seconds: float) -> None:
        """Let messages arrive until ``done()`` or ``seconds`` pass."""
        ...

    def sleep(self, seconds: float) -> None: ...

    def now_ns(self) -> int:
        """Wall-clock time, in nanoseconds."""
        ...

    def clock(self) -> float:
        """Monotonic seconds (what a step's duration is measured with)."""
        ...

    def unique(self) -> str:
        """A name no other session uses (client ids, channels, guids)."""
        ...


@dataclass(frozen=True)
class Reply:
    """One answer to a request of a step; ``guid``: the guid of the PubMsg it answers."""

    message: Received
    guid: str = ""


@dataclass(frozen=True)
class Answer:
    """What one step saw: how its row shows it, the replies to its requests and what its
    subscription got; ``error``: why the step could not run."""

    text: str
    replies: tuple[Reply, ...] = ()
    deliveries: tuple[pb.Message | DecodeError, ...] = ()
    channel: str = ""
    ms: float = 0.0
    error: str | None = None


def describe(message: Received, *, keep: tuple[str, ...] = ()) -> str:
    """A streaming answer as text: subjects the server picks shown as <subject>."""
    if message is None:
        return f"no answer within {REPLY_TIMEOUT:g} s"
    if isinstance(message, DecodeError):
        return f"undecodable ({message.reason}: {message.detail})"
    fields = {
        k: "<subject>" if k in _SUBJECT_FIELDS else v
        for k, v in pb.to_json(message).items()
        if not keep or k in keep
    }
    return f"{message.NAME} {json.dumps(fields, sort_keys=True)}"


def deliveries(messages: list[pb.Message | DecodeError]) -> str:
    got = [
        (m.sequence, m.data.decode("utf-8", "replace"), m.redelivered)
        if isinstance(m, pb.MsgProto)
        else str(m)
        for m in messages
    ]
    return f"delivered (sequence, data, redelivered) {got}"


class _NotRun(Exception):
    """A step the later ones depend on failed: they cannot run."""


# The steps, in the order the scenario takes them (what a case's ``input.step`` names).
STEPS = (
    "connect", "connect.ping-fields", "connect.again", "publish", "subscribe.time-delta",
    "msgproto", *(f"subscribe.{name}" for name in list(START_STEPS.values())[1:]),
    "ack", "ack.left", "unsubscribe", "subscribe.wildcard", "subscribe.zero-limits",
    "ping", "ping.unknown-conn", "publish.unknown-client", "close", "close.connect-again",
)  # fmt: skip


class Scenario:
    """The steps against one streaming server behind ``t``; ``run`` gives an Answer per step."""

    def __init__(self, t: Transport, cluster_id: str) -> None:
        self.t = t
        self.cluster_id = cluster_id
        self.client = f"conformance-{t.unique()[:8]}"
        self.channel = f"conformance-{t.unique()[:8]}"
        self.conn_id = t.unique().encode()
        self.answers: dict[str, Answer] = {}
        self.response = pb.ConnectResponse()
        self.stored: list[Stored] = []  # what the channel holds, as this client saw it stored
        self.sequences: dict[bytes, int] = {}  # data -> the sequence the server gave it

    def note(self, step: str, text: str, started: float, replies: tuple[Reply, ...] = (),
             got: list[pb.Message | DecodeError] | None = None) -> None:  # fmt: skip
        ms = (self.t.clock() - started) * 1000
        self.answers[step] = Answer(text, replies, tuple(got or ()), self.channel, ms)

    def connect_request(self, heartbeat: str, conn_id: bytes) -> pb.ConnectRequest:
        return pb.ConnectRequest(
            self.client, heartbeat, protocol=1, conn_id=conn_id,
            ping_interval=5, ping_timeout=3, ping_max_out=3,
        )  # fmt: skip

    def run(self) -> dict[str, Answer]:
        steps = (self.connect, self.duplicate, self.publish, self.start_positions,
                 self.ack, self.unsubscribe, self.subscribe_refusals, self.ping,
                 self.unknown_client, self.close)  # fmt: skip
        try:
            for step in steps:
                step()
        except (_NotRun, OSError) as exc:
            return self.answers | not_run(f"not run: {exc or type(exc).__name__}", self.answers)
        return self.answers

    def connect(self) -> None:
        started = self.t.clock()
        subject = pb.discover_subject(self.cluster_id)
        resp = self.t.request(subject, self.connect_request(self.t.heartbeat, self.conn_id),
                              "ConnectResponse")  # fmt: skip
        self.note("connect", describe(resp, keep=("error", *_CONNECTED)), started, (Reply(resp),))
        ok = isinstance(resp, pb.ConnectResponse) and not resp.error
        if not ok or not all(pb.to_json(resp).get(f) for f in _CONNECTED):
            raise _NotRun(f"the ConnectResponse was {describe(resp)}")
        assert isinstance(resp, pb.ConnectResponse)
        self.response = resp
        self.note("connect.ping-fields", describe(resp, keep=_PING_FIELDS), started,
                  (Reply(resp),))  # fmt: skip

    def duplicate(self) -> None:
        started = self.t.clock()
        other = self.t.inbox("heartbeat-duplicate")
        request = self.connect_request(other, self.t.unique().encode())
        resp = self.t.request(pb.discover_subject(self.cluster_id), request, "ConnectResponse")
        self.note("connect.again", describe(resp, keep=("error",)), started, (Reply(resp),))
        if not (isinstance(resp, pb.ConnectResponse) and resp.error):
            raise _NotRun("a second connection took over the clientID")

    def pub(self, data: bytes, client: str | None = None) -> Reply:
        guid = self.t.unique()
        msg = pb.PubMsg(client or self.client, guid, self.channel, data=data)
        subject = pb.publish_subject(self.response.pub_prefix, self.channel)
        ack = self.t.request(subject, msg, "PubAck")
        if client is None and isinstance(ack, pb.PubAck) and ack.guid == guid and not ack.error:
            # Stored at the latest when acknowledged: the clock a replay is counted against.
            self.stored.append(Stored(0, self.channel, "", data, self.t.now_ns()))
        return Reply(ack, guid)

    def publish(self) -> None:
        started = self.t.clock()
        sent = [self.pub(b"m1")]
        self.t.sleep(TIME_GAP)  # so a time delta can tell m1 from m2 and m3
        sent += [self.pub(b"m2"), self.pub(b"m3")]
        answers = sorted({describe(r.message, keep=("error",)) for r in sent})
        self.note("publish", f"3 PubMsg: {answers}", started, tuple(sent))
        if len(self.stored) != 3:
            raise _NotRun("the channel does not hold the three messages")

    def subscribe(
        self, position: StartPosition, *, subject: str | None = None, limits: bool = True,
        **fields: int,
    ) -> tuple[str, Received, pb.SubscriptionRequest]:  # fmt: skip
        inbox = self.t.expect(self.t.inbox("deliveries"), "MsgProto")
        request = pb.SubscriptionRequest(
            self.client, subject or self.channel, inbox=inbox,
            max_in_flight=100 if limits else 0, ack_wait_in_secs=30 if limits else 0,
            start_position=position, **fields,
        )  # fmt: skip
        resp = self.t.request(self.response.sub_requests, request, "SubscriptionResponse")
        return inbox, resp, request

    def unsub(self, resp: Received) -> Received:
        if not (isinstance(resp, pb.SubscriptionResponse) and resp.ack_inbox):
            return None
        request = pb.UnsubscribeRequest(self.client, self.channel, resp.ack_inbox)
        return self.t.request(self.response.unsub_requests, request, "SubscriptionResponse")

    def acks(self, resp: Received, messages: list[pb.Message | DecodeError]) -> None:
        if isinstance(resp, pb.SubscriptionResponse) and resp.ack_inbox:
            for m in messages:
                if isinstance(m, pb.MsgProto):
                    self.t.send(resp.ack_inbox, pb.Ack(m.subject, m.sequence))

    def collect(self, inbox: str, count: int, seconds: float) -> list[pb.Message | DecodeError]:
        """What arrived on ``inbox``: waits for ``count`` messages (at most ``seconds``), then
        for QUIET more, so extras show."""
        self.t.wait(lambda: len(self.t.received(inbox)) >= count, seconds)
        self.t.wait(lambda: False, QUIET)
        return list(self.t.received(inbox))

    def start_positions(self) -> None:
        for position, name in START_STEPS.items():
            started = self.t.clock()
            fields = {
                StartPosition.TIME_DELTA_START: {"start_time_delta": TIME_DELTA_NS},
                StartPosition.SEQUENCE_START: {"start_sequence": self.sequences.get(b"m2", 2)},
            }.get(position, {})
            now = self.t.now_ns()
            inbox, resp, request = self.subscribe(position, **fields)
            # How many to wait for: what the reference replays (what counts is the case's).
            channel = [dataclasses.replace(m, sequence=self.sequences.get(m.data, i))
                       for i, m in enumerate(self.stored, 1)]  # fmt: skip
            count = len(replay(channel, request, now))
            got = self.collect(inbox, count, REPLY_TIMEOUT)
            if position == StartPosition.FIRST:
                self.sequences = {m.data: m.sequence for m in got if isinstance(m, pb.MsgProto)}
                shown = [(m.sequence, m.subject == self.channel, m.timestamp > 0)
                         for m in got if isinstance(m, pb.MsgProto)]  # fmt: skip
                self.note("msgproto", f"MsgProto (sequence, subject is the channel, timestamp "
                          f"set) {shown}", started, (), got)  # fmt: skip
            if position == StartPosition.NEW_ONLY:
                self.pub(b"m4")
                got = self.collect(inbox, count + 1, REPLY_TIMEOUT)
            self.acks(resp, got)
            self.unsub(resp)
            self.note(f"subscribe.{name}", f"{describe(resp)}; {deliveries(got)}", started,
                      (Reply(resp),), got)  # fmt: skip

    def ack(self) -> None:
        started = self.t.clock()
        acked, acked_resp, _ = self.subscribe(StartPosition.FIRST)
        first = self.collect(acked, len(self.stored), REPLY_TIMEOUT)
        self.acks(acked_resp, first)
        left = self.t.expect(self.t.inbox("deliveries"), "MsgProto")
        request = pb.SubscriptionRequest(
            self.client, self.channel, inbox=left, max_in_flight=100,
            ack_wait_in_secs=ACK_WAIT, start_position=StartPosition.FIRST,
        )  # fmt: skip
        left_resp = self.t.request(self.response.sub_requests, request, "SubscriptionResponse")

        def again() -> bool:
            return any(isinstance(m, pb.MsgProto) and m.redelivered for m in self.t.received(left))

        self.t.wait(again, REDELIVERY_WAIT)
        self.t.wait(lambda: False, max(0.0, ACK_WAIT + 1.5 - (self.t.clock() - started)))
        after = list(self.t.received(acked))
        unacked = list(self.t.received(left))
        self.acks(left_resp, unacked)
        self.unsub(acked_resp)
        self.unsub(left_resp)
        self.note("ack", deliveries(after), started, (Reply(acked_resp),), after)
        self.note("ack.left", f"{describe(left_resp)}; {deliveries(unacked)}", started,
                  (Reply(left_resp),), unacked)  # fmt: skip

    def unsubscribe(self) -> None:
        started = self.t.clock()
        inbox, resp, _ = self.subscribe(StartPosition.NEW_ONLY)
        answer = self.unsub(resp)
        self.pub(b"m5")
        got = self.collect(inbox, 1, QUIET)
        self.note("unsubscribe", f"{describe(answer)}; then {deliveries(got)}", started,
                  (Reply(answer),), got)  # fmt: skip

    def subscribe_refusals(self) -> None:
        started = self.t.clock()
        _, resp, _ = self.subscribe(StartPosition.NEW_ONLY, subject=f"{self.channel}.>")
        self.unsub(resp)
        self.note("subscribe.wildcard", describe(resp), started, (Reply(resp),))
        started = self.t.clock()
        _, resp, _ = self.subscribe(StartPosition.NEW_ONLY, limits=False)
        self.unsub(resp)
        self.note("subscribe.zero-limits", describe(resp), started, (Reply(resp),))

    def ping(self) -> None:
        started = self.t.clock()
        subject = self.response.ping_requests
        if not subject:
            self.note("ping", "the ConnectResponse named no pingRequests", started, (Reply(None),))
            self.note("ping.unknown-conn", "no pingRequests", started)
            return
        resp = self.t.request(subject, pb.Ping(self.conn_id), "PingResponse")
        self.note("ping", describe(resp), started, (Reply(resp),))
        started = self.t.clock()
        resp = self.t.request(subject, pb.Ping(b"no-such-connection"), "PingResponse")
        self.note("ping.unknown-conn", describe(resp), started, (Reply(resp),))

    def unknown_client(self) -> None:
        started = self.t.clock()
        ack = self.pub(b"stray", client=f"never-connected-{self.t.unique()[:8]}")
        self.note("publish.unknown-client", describe(ack.message, keep=("error",)), started,
                  (ack,))  # fmt: skip

    def close(self) -> None:
        started = self.t.clock()
        resp = self.t.request(self.response.close_requests, pb.CloseRequest(self.client),
                              "CloseResponse")  # fmt: skip
        self.note("close", describe(resp), started, (Reply(resp),))
        started = self.t.clock()
        heartbeat = self.t.inbox("heartbeat-again")
        request = self.connect_request(heartbeat, b"again")
        again = self.t.request(pb.discover_subject(self.cluster_id), request, "ConnectResponse")
        self.note("close.connect-again", describe(again, keep=("error",)), started,
                  (Reply(again),))  # fmt: skip
        if isinstance(again, pb.ConnectResponse) and not again.error:
            self.t.request(again.close_requests, pb.CloseRequest(self.client), "CloseResponse")


def not_run(reason: str, done: dict[str, Answer] | None = None) -> dict[str, Answer]:
    """An Answer saying ``reason`` for every step not in ``done``."""
    return {step: Answer("", error=reason) for step in STEPS if step not in (done or {})}


# --- the reference on a virtual clock ------------------------------------------------------------


@dataclass
class ModelTransport:
    """The reference streaming server as a Transport: requests answered at once, time virtual
    (a wait for something that does not come passes its seconds)."""

    model: StreamingServerModel = field(default_factory=StreamingServerModel)
    now: int = 1_700_000_000_000_000_000
    heartbeat: str = "_INBOX.heartbeat"
    _kinds: dict[str, str] = field(default_factory=dict)
    _got: dict[str, list[pb.Message | DecodeError]] = field(default_factory=dict)
    _count: int = 0

    def inbox(self, name: str) -> str:
        self._count += 1
        return f"_INBOX.{name}.{self._count}"

    def expect(self, subject: str, kind: str) -> str:
        self._kinds[subject] = kind
        return subject

    def send(self, subject: str, message: pb.Message, reply: str | None = None) -> None:
        for out in self.model.handle(subject, reply, pb.encode(message), self.now):
            if (kind := self._kinds.get(out.subject)) is not None:
                self._got.setdefault(out.subject, []).append(pb.decode(kind, out.payload))

    def request(self, subject: str, message: pb.Message, answer: str) -> Received:
        reply = self.expect(self.inbox(answer), answer)
        self.send(subject, message, reply)
        return next(iter(self._got.get(reply, [])), None)

    def received(self, inbox: str) -> list[pb.Message | DecodeError]:
        return self._got.get(inbox, [])

    def wait(self, done: Callable[[], bool], seconds: float) -> None:
        if not done():
            self.sleep(seconds)

    def sleep(self, seconds: float) -> None:
        self.now += int(seconds * 1e9)

    def now_ns(self) -> int:
        return self.now

    def clock(self) -> float:
        return self.now / 1e9

    def unique(self) -> str:
        self._count += 1
        return f"{self._count:032x}"


def reference_answers(cluster_id: str = CLUSTER_ID) -> dict[str, Answer]:
    """The scenario against the reference streaming server."""
    return Scenario(ModelTransport(StreamingServerModel(cluster_id=cluster_id)), cluster_id).run()


@cache
def _reference() -> dict[str, Answer]:
    return reference_answers()


# --- judging -----------------------------------------------------------------------------------


def _reply_problems(exp: dict[str, Any], reply: Reply) -> list[str]:
    message = reply.message
    name = exp.get("answer")
    if name is not None and not (isinstance(message, pb.Message) and name == message.NAME):
        return [f"expected a {name}, got {describe(message)}"]
    if not isinstance(message, pb.Message):
        return []
    problems = []
    if "error" in exp and bool(getattr(message, "error", "")) != exp["error"]:
        problems.append(f"expected {'an' if exp['error'] else 'no'} error: {describe(message)}")
    given = pb.to_json(message)
    if missing := [f for f in exp.get("set", []) if not given.get(f)]:
        problems.append(f"expected {', '.join(missing)} named: {describe(message)}")
    if exp.get("guid") and getattr(message, "guid", None) != reply.guid:
        problems.append(f"expected the guid {reply.guid} of its PubMsg: {describe(message)}")
    return problems


def _delivery_problems(exp: dict[str, Any], answer: Answer) -> list[str]:
    got = list(answer.deliveries)
    protos = [m for m in got if isinstance(m, pb.MsgProto)]
    problems = []
    if "delivered" in exp:
        want = [d.encode() for d in exp["delivered"]]
        if [m.data for m in protos] != want or len(protos) != len(got):
            problems.append(f"expected data {exp['delivered']}, {deliveries(got)}")
    if "redelivered" in exp and any(m.redelivered for m in protos) != exp["redelivered"]:
        which = "a message flagged" if exp["redelivered"] else "no message"
        problems.append(f"expected {which} redelivered, {deliveries(got)}")
    sequences = [m.sequence for m in protos]
    stamped = all(m.subject == answer.channel and m.timestamp > 0 for m in protos)
    if exp.get("stamped") and not (stamped and sequences == sorted(set(sequences))):
        problems.append(
            f"expected the channel as subject, a timestamp and growing sequences, {deliveries(got)}"
        )
    return problems


def judge(exp: dict[str, Any], answer: Answer) -> str | None:
    """Why a step's answer does not meet a case's ``expect`` (None when it does)."""
    if answer.error:
        return answer.error
    problems = [p for reply in answer.replies for p in _reply_problems(exp, reply)]
    problems += _delivery_problems(exp, answer)
    return "; ".join(problems) or None


def evaluate(inp: dict[str, Any], exp: dict[str, Any]) -> str | None:
    """A case against the reference: why the reference's answer does not meet it."""
    answer = _reference().get(inp["step"])
    if answer is None:
        return f"no step {inp['step']!r} (the steps: {', '.join(STEPS)})"
    return judge(exp, answer)
