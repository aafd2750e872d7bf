"""A driver is never the library: what a driver answers about itself, or a driver that crashes or
hangs, gives the case in flight a skip, an error or a robustness failure (``driver.rule``), and
every later case still gets its own row, judged.

The driver here is a real process speaking nats-conformance-driver/2 (a small Python program,
run as ``driver:COMMAND``), with a plan saying what it does for which input; for the HMSG path
it is a tiny NATS client of its own that connects to the fake server."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nats_conformance.conformance import vectors
from nats_conformance.conformance.verdicts import CONFORMANCE, ROBUSTNESS
from nats_conformance.harness.clients import client_vectors, interop_cases, interop_pair
from nats_conformance.harness.clients import scripts as client_scripts
from nats_conformance.harness.clients.client_targets import ClientTarget
from nats_conformance.harness.clients.driver import DriverError, DriverReply, Ruling, rule
from nats_conformance.harness.clients.fake_server import FakeConnection
from nats_conformance.harness.clients.rows import write_result
from nats_conformance.harness.results import Checked, ResultsWriter, RunContext, read_rows
from tests.stand_in_driver import OUT, SERVE, stand_ins

FAKE_DRIVER = (
    r"""
import base64, json, os, socket, sys, threading, time

plan = json.load(open(sys.argv[1]))
"""
    + OUT
    + r"""

def fields(block):
    return [line.decode().split(": ", 1) for line in block.split(b"\r\n")[1:] if b": " in line]


def read_server(sock, stream):
    # What the fake server sends: PING answered, MSG and HMSG delivered as events.
    while line := stream.readline():
        parts = line.split()
        if parts and parts[0] == b"PING":
            sock.sendall(b"PONG\r\n")
        elif parts and parts[0] in (b"MSG", b"HMSG"):
            size = int(parts[-1])
            header_size = int(parts[-2]) if parts[0] == b"HMSG" else 0
            data = stream.read(size + 2)[:size]
            block, payload = data[:header_size], data[header_size:]
            if base64.b64encode(block).decode() == plan.get("crash_on_hmsg"):
                os._exit(3)  # the library dies on what the server sent
            if base64.b64encode(block).decode() == plan.get("hang_on_hmsg"):
                conn["hung"] = True  # it answers nothing from now on
                return
            out({"event": "message", "sub": parts[2].decode(), "subject": parts[1].decode(),
                 "reply": None, "headers": fields(block) if header_size else None,
                 "status": None, "description": None,
                 "payload_b64": base64.b64encode(payload).decode()})
    out({"event": "closed"})


def answer(request):
    cmd = request["cmd"]
    if conn.get("hung"):
        time.sleep(60)
    if cmd == "hello":
        return {"protocol": "nats-conformance-driver/2", "library": "fake", "version": "1",
                "language": "Python", "capabilities": plan["capabilities"]}
    if cmd == "connect" and "connect" in plan:
        raise LookupError(plan["connect"])
    if cmd == "connect":
        host, port = request["url"].removeprefix("nats://").rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        stream = sock.makefile("rb")
        stream.readline()  # INFO
        sock.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nPING\r\n')
        stream.readline()  # PONG
        conn.update(sock=sock, sids=0)
        threading.Thread(target=read_server, args=(sock, stream), daemon=True).start()
        return {}
    if cmd == "subscribe":
        conn["sids"] += 1
        conn["sock"].sendall(f"SUB {request['subject']} {conn['sids']}\r\n".encode())
        return {"sub": str(conn["sids"])}
    if cmd == "close":
        if "sock" in conn:
            conn.pop("sock").close()
        plan["closes"] = plan.get("closes", 0) + 1
        if plan["closes"] == plan.get("crash_on_close"):
            os._exit(4)  # before its answer: nobody waits for the close's outcome
        return {}
    if cmd == "decode_headers":
        block = base64.b64decode(request["block_b64"])
        doing = plan.get("decode", {}).get(request["block_b64"])
        if doing == "crash":
            sys.stderr.write("the driver's own bug\n")
            os._exit(2)
        if doing == "hang":
            time.sleep(60)
        if doing in ("unsupported", "invalid"):
            raise LookupError(doing)
        return {"status": None, "description": None, "headers": fields(block)}
    raise LookupError("unsupported")
