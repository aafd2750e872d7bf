"""What an implementer writes is bounded like what a target sends: a driver's names (its hello)
and answers are stored bounded, and a client script has an overall deadline however long the
steps it declares. (Launch descriptions: test_described_server; baseline files: test_gate.)"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nats_conformance.conformance import vectors
from nats_conformance.harness.clients import (
    client_vectors,
    driver_session,
    interop_cases,
    interop_matrix,
    streaming_clients,
)
from nats_conformance.harness.clients import scripts as client_scripts
from nats_conformance.harness.clients.client_targets import ClientTarget, open_client
from nats_conformance.harness.clients.driver import capability_names
from nats_conformance.harness.clients.registry import STREAMING_LIBRARIES
from nats_conformance.harness.clients.rows import write_result
from nats_conformance.harness.results import (
    MESSAGE_LIMIT,
    NAME_LIMIT,
    ResultsWriter,
    RunContext,
    read_rows,
)
from tests.test_driver_answers import FAKE_DRIVER, three_cases

HUGE = 10 << 20  # characters of each name the boastful driver gives itself
# A driver whose hello names it with 10 MB strings and whose every answer is a 10 MB error.
BOASTFUL_DRIVER = f"""
import json, sys
huge = "x" * {HUGE}
for line in sys.stdin:
    request = json.loads(line)
    if request["cmd"] == "hello":
        result = {{"protocol": "nats-conformance-driver/2", "library": "lib-" + huge,
                  "version": "1." + huge, "language": "Python " + huge, "capabilities": []}}
        answer = {{"id": request["id"], "ok": True, "result": result}}
    else:
        answer = {{"id": request["id"], "ok": False,
                  "error": {{"type": "connection", "message": "no: " + huge}}}}
    sys.stdout.write(json.dumps(answer) + "\\n")
    sys.stdout.flush()
"""


def _script_case(case_id: str, steps: list[dict[str, Any]]) -> vectors.Case:
    return vectors.Case(
        "t.json",
        "client.t",
        {
            "id": case_id,
            "description": "a script of the test's own",
            "source": {"document": "client-protocol.txt", "section": "PING/PONG"},
            "level": "info",
            "roles": ["client"],
            "kind": client_scripts.KIND,
            "input": {"steps": steps},
            "expect": {},
        },
    )


@pytest.fixture
def program(tmp_path: Path) -> Iterator[Any]:
    """``program(text, *args)``: a client target whose driver is the Python program ``text``."""
    opened: list[ClientTarget] = []

    def make(text: str, *args: str) -> ClientTarget:
        path = tmp_path / f"driver-{len(opened)}.py"
        path.write_text(text)
        client = open_client(" ".join([f"driver:{sys.executable}", str(path), *args]))
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


def test_a_driver_s_names_and_answers_are_stored_bounded(program: Any, tmp_path: Path) -> None:
    client = program(BOASTFUL_DRIVER)
    driver = client.driver()  # asks hello
    assert client.version.startswith("1.xxx") and client.library.startswith("lib-xxx")
    assert client.hello is not None
    for name in (client.version, client.library, client.hello["language"]):
        assert len(name) < NAME_LIMIT + 60
        assert f"[{HUGE + len(name.partition('x')[0])} characters, sha256 " in name
    reply = driver.call("connect", url="nats://127.0.0.1:1", options={})
    assert reply.error_message is not None and len(reply.error_message) < MESSAGE_LIMIT + 60

    results = tmp_path / "results.jsonl"
    ctx = RunContext("run", "suite", "vectors")
    case = _script_case("t.boastful", [{"open": True}])
    with ResultsWriter(results) as writer:
        for result in client_scripts.run_scripts(client, [case]):
            write_result(client, writer, ctx, result)
    (row,) = read_rows(results)
    assert (row.case_id, row.outcome) == ("t.boastful", "error")
    assert row.target_version == client.version
    assert results.stat().st_size < 8 * (MESSAGE_LIMIT + NAME_LIMIT)  # not 10 MB per row


def test_a_script_that_never_ends_is_an_error_row_at_its_deadline(
    program: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver_session, "CASE_SECONDS", 1.0)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"capabilities": []}))
    client = program(FAKE_DRIVER, str(plan))
    # Valid by the schema: 300 steps, each watching 10 s for a message that never comes.
    endless = _script_case("t.endless", [{"no_event": {"event": "message"}, "for": 10}] * 300)
    quick = _script_case("t.quick", [{"open": True}])
    started = time.monotonic()
    rows = {r.case.case_id: r for r in client_scripts.run_scripts(client, [endless, quick])}
    assert time.monotonic() - started < 1.0 + 10.0  # the deadline, and starting the driver
    assert rows["t.endless"].found.outcome == "error"
    assert "did not end within its deadline of 1 s: stopped at input.steps[" in (
        rows["t.endless"].found.message
    )
    assert rows["t.quick"].found.outcome == "pass"  # the run goes on


def test_a_step_whose_window_the_deadline_cut_is_not_judged(
    program: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event awaited 10 s when 1 s is left: an error at the deadline, not a failure for
    an event that had no time to come."""
    monkeypatch.setattr(driver_session, "CASE_SECONDS", 1.0)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"capabilities": []}))
    client = program(FAKE_DRIVER, str(plan))
    case = _script_case("t.cut", [{"event": {"event": "message"}, "within": 10}])
    (row,) = client_scripts.run_scripts(client, [case])
    assert row.found.outcome == "error"
    assert "stopped at input.steps[0]" in row.found.message


