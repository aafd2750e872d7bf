"""The reference NATS Streaming server model, driven as a client would drive it."""

from __future__ import annotations

import pytest

from nats_conformance.conformance import streaming_messages as pb
from nats_conformance.conformance.streaming_messages import StartPosition
from nats_conformance.conformance.streaming_server import StreamingServerModel


def _request(model: StreamingServerModel, subject: str, message: pb.Message, now: int = 0) -> list:
    return model.handle(subject, "_INBOX.reply", pb.encode(message), now)


def _connected(client_id: str = "c1") -> tuple[StreamingServerModel, pb.ConnectResponse]:
    model = StreamingServerModel()
    [out] = _request(
        model, "_STAN.discover.test-cluster", pb.ConnectRequest(client_id, "_INBOX.hb")
    )
    response = pb.decode("ConnectResponse", out.payload)
    assert isinstance(response, pb.ConnectResponse) and response.error == ""
    return model, response


def _publish(model: StreamingServerModel, conn: pb.ConnectResponse, data: bytes, now: int) -> list:
    msg = pb.PubMsg(client_id="c1", guid=f"g{now}", subject="orders", data=data)
    return _request(model, f"{conn.pub_prefix}.orders", msg, now)


def test_connect_hands_out_subjects_and_rejects_a_duplicate_client_id() -> None:
    model, conn = _connected()
    assert conn.sub_requests and conn.close_requests and conn.pub_prefix
    assert set(model.listen_subjects()) >= {"_STAN.discover.test-cluster", conn.sub_requests}
    [out] = _request(model, "_STAN.discover.test-cluster", pb.ConnectRequest("c1", "_INBOX.hb"))
    assert "already registered" in pb.decode("ConnectResponse", out.payload).error


def test_publish_is_acknowledged_with_its_guid_and_delivered_to_subscribers() -> None:
    model, conn = _connected()
    sub = pb.SubscriptionRequest(client_id="c1", subject="orders", inbox="_INBOX.sub")
    [sub_out] = _request(model, conn.sub_requests, sub)
    ack_inbox = pb.decode("SubscriptionResponse", sub_out.payload).ack_inbox
    ack, delivery = _publish(model, conn, b"one", 10)
    assert pb.decode("PubAck", ack.payload) == pb.PubAck(guid="g10")
    assert delivery.subject == "_INBOX.sub"
    assert pb.decode("MsgProto", delivery.payload) == pb.MsgProto(1, "orders", "", b"one", 10)
    assert model.handle(ack_inbox, None, pb.encode(pb.Ack("orders", 1)), 11) == []
    assert model.subscriptions[ack_inbox].acked == [1]


@pytest.mark.parametrize(
    ("position", "extra", "sequences"),
    [
        (StartPosition.NEW_ONLY, {}, []),
        (StartPosition.LAST_RECEIVED, {}, [3]),
        (StartPosition.TIME_DELTA_START, {"start_time_delta": 15}, [2, 3]),
        (StartPosition.SEQUENCE_START, {"start_sequence": 2}, [2, 3]),
        (StartPosition.FIRST, {}, [1, 2, 3]),
    ],
)
def test_each_start_position_replays_what_the_documents_say(
    position: StartPosition, extra: dict, sequences: list[int]
) -> None:
    model, conn = _connected()
    for now in (10, 20, 30):
        _publish(model, conn, b"x", now)
    sub = pb.SubscriptionRequest(
        client_id="c1", subject="orders", inbox="_INBOX.s", start_position=position, **extra
    )
    out = _request(model, conn.sub_requests, sub, now=35)
    assert [pb.decode("MsgProto", o.payload).sequence for o in out[1:]] == sequences


def test_unsubscribe_and_close_end_deliveries() -> None:
    model, conn = _connected()
    [sub_out] = _request(
        model, conn.sub_requests, pb.SubscriptionRequest("c1", "orders", inbox="_INBOX.s")
    )
    ack_inbox = pb.decode("SubscriptionResponse", sub_out.payload).ack_inbox
    [unsub] = _request(model, conn.unsub_requests, pb.UnsubscribeRequest("c1", "orders", ack_inbox))
    assert pb.decode("SubscriptionResponse", unsub.payload).error == ""
    assert len(_publish(model, conn, b"x", 1)) == 1  # the PubAck only
    [closed] = _request(model, conn.close_requests, pb.CloseRequest("c1"))
    assert pb.decode("CloseResponse", closed.payload).error == ""
    assert (
        "unknown clientID" in pb.decode("PubAck", _publish(model, conn, b"x", 2)[0].payload).error
    )


def test_garbage_is_recorded_and_answered_with_an_error() -> None:
    model = StreamingServerModel()
    [out] = model.handle("_STAN.discover.test-cluster", "_INBOX.r", b"\xff\xff", 0)
    assert pb.decode("ConnectResponse", out.payload).error.startswith("invalid ConnectRequest")
    assert isinstance(model.received[0][1], pb.DecodeError)


@pytest.mark.parametrize("subject", ["orders.*", "orders.>", ">", "*.eu"])
def test_a_wildcard_subscription_is_refused(subject: str) -> None:
    # streaming-protocol.txt: "NATS streaming does *not- support wildcards in subject
    # subscriptions".
    model, conn = _connected()
    sub = pb.SubscriptionRequest(client_id="c1", subject=subject, inbox="_INBOX.sub")
    [out] = _request(model, conn.sub_requests, sub)
    response = pb.decode("SubscriptionResponse", out.payload)
    assert "wildcards not supported" in response.error and not response.ack_inbox
    assert model.subscriptions == {}