"""
    + SERVE
)


def three_cases() -> list[vectors.Case]:
    """Three headers.parse cases a client must decode, with three different valid blocks."""
    found: dict[str, vectors.Case] = {}
    for case in vectors.bundled_cases():
        if case.kind != "headers.parse" or "client" not in case.roles:
            continue
        expect = case.data["expect"]
        if "error" not in expect and expect.get("status") is None:
            found.setdefault(case.data["input"]["block"], case)
    return list(found.values())[:3]


def b64(case: vectors.Case) -> str:
    return base64.b64encode(vectors.decode_bytes(case.data["input"]["block"])).decode()


@pytest.fixture
def fake_client(tmp_path: Path) -> Iterator[Any]:
    """``fake_client(plan)``: a client target whose driver is the fake, following ``plan``."""
    with stand_ins(tmp_path, FAKE_DRIVER) as make:
        yield make


def rows(client: ClientTarget, cases: list[vectors.Case]) -> dict[str, Checked]:
    return {r.case.case_id: r for r in client_vectors.run_client_vectors(client, cases)}


@pytest.mark.parametrize(
    ("doing", "outcome", "said"),
    [("unsupported", "skip", "decode_headers unsupported: the fake says unsupported"),
     ("invalid", "error", "calls the suite's decode_headers request malformed")],
)  # fmt: skip
def test_an_answer_about_the_driver_is_never_a_failure(
    fake_client: Any, doing: str, outcome: str, said: str
) -> None:
    first, second, third = three_cases()
    client = fake_client({"capabilities": ["decode_headers"], "decode": {b64(first): doing}})
    got = rows(client, [first, second, third])
    row = got[f"{first.id}@decode"]
    assert (row.found.outcome, row.found.category) == (outcome, CONFORMANCE), row.found.message
    assert said in row.found.message
    for case in (second, third):  # asked, answered and judged
        assert got[f"{case.id}@decode"].found.outcome == "pass", got[
            f"{case.id}@decode"
        ].found.message
    assert got[f"{first.id}@hmsg"].found.outcome == "skip"  # no headers capability: not asked
    assert "lacks headers" in got[f"{first.id}@hmsg"].found.message


@pytest.mark.parametrize("doing", ["crash", "hang"])
def test_a_driver_dying_on_a_suite_command_errors_that_case_only(
    fake_client: Any, doing: str
) -> None:
    first, second, third = three_cases()
    client = fake_client({"capabilities": ["decode_headers"], "decode": {b64(second): doing}})
    started = time.monotonic()
    got = rows(client, [first, second, third])
    row = got[f"{second.id}@decode"]
    assert (row.found.outcome, row.found.category) == ("error", CONFORMANCE), row.found.message
    cause = "crashed" if doing == "crash" else "hung"
    assert f"the driver {cause} on a command of the suite (case {second.id}" in row.found.message
    assert (
        "'decode_headers'" in row.found.message and "the last lines exchanged" in row.found.message
    )
    assert b64(second) in row.found.message  # the request it died on, as exchanged
    if doing == "crash":
        assert (
            "exited with status 2" in row.found.message
            and "the driver's own bug" in row.found.message
        )
    for case in (first, third):  # the case before and the case after: judged as usual
        assert got[f"{case.id}@decode"].found.outcome == "pass", got[
            f"{case.id}@decode"
        ].found.message
    assert time.monotonic() - started < 15  # one deadline waited out, not one per case


def full_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every wait for the library its full length (a loaded machine's fake may take longer to
    die than a few round trips)."""
    monkeypatch.setattr(client_vectors, "patience", lambda observed, cap, floor=0.0: cap)


