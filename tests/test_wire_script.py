"""Wire scripts, format 2, without I/O: connections, waits, byte-exact, optional and regex
expectations, judged against the reference server model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import protocol as p
from nats_conformance.conformance.server import Broker, ServerConfig, ServerModel
from nats_conformance.conformance.vector_values import Mismatch
from nats_conformance.conformance.wire_script import (
    ConnectionPlan,
    compare_exchange,
    connection_of,
    connections,
    evaluate,
    kept,
    observed_connection,
)

QUIET = 'CONNECT {"verbose":false}\r\n'
PONG = {"op": "PONG"}


def exchange(expect: list[dict[str, Any]], then: str = "open", **kw: Any) -> dict[str, Any]:
    return {"expect": expect, "then": then, **kw}


def test_default_is_one_connection_named_main() -> None:
    wire = {"exchanges": [exchange([])]}
    assert list(connections(wire)) == ["main"]
    assert connection_of(wire, 0) == "main"


def test_an_undeclared_connection_names_the_field() -> None:
    wire = {"connections": {"a": {}}, "exchanges": [exchange([], on="b")]}
    with pytest.raises(Mismatch) as caught:
        connection_of(wire, 0)
    assert caught.value.field == "wire.exchanges[0].on"


def test_kept_leaves_out_ping_and_info_unless_kept() -> None:
    events = [p.Info({}), p.Ping(), p.Pong()]
    assert kept(ConnectionPlan("a"), events) == [p.Pong()]
    assert kept(ConnectionPlan("a", frozenset({"INFO"})), events) == [p.Info({}), p.Pong()]


def test_optional_pattern_may_be_absent_but_not_replaced() -> None:
    ex = exchange([{"op": "MSG", "optional": True}, PONG])
    msg = p.Msg("foo", "1", None, b"x")
    assert compare_exchange(ex, 0, [msg, p.Pong()], False, "s") is None
    assert compare_exchange(ex, 0, [p.Pong()], False, "s") is None
    hmsg = p.HMsg("foo", "1", None, b"NATS/1.0\r\n\r\n", b"x")
    mismatch = compare_exchange(ex, 0, [hmsg, p.Pong()], False, "s")
    assert mismatch is not None and mismatch.field == "wire.exchanges[0].expect[1]"


def test_matches_compares_a_field_with_a_regular_expression() -> None:
    ex = exchange([{"op": "-ERR", "matches": {"message": "^'Denied \"?x\"?'$"}}])
    assert compare_exchange(ex, 0, [p.Err("'Denied \"x\"'")], False, "s") is None
    assert compare_exchange(ex, 0, [p.Err("'Denied x'")], False, "s") is None
    assert compare_exchange(ex, 0, [p.Err("'Denied y'")], False, "s") is not None


@given(st.binary(max_size=40), st.binary(max_size=40))
def test_expect_bytes_passes_exactly_the_bytes_given(want: bytes, got: bytes) -> None:
    ex = {"expect_bytes": {"base64": __import__("base64").b64encode(want).decode()}, "then": "open"}
    mismatch = compare_exchange(ex, 0, [], False, "s", got)
    assert (mismatch is None) == (want == got)


def test_a_message_published_on_one_connection_reaches_another() -> None:
    broker = Broker(ServerConfig())
    sub, pub = ServerModel(broker=broker), ServerModel(broker=broker)
    assert sub.receive(f"{QUIET}SUB foo 1\r\n".encode()) == []
    assert pub.receive(f"{QUIET}PUB foo 2\r\nhi\r\nPING\r\n".encode()) == [p.Pong()]
    assert sub.receive(b"PING\r\n") == [p.Msg("foo", "1", None, b"hi"), p.Pong()]


def test_echo_false_spares_only_the_publisher() -> None:
    broker = Broker(ServerConfig())
    other, me = ServerModel(broker=broker), ServerModel(broker=broker)
    other.receive(f"{QUIET}SUB foo 1\r\n".encode())
    out = me.receive(b'CONNECT {"verbose":false,"echo":false}\r\nSUB foo 1\r\nPUB foo 0\r\n\r\n')
    assert out == [] and other.take() == [p.Msg("foo", "1", None, b"")]


def test_a_subscriber_without_headers_gets_the_payload_as_msg() -> None:
    broker = Broker(ServerConfig())
    sub, pub = ServerModel(broker=broker), ServerModel(broker=broker)
    sub.receive(f"{QUIET}SUB foo 1\r\n".encode())
    pub.receive(b'CONNECT {"verbose":false,"headers":true}\r\n')
    pub.receive(b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
    assert sub.take() == [p.Msg("foo", "1", None, b"hi")]


def test_authentication_timeout_closes_an_unauthenticated_connection() -> None:
    model = ServerModel(ServerConfig(user="u", password="p", auth_timeout=0.5))
    model.elapse(0.4)
    assert model.take() == [] and not model.closed
    model.elapse(0.2)
    assert model.take() == [p.Err("'Authorization Timeout'")] and model.closed


def test_unanswered_pings_make_a_stale_connection() -> None:
    config = ServerConfig(ping_interval=0.2, max_pings_out=2)
    silent = ServerModel(config, answers_pings=False)
    silent.elapse(1.0)
    assert silent.take() == [p.Ping(), p.Ping(), p.Err("'Stale Connection'")]
    answering = ServerModel(config)
    answering.elapse(1.0)
    assert answering.take() == [p.Ping()] * 5 and not answering.closed


def test_permissions_refuse_and_keep_the_connection_open() -> None:
    perms = {"publish": {"deny": ["secret"]}, "subscribe": {"allow": ["ok.*"]}}
    model = ServerModel(ServerConfig(permissions=perms))
    out = model.receive(f"{QUIET}SUB no 1\r\nSUB ok.a 2\r\nPUB secret 0\r\n\r\nPING\r\n".encode())
    assert out == [
        p.Err("'Permissions Violation for Subscription to no'"),
        p.Err("'Permissions Violation for Publish to secret'"),
        p.Pong(),
    ]
    assert list(model.subscriptions) == ["2"] and not model.closed


@pytest.mark.parametrize("protocol", ["2", "-1", '"1"', "true"])
def test_a_protocol_other_than_0_or_1_closes(protocol: str) -> None:
    model = ServerModel()
    out = model.receive(f'CONNECT {{"protocol":{protocol}}}\r\nPING\r\n'.encode())
    assert out == [p.Err("'Invalid Client Protocol'")] and model.closed


def test_evaluate_runs_waits_on_every_connection() -> None:
    wire = {
        "config": {"user": "u", "password": "p", "auth_timeout": 0.3},
        "connections": {"late": {}, "early": {}},
        "exchanges": [
            exchange([], on="late"),
            {"on": "early", "send": 'CONNECT {"verbose":false,"user":"u","pass":"p"}\r\n',
             "wait": 0.5, "expect": [], "then": "open"},
            exchange([{"op": "-ERR", "message": "'Authorization Timeout'"}], "closed", on="late"),
        ],
    }  # fmt: skip
    evaluate(wire)
    wire["exchanges"][2]["then"] = "open"
    with pytest.raises(Mismatch, match="expected the connection open"):
        evaluate(wire)


def test_an_observation_orders_deliveries_across_subscriptions_but_keeps_each_ones_order() -> None:
    def msg(sid: str, payload: bytes) -> p.Msg:
        return p.Msg("foo", sid, None, payload)

    one = [p.Pong(), msg("2", b"a"), msg("1", b"x"), msg("2", b"b"), p.Pong()]
    two = [p.Pong(), msg("1", b"x"), msg("2", b"a"), msg("2", b"b"), p.Pong()]
    assert observed_connection(one, False) == observed_connection(two, False)
    swapped = [p.Pong(), msg("2", b"b"), msg("1", b"x"), msg("2", b"a"), p.Pong()]
    assert observed_connection(swapped, False) != observed_connection(one, False)
