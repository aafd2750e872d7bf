"""A reference NATS Streaming server, sans-I/O: NATS messages in, NATS messages to publish out.

It plays the server side of streaming-protocol.txt over core NATS request/reply: the caller
carries messages between it and a real nats-server (subscribing to ``listen_subjects()``) and
passes the clock in, so the model has no I/O and no time of its own. What it records (every
request it decoded, every ack) is what a check inspects afterwards.

Left out, because they need a clock of their own: heartbeats to the client's heartbeatInbox and
redelivery after ackWaitInSecs. Subjects handed out follow the usual ``_STAN.<kind>.<id>`` shape;
the documents only say the ConnectResponse names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import streaming_messages as pb
from .streaming_messages import DecodeError, StartPosition

DEFAULT_CLUSTER_ID = "test-cluster"


@dataclass(frozen=True)
class Outbound:
    """A NATS message the server publishes."""

    subject: str
    reply: str | None
    payload: bytes


@dataclass(frozen=True)
class Stored:
    sequence: int
    subject: str
    reply: str
    data: bytes
    timestamp: int


@dataclass
class _Subscription:
    client_id: str
    subject: str
    inbox: str
    ack_inbox: str
    acked: list[int] = field(default_factory=list)


@dataclass
class StreamingServerModel:
    cluster_id: str = DEFAULT_CLUSTER_ID
    discover_prefix: str = pb.DEFAULT_DISCOVER_PREFIX
    server_id: str = "ref"
    clients: dict[str, pb.ConnectRequest] = field(default_factory=dict)
    channels: dict[str, list[Stored]] = field(default_factory=dict)
    subscriptions: dict[str, _Subscription] = field(default_factory=dict)  # by ack inbox
    received: list[tuple[str, pb.Message | DecodeError]] = field(default_factory=list)
    delivered: list[tuple[str, int]] = field(default_factory=list)  # (subscription inbox, seq)
    ack_inboxes: list[str] = field(default_factory=list)  # handed out, in subscription order
    _next_sub: int = 0

    # --- the subjects the model answers on ---------------------------------------------------

    def _subject(self, kind: str) -> str:
        return f"_STAN.{kind}.{self.server_id}"

    @property
    def discover_subject(self) -> str:
        return pb.discover_subject(self.cluster_id, self.discover_prefix)

    def connect_response(self) -> pb.ConnectResponse:
        return pb.ConnectResponse(
            pub_prefix=self._subject("pub"),
            sub_requests=self._subject("sub"),
            unsub_requests=self._subject("unsub"),
            close_requests=self._subject("close"),
            sub_close_requests=self._subject("subclose"),
            ping_requests=self._subject("ping"),
            ping_interval=5,
            ping_timeout=3,
            ping_max_out=3,
            protocol=1,
        )

    def listen_subjects(self) -> list[str]:
        """The subjects to subscribe to on the NATS server (ack inboxes share one wildcard)."""
        kinds = ("sub", "unsub", "close", "subclose", "ping")
        return [
            self.discover_subject,
            self._subject("pub") + ".>",
            self._subject("ack") + ".>",
            *(self._subject(k) for k in kinds),
        ]

    # --- handling ------------------------------------------------------------------------------

    def handle(
        self, subject: str, reply: str | None, payload: bytes, now_ns: int
    ) -> list[Outbound]:
        """One NATS message that arrived on a listened subject; what to publish in answer."""
        if subject == self.discover_subject:
            return self._answer(reply, self._connect(self._decode("ConnectRequest", payload)))
        if subject.startswith(self._subject("pub") + "."):
            return self._publish(self._decode("PubMsg", payload), reply, now_ns)
        if subject == self._subject("sub"):
            return self._subscribe(self._decode("SubscriptionRequest", payload), reply, now_ns)
        if subject in (self._subject("unsub"), self._subject("subclose")):
            return self._answer(
                reply, self._unsubscribe(self._decode("UnsubscribeRequest", payload))
            )
        if subject == self._subject("close"):
            return self._answer(reply, self._close(self._decode("CloseRequest", payload)))
        if subject == self._subject("ping"):
            self._decode("Ping", payload)
            return self._answer(reply, pb.PingResponse())
        if subject in self.subscriptions:
            ack = self._decode("Ack", payload)
            if isinstance(ack, pb.Ack):
                self.subscriptions[subject].acked.append(ack.sequence)
            return []
        return []

    def _decode(self, name: str, payload: bytes) -> pb.Message | DecodeError:
        message = pb.decode(name, payload)
        self.received.append((name, message))
        return message

    @staticmethod
    def _answer(reply: str | None, message: pb.Message) -> list[Outbound]:
        return [] if not reply else [Outbound(reply, None, pb.encode(message))]

    def _connect(self, req: pb.Message | DecodeError) -> pb.ConnectResponse:
        if not isinstance(req, pb.ConnectRequest):
            return pb.ConnectResponse(error=f"invalid ConnectRequest: {req}")
        if not req.client_id:
            return pb.ConnectResponse(error="clientID missing")
        if req.client_id in self.clients:
            return pb.ConnectResponse(error=f"clientID {req.client_id} already registered")
        self.clients[req.client_id] = req
        return self.connect_response()

    def _publish(
        self, msg: pb.Message | DecodeError, reply: str | None, now_ns: int
    ) -> list[Outbound]:
        if not isinstance(msg, pb.PubMsg):
            return self._answer(reply, pb.PubAck(error=f"invalid PubMsg: {msg}"))
        if msg.client_id not in self.clients:
            return self._answer(reply, pb.PubAck(guid=msg.guid, error="unknown clientID"))
        channel = self.channels.setdefault(msg.subject, [])
        stored = Stored(len(channel) + 1, msg.subject, msg.reply, msg.data, now_ns)
        channel.append(stored)
        out = self._answer(reply, pb.PubAck(guid=msg.guid))
        for sub in self.subscriptions.values():
            if sub.subject == msg.subject:  # streaming has no wildcards (streaming-protocol.txt)
                out.append(self._deliver(sub, stored))
        return out

    def _subscribe(
        self, req: pb.Message | DecodeError, reply: str | None, now_ns: int
    ) -> list[Outbound]:
        if not isinstance(req, pb.SubscriptionRequest) or req.client_id not in self.clients:
            return self._answer(
                reply, pb.SubscriptionResponse(error=f"invalid subscription: {req}")
            )
        if {"*", ">"} & set(req.subject.split(".")):  # "does *not- support wildcards"
            return self._answer(
                reply, pb.SubscriptionResponse(error=f"wildcards not supported: {req.subject}")
            )
        self._next_sub += 1
        ack_inbox = f"{self._subject('ack')}.{self._next_sub}"
        sub = _Subscription(req.client_id, req.subject, req.inbox, ack_inbox)
        self.subscriptions[ack_inbox] = sub
        self.ack_inboxes.append(ack_inbox)
        out = self._answer(reply, pb.SubscriptionResponse(ack_inbox=ack_inbox))
        backlog = replay(self.channels.get(req.subject, []), req, now_ns)
        return out + [self._deliver(sub, stored) for stored in backlog]

    def _unsubscribe(self, req: pb.Message | DecodeError) -> pb.SubscriptionResponse:
        if isinstance(req, pb.UnsubscribeRequest):
            for ack_inbox, sub in list(self.subscriptions.items()):
                if sub.client_id == req.client_id and ack_inbox == req.inbox:
                    del self.subscriptions[ack_inbox]
                    return pb.SubscriptionResponse()
        return pb.SubscriptionResponse(error=f"unknown subscription: {req}")

    def _close(self, req: pb.Message | DecodeError) -> pb.CloseResponse:
        if not isinstance(req, pb.CloseRequest) or req.client_id not in self.clients:
            return pb.CloseResponse(error=f"unknown client: {req}")
        del self.clients[req.client_id]
        for ack_inbox, sub in list(self.subscriptions.items()):
            if sub.client_id == req.client_id:
                del self.subscriptions[ack_inbox]
        return pb.CloseResponse()

    def _deliver(self, sub: _Subscription, stored: Stored) -> Outbound:
        self.delivered.append((sub.inbox, stored.sequence))
        return _message(sub, stored)


def replay(channel: list[Stored], req: pb.SubscriptionRequest, now_ns: int) -> list[Stored]:
    """Stored messages a new subscription starts with (streaming-protocol.txt, StartPosition)."""
    position = req.start_position
    if position == StartPosition.LAST_RECEIVED:
        return channel[-1:]
    if position == StartPosition.TIME_DELTA_START:
        return [m for m in channel if m.timestamp >= now_ns - req.start_time_delta]
    if position == StartPosition.SEQUENCE_START:
        return [m for m in channel if m.sequence >= req.start_sequence]
    if position == StartPosition.FIRST:
        return list(channel)
    return []  # NewOnly, and unknown positions


def _message(sub: _Subscription, stored: Stored) -> Outbound:
    proto = pb.MsgProto(
        sequence=stored.sequence,
        subject=stored.subject,
        reply=stored.reply,
        data=stored.data,
        timestamp=stored.timestamp,
    )
    return Outbound(sub.inbox, None, pb.encode(proto))
