"""The reference model of a connection's transport (conformance/transport_model.py) and what wire
scripts may say of it: TLS after INFO and its timeout, TLS first with its fallback delay, "TLS
available", WebSocket text frames and compression, each as the documents put it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import protocol, wire_script
from nats_conformance.conformance.server import ServerConfig, ServerModel
from nats_conformance.conformance.transport_model import (
    AUTO_FALLBACK,
    DEFAULT_TLS_TIMEOUT,
    PERMESSAGE_DEFLATE,
    TransportModel,
    fallback_delay,
)
from nats_conformance.conformance.vector_values import Mismatch

CONNECT_PING = b'CONNECT {"verbose":false}\r\nPING\r\n'


def _model(transport: str, config: dict[str, Any] | None = None) -> TransportModel:
    config = config or {}
    return TransportModel(ServerModel(ServerConfig(**config)), transport, config)


def _sent(conn: TransportModel) -> list[tuple[float, str]]:
    return [(round(at, 6), protocol.OP_NAMES[type(op)]) for at, op in conn.server.take_timed()]


@given(st.integers(1, 5000), st.sampled_from(["ms", "s"]))
def test_a_delay_reads_as_its_seconds_and_auto_as_50_ms(amount: int, unit: str) -> None:
    assert fallback_delay(f"{amount}{unit}") == amount / (1000 if unit == "ms" else 1)
    assert fallback_delay("auto") == AUTO_FALLBACK == 0.05
    assert fallback_delay(True) is None  # never INFO in clear


@pytest.mark.parametrize("value", [False, "yes", "300", "ms", "-1s", 300])
def test_a_handshake_first_value_the_documents_do_not_describe_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="true, auto or a duration"):
        fallback_delay(value)


@given(st.integers(1, 2000), st.integers(0, 3000))
def test_tls_first_with_a_delay_sends_info_in_clear_exactly_when_it_elapsed(
    delay_ms: int, waited_ms: int
) -> None:
    conn = _model("tls-first", {"tls": {"handshake_first": f"{delay_ms}ms"}})
    conn.opened()
    conn.elapse(waited_ms / 1000)
    sent = _sent(conn)
    if waited_ms < delay_ms:
        assert sent == []
    else:
        assert sent[:1] == [(delay_ms / 1000, "INFO")]


@given(st.integers(0, 1900))
def test_tls_first_true_sends_nothing_until_the_handshake_then_the_info(waited_ms: int) -> None:
    conn = _model("tls-first")
    conn.opened()
    conn.elapse(waited_ms / 1000)
    assert _sent(conn) == []
    conn.start_tls()
    assert [name for _, name in _sent(conn)] == ["INFO"]
    conn.feed(CONNECT_PING)
    assert [name for _, name in _sent(conn)] == ["PONG"]


def test_a_client_in_clear_before_a_tls_first_info_is_cut_off_without_a_word() -> None:
    conn = _model("tls-first")
    conn.opened()
    conn.feed(CONNECT_PING)
    assert _sent(conn) == [] and conn.server.closed


def test_a_client_in_clear_after_the_info_of_a_server_requiring_tls_gets_the_documented_error() -> (
    None
):
    conn = _model("tls")
    conn.opened()
    info = conn.server.take()
    assert isinstance(info[0], protocol.Info) and info[0].options["tls_required"] is True
    conn.feed(CONNECT_PING)
    assert conn.server.take() == [protocol.Err("'Secure Connection - TLS Required'")]
    assert conn.server.closed


@given(st.floats(0.01, 5.0), st.booleans())
def test_the_handshake_timeout_ends_a_connection_that_did_not_upgrade(
    timeout: float, configured: bool
) -> None:
    config = {"tls": {"timeout": timeout}} if configured else {}
    limit = timeout if configured else DEFAULT_TLS_TIMEOUT
    conn = _model("tls", config)
    conn.opened()
    conn.server.take()
    conn.elapse(limit * 0.99)
    assert not conn.server.closed
    conn.elapse(limit * 0.02)
    assert conn.server.closed and conn.server.take() == []  # no TLS to send anything over
    upgraded = _model("tls", config)
    upgraded.opened()
    upgraded.start_tls()
    upgraded.elapse(limit * 2)
    assert not upgraded.server.closed


def test_tls_available_says_so_and_serves_a_client_in_clear() -> None:
    conn = _model("tls", {"allow_non_tls": True})
    conn.opened()
    info = conn.server.take()[0]
    assert isinstance(info, protocol.Info)
    assert info.options.get("tls_available") is True and "tls_required" not in info.options
    conn.feed(CONNECT_PING)
    assert conn.server.take() == [protocol.Pong()]


@given(st.booleans(), st.sampled_from(["ws", "ws-deflate", "wss"]))
def test_compression_is_accepted_only_where_both_sides_support_it(
    compression: bool, transport: str
) -> None:
    conn = _model(transport, {"websocket": {"compression": compression}})
    upgraded = conn.upgraded()
    assert upgraded is not None
    both = compression and transport == "ws-deflate"
    assert upgraded.extensions == ((PERMESSAGE_DEFLATE,) if both else ())
    assert _model("tls").upgraded() is None


def test_text_frames_exist_on_websocket_only_and_carry_their_bytes() -> None:
    conn = _model("ws")
    conn.opened()
    conn.server.take()
    conn.feed(CONNECT_PING, text=True)
    assert conn.server.take() == [protocol.Pong()]
    with pytest.raises(ValueError, match="no frames"):
        _model("tcp").feed(CONNECT_PING, text=True)


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        ({"transport": "tcp", "config": {"tls": {"timeout": 1}}}, "wire.config.tls"),
        ({"transport": "tls-first", "config": {"allow_non_tls": True}},
         "wire.config.allow_non_tls"),
        ({"transport": "tls", "config": {"websocket": {}}}, "wire.config.websocket"),
        ({"transport": "tls", "config": {"tls": {"handshake_first": "auto"}}},
         "wire.config.tls.handshake_first"),
        ({"transport": "ws", "connections": {"main": {"starts_tls": False}}},
         "wire.connections.main.starts_tls"),
        ({"transport": "tls", "connections": {"main": {"greeting": False}}},
         "wire.connections.main.greeting"),
        ({"transport": "tcp", "exchanges": [{"start_tls": True, "expect": [], "then": "open"}]},
         "wire.exchanges[0]"),
        ({"transport": "tls", "exchanges": [{"text": True, "send": "PING\r\n", "expect": [],
                                              "then": "open"}]}, "wire.exchanges[0]"),
    ],
)  # fmt: skip
def test_a_script_whose_transport_settings_do_not_fit_its_transport_is_refused(
    wire: dict[str, Any], field: str
) -> None:
    script = {"exchanges": [{"expect": [], "then": "open"}], **wire}
    with pytest.raises(Mismatch) as raised:
        wire_script.evaluate(script)
    assert raised.value.field == field


def test_options_include_compares_only_the_options_it_names() -> None:
    info = protocol.Info({"tls_required": True, "max_payload": 1})
    exchange = {
        "expect": [{"op": "INFO", "options_include": {"tls_required": True}}],
        "then": "open",
    }
    assert wire_script.compare_exchange(exchange, 0, [info], False, "s") is None
    exchange["expect"][0]["options_include"] = {"tls_required": False}
    assert wire_script.compare_exchange(exchange, 0, [info], False, "s") is not None


def test_extensions_and_server_frames_are_judged_on_what_the_upgrade_and_frames_were() -> None:
    exchange = {"expect": [], "extensions": [], "server_frames": "binary", "then": "open"}
    plain = wire_script.Upgraded()
    assert wire_script.compare_exchange(exchange, 0, [], False, "s", websocket=plain) is None
    deflated = wire_script.Upgraded((PERMESSAGE_DEFLATE,))
    found = wire_script.compare_exchange(exchange, 0, [], False, "s", websocket=deflated)
    assert found is not None and found.field == "wire.exchanges[0].extensions"
    text = wire_script.Upgraded((), 1)
    found = wire_script.compare_exchange(exchange, 0, [], False, "s", websocket=text)
    assert found is not None and found.field == "wire.exchanges[0].server_frames"
    found = wire_script.compare_exchange(exchange, 0, [], False, "s")  # no WebSocket at all
    assert found is not None and "no WebSocket upgrade" in str(found)