def test_a_streaming_session_that_never_ends_is_an_error_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """300 sleeps of 0.2 s (each valid by the schema) stop at the session's deadline."""
    monkeypatch.setattr(driver_session, "CASE_SECONDS", 1.0)
    library = next(iter(STREAMING_LIBRARIES.values()))
    client = streaming_clients.StreamingClient(library)
    inp = {"steps": [{"do": "sleep", "ms": 200}] * 300}
    # A real session; sleeps ask the driver nothing, so it has none.
    session = streaming_clients._Session(None, client, inp, {})  # type: ignore[arg-type]
    started = time.monotonic()
    with pytest.raises(streaming_clients.Ruled) as caught:
        streaming_clients._take_steps(session, "nats://127.0.0.1:1")
    assert time.monotonic() - started < 1.0 + 0.5
    assert caught.value.ruling.outcome == "error"
    assert "did not end within its deadline of 1 s: stopped at input.steps[" in str(caught.value)


def test_a_path_case_past_its_deadline_asks_nothing_more_and_is_an_error_row(
    program: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every client path's case runs under the same deadline: a command it would send past it
    is not sent (a deadline of 0 s: none is)."""
    monkeypatch.setattr(driver_session, "CASE_SECONDS", 0.0)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"capabilities": ["decode_headers"]}))
    client = program(FAKE_DRIVER, str(plan))
    cases = three_cases()
    rows = [
        r for r in client_vectors.run_client_vectors(client, cases) if "@decode" in r.case.case_id
    ]
    assert len(rows) == len(cases)
    for row in rows:
        assert row.found.outcome == "error"
        assert row.found.message == (
            "the case did not end within its deadline of 0 s: stopped at the command "
            "'decode_headers'"
        )


# A driver that connects and flushes (all an interop pair asks before a case's own commands).
READY_DRIVER = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    if request["cmd"] == "hello":
        result = {"protocol": "nats-conformance-driver/2", "library": "ready", "version": "1",
                  "language": "Python", "capabilities": json.load(open(sys.argv[1]))}
        answer = {"id": request["id"], "ok": True, "result": result}
    elif request["cmd"] in ("connect", "flush", "close"):
        answer = {"id": request["id"], "ok": True, "result": {}}
    else:
        answer = {"id": request["id"], "ok": False,
                  "error": {"type": "unsupported", "message": request["cmd"]}}
    sys.stdout.write(json.dumps(answer) + "\\n")
    sys.stdout.flush()
"""


def test_an_interop_case_past_its_deadline_is_an_error_row_for_every_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plain: Any
) -> None:
    """The pair sends no command past the deadline (0 s: none of a case's own); each case of a
    batch is run again alone, and ends as an error naming where it stopped."""
    monkeypatch.setattr(driver_session, "CASE_SECONDS", 0.0)
    (tmp_path / "ready.py").write_text(READY_DRIVER)
    (tmp_path / "capabilities.json").write_text(json.dumps(capability_names()))
    driver = f"{sys.executable} {tmp_path / 'ready.py'} {tmp_path / 'capabilities.json'}"
    endpoint = interop_matrix.Endpoint(f"driver:{driver}", plain.server({}).url)
    endpoint.open()
    cases, problems = interop_cases.load_cases(vectors.bundled_cases())
    assert problems == []
    publish = [case for case in cases if case.spec.action == "publish"][:3]
    ctx = RunContext("run", "suite", "vectors")
    try:
        rows = [
            row
            for row, _ in interop_matrix.run_pairs([endpoint], publish, ResultsWriter(None), ctx)
        ]
    finally:
        endpoint.close()
    assert [row.outcome for row in rows] == ["error"] * len(publish)
    for row in rows:
        assert "did not end within its deadline of 0 s: stopped at B subscribe" in row.message
