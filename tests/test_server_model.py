"""The reference server model: what one connection gets back for what it sends."""

from __future__ import annotations

from nats_conformance.conformance import protocol as p
from nats_conformance.conformance.server import ServerConfig, ServerModel

QUIET = b'CONNECT {"verbose":false,"headers":true}\r\n'


def test_verbose_is_on_until_connect_turns_it_off() -> None:
    model = ServerModel()
    assert model.receive(b"PUB a 1\r\nx\r\nPING\r\n") == [p.Ok(), p.Pong()]
    assert model.receive(QUIET + b"PUB a 1\r\nx\r\nPING\r\n") == [p.Pong()]


def test_verbose_acknowledges_before_delivering() -> None:
    out = ServerModel().receive(b'CONNECT {"verbose":true}\r\nSUB a 1\r\nPUB a 1\r\nx\r\n')
    assert out == [p.Ok(), p.Ok(), p.Ok(), p.Msg("a", "1", None, b"x")]


def test_auto_unsubscribe_delivers_exactly_max_msgs() -> None:
    model = ServerModel()
    out = model.receive(QUIET + b"SUB a 1\r\nUNSUB 1 2\r\n" + b"PUB a 1\r\nx\r\n" * 3)
    assert out == [p.Msg("a", "1", None, b"x")] * 2
    assert model.subscriptions == {}


def test_queue_group_gets_one_copy_and_echo_false_gets_none() -> None:
    out = ServerModel().receive(QUIET + b"SUB a q 1\r\nSUB a q 2\r\nSUB a 3\r\nPUB a 0\r\n\r\n")
    assert [m.sid for m in out] == ["1", "3"]
    quiet_echo = b'CONNECT {"verbose":false,"echo":false}\r\n'
    assert ServerModel().receive(quiet_echo + b"SUB a 1\r\nPUB a 0\r\n\r\nPING\r\n") == [p.Pong()]


def test_headers_are_delivered_unchanged() -> None:
    block = b"NATS/1.0\r\nA: 1\r\n\r\n"
    out = ServerModel().receive(
        QUIET + b"SUB a 1\r\nHPUB a r %d %d\r\n%sok\r\n" % (len(block), len(block) + 2, block)
    )
    assert out == [p.HMsg("a", "1", "r", block, b"ok")]


def test_a_connection_without_headers_gets_messages_with_headers_as_msg() -> None:
    block = b"NATS/1.0\r\nA: 1\r\n\r\n"
    hpub = p.HPub("a", "r", block, b"ok")
    plain = ServerModel()
    plain.receive(b'CONNECT {"verbose":false}\r\n')
    assert not plain.headers_enabled
    assert plain.message_for("1", hpub) == p.Msg("a", "1", "r", b"ok")
    enabled = ServerModel()
    enabled.receive(QUIET)
    assert enabled.headers_enabled
    assert enabled.message_for("1", hpub) == p.HMsg("a", "1", "r", block, b"ok")


def test_auth_violation_closes() -> None:
    model = ServerModel(ServerConfig(user="u", password="p"))
    assert model.receive(b'CONNECT {"verbose":false,"user":"u","pass":"x"}\r\nPING\r\n') == [
        p.Err("'Authorization Violation'")
    ]
    assert model.closed
    good = ServerModel(ServerConfig(token="t"))
    assert good.receive(b'CONNECT {"verbose":false,"auth_token":"t"}\r\nPING\r\n') == [p.Pong()]


def test_errors_send_documented_text_and_close_or_not() -> None:
    model = ServerModel()
    assert model.receive(QUIET + b"SUB foo. 1\r\nPING\r\n") == [
        p.Err("'Invalid Subject'"),
        p.Pong(),
    ]
    assert not model.closed
    assert model.receive(b"FOO\r\nPING\r\n") == [p.Err("'Unknown Protocol Operation'")]
    assert model.closed and model.receive(b"PING\r\n") == []


def test_limits_come_from_config() -> None:
    model = ServerModel(ServerConfig(max_payload=2))
    assert model.receive(QUIET + b"PUB a 3\r\n") == [p.Err("'Maximum Payload Violation'")]