def test_a_library_dying_on_what_the_server_sent_is_a_robustness_failure(
    fake_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full_waits(monkeypatch)
    first, second, third = three_cases()
    client = fake_client({"capabilities": ["headers"], "crash_on_hmsg": b64(second)})
    got = rows(client, [first, second, third])
    row = got[f"{second.id}@hmsg"]
    assert (row.found.outcome, row.found.category) == ("fail", ROBUSTNESS), row.found.message
    assert f"the library crashed on what a server sent it (case {second.id}" in row.found.message
    assert "exited with status 3" in row.found.message
    for case in (first, third):  # delivered and judged; the one after on a restarted driver
        result = got[f"{case.id}@hmsg"]
        assert (result.found.outcome, result.found.category) == ("pass", CONFORMANCE), (
            result.found.message
        )
    # The category reaches the written row, and a robustness failure fails at every level.
    path = tmp_path / "rows.jsonl"
    with ResultsWriter(path) as writer:
        ctx = RunContext.for_vectors([vectors.BUNDLED_DIR])
        written = write_result(client, writer, ctx, row)
    assert (written.outcome, written.category) == ("fail", ROBUSTNESS)
    assert list(read_rows(path)) == [written]


def test_a_send_needing_an_undeclared_capability_is_not_asked(fake_client: Any) -> None:
    wanted = {"protocol.hpub.encode.doc-example-one-header": "headers",
              "protocol.sub.encode.doc-example-queue": "queue_groups",
              "protocol.unsub.encode.doc-example-max": "unsubscribe_max",
              "protocol.ping-pong.encode.ping": "flush_roundtrip"}  # fmt: skip
    cases = [case for case in vectors.bundled_cases() if case.id in wanted]
    client = fake_client({"capabilities": []})
    started = time.monotonic()
    got = rows(client, cases)
    for case in cases:
        row = got[f"{case.id}@send"]
        assert row.found.outcome == "skip" and f"lacks {wanted[case.id]}" in row.found.message, (
            row.found.message
        )
    assert time.monotonic() - started < 5  # nothing asked, nothing waited for


def test_a_crash_while_a_case_cleans_up_is_that_case_s(fake_client: Any) -> None:
    scripts = {
        case.id: case for case in vectors.bundled_cases() if case.kind == client_scripts.KIND
    }
    cases = [scripts[f"client.connect.{name}"] for name in ("sent", "protocol", "name")]
    client = fake_client({"capabilities": [], "crash_on_close": 2})
    got = {r.case.case_id: r for r in client_scripts.run_scripts(client, cases)}
    row = got["client.connect.protocol"]
    assert row.found.outcome == "error" and "'close'" in row.found.message, row.found.message
    assert "exited with status 4" in row.found.message
    for case_id in ("client.connect.sent", "client.connect.name"):  # judged, not charged
        assert got[case_id].found.outcome in ("pass", "fail"), got[case_id].found.message
        assert "crashed" not in got[case_id].found.message


def test_a_hang_found_while_closing_an_earlier_case_s_connection_is_not_charged(
    fake_client: Any,
) -> None:
    first, second, third = three_cases()
    client = fake_client({"capabilities": ["headers"], "hang_on_hmsg": b64(second)})
    got = rows(client, [first, second, third])
    # The second case is judged by what it saw (nothing delivered); its connection's close
    # then hangs, at the start of the third case, which runs on a new driver all the same.
    assert got[f"{second.id}@hmsg"].found.outcome == "fail", got[f"{second.id}@hmsg"].found.message
    for case in (first, third):
        result = got[f"{case.id}@hmsg"]
        assert (result.found.outcome, result.found.category) == ("pass", CONFORMANCE), (
            result.found.message
        )


@pytest.mark.parametrize(("answer", "outcome"), [("invalid", "error"), ("connection", "fail")])
def test_only_the_library_failing_to_connect_fails_a_must_connect_script(
    fake_client: Any, answer: str, outcome: str
) -> None:
    [case] = [c for c in vectors.bundled_cases() if c.id == "client.info.oversized.2k"]
    assert case.data["input"]["must_connect"]
    [row] = client_scripts.run_scripts(fake_client({"capabilities": [], "connect": answer}), [case])
    assert row.found.outcome == outcome, row.found.message


# --- the rule itself -----------------------------------------------------------------------------


def reply(kind: str | None) -> DriverReply:
    return DriverReply(kind is None, {}, kind, None if kind is None else f"said {kind}")


@pytest.mark.parametrize(
    ("kind", "ruling"),
    [(None, None), ("refused", None), ("protocol", None), ("timeout", None), ("other", None),
     ("connection", None), ("no_responders", None),
     ("unsupported", Ruling("skip", "publish unsupported: said unsupported")),
     ("invalid", Ruling("error", "the driver calls the suite's publish request malformed "
                                 "(invalid: said invalid): the driver and the suite disagree"))],
)  # fmt: skip
def test_only_answers_about_the_driver_are_ruled(kind: str | None, ruling: Ruling | None) -> None:
    assert rule(reply(kind), "publish") == ruling


@pytest.mark.parametrize(
    ("cause", "server_input", "outcome", "category"),
    [("crashed", True, "fail", ROBUSTNESS), ("hung", True, "fail", ROBUSTNESS),
     ("crashed", False, "error", CONFORMANCE), ("hung", False, "error", CONFORMANCE),
     ("broken", True, "error", CONFORMANCE)],
)  # fmt: skip
def test_a_failure_is_robustness_only_on_server_input(
    cause: str, server_input: bool, outcome: str, category: str
) -> None:
    exc = DriverError("driver x (pid 1) went wrong", cause, "'flush' (id 3)", "  > the last line")
    exc.server_input = server_input
    ruling = rule(exc, case="some.case")
    assert ruling is not None and (ruling.outcome, ruling.category) == (outcome, category)
    assert "some.case" in ruling.message
    assert "'flush' (id 3)" in ruling.message and "> the last line" in ruling.message


@pytest.mark.parametrize(
    ("kind", "outcome"),
    [("refused", "fail"), ("protocol", "fail"), ("unsupported", "skip"), ("invalid", "error")],
)
def test_interop_refusals_are_the_library_s_only(kind: str, outcome: str) -> None:
    verdict = interop_cases.refused(interop_pair.Refused("B (fake)", "publish", reply(kind)))
    assert verdict.outcome == outcome, verdict.message
    assert "B (fake)" in verdict.message


def test_a_case_after_a_crash_runs_on_the_new_driver_s_own_connection(
    fake_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection and subscription a Link made belong to the driver process that made them:
    once it is restarted, the next case makes its own, even while the fake server has not yet
    seen the dead process's socket close (here: never; on a loaded machine: not yet)."""
    full_waits(monkeypatch)
    monkeypatch.setattr(FakeConnection, "_client_closed", lambda self, how: None)
    first, second, third = three_cases()
    client = fake_client({"capabilities": ["headers"], "crash_on_hmsg": b64(second)})
    got = rows(client, [first, second, third])
    crashed = got[f"{second.id}@hmsg"].found
    assert crashed.category == ROBUSTNESS, crashed.message
    result = got[f"{third.id}@hmsg"].found
    assert (result.outcome, result.category) == ("pass", CONFORMANCE), result.message
