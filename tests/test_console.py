"""What a run prints: progress lines (with the heartbeat), the closing summary and verdict."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest

from nats_conformance.conformance.vectors import BUNDLED_DIR
from nats_conformance.harness.cli import main
from nats_conformance.harness.console import FLAKY_MEANS, Progress, summary, verdict_lines
from nats_conformance.harness.gate import Verdict
from nats_conformance.harness.results import ResultRow

SMALL_VECTORS = BUNDLED_DIR / "protocol-keepalive.json"


def _row(case_id: str, outcome: str, message: str = "", level: str = "must") -> ResultRow:
    return ResultRow("r", "t", "0", "v", "srv", "kind", "1.0", case_id, "g.x", level, outcome,
                     1.0, message)  # fmt: skip


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_a_line_every_n_rows_and_timed_phases_in_one_format() -> None:
    stream, clock = io.StringIO(), _Clock()
    progress = Progress(5, stream, every_n=2, every_s=60, clock=clock, heartbeat=False)
    for i in range(5):
        progress.step("srv", f"case{i}", failed=i == 1)
    with progress.timed("driver build client:x"):
        clock.now += 2.5
    progress.finish()
    assert stream.getvalue().splitlines() == [
        "progress: 2/5 rows, 0.0s: srv 2 (1 unexpected)",
        "progress: 4/5 rows, 0.0s: srv 4 (1 unexpected)",
        "progress: 5/5 rows, 0.0s: driver build client:x: started",
        "progress: 5/5 rows, 2.5s: driver build client:x: done in 2.5s",
    ]


def test_off_a_terminal_a_line_after_every_s_seconds() -> None:
    stream, clock = io.StringIO(), _Clock()
    progress = Progress(1000, stream, every_n=100, every_s=15, clock=clock, heartbeat=False)
    progress.step("srv", "a", failed=False)
    clock.now = 15.0
    progress.step("other", "b", failed=False)
    assert stream.getvalue() == "progress: 2/1000 rows, 15.0s: srv 1, other 1\n"


def test_the_heartbeat_says_what_runs_once_every_s_passed_without_a_line() -> None:
    stream, clock = io.StringIO(), _Clock()
    progress = Progress(10, stream, every_s=15, clock=clock, heartbeat=False)
    progress.step("srv", "a", failed=False)
    clock.now = 14.0
    progress.beat()  # not due yet
    assert stream.getvalue() == ""
    clock.now = 15.0
    progress.beat()  # between phases: the counts
    with progress.timed("report"):
        clock.now = 29.0
        progress.beat()
        clock.now = 320.0
        progress.beat()
    assert stream.getvalue().splitlines() == [
        "progress: 1/10 rows, 15.0s: srv 1",
        "progress: 1/10 rows, 15.0s: report: started",
        "progress: 1/10 rows, 5m20s: report: running for 5m05s",
        "progress: 1/10 rows, 5m20s: report: done in 5m05s",
    ]


def test_a_failed_phase_says_after_how_long_and_the_error_goes_on() -> None:
    stream, clock = io.StringIO(), _Clock()
    progress = Progress(0, stream, clock=clock, heartbeat=False)
    with pytest.raises(RuntimeError), progress.timed("driver build client:x"):
        clock.now = 61.0
        raise RuntimeError("boom")
    assert stream.getvalue().splitlines()[-1] == (
        "progress: 1m01s: driver build client:x: failed after 1m01s"  # no rows: no row count
    )


def test_the_heartbeat_thread_writes_while_nothing_finishes_and_stops_with_finish() -> None:
    stream = io.StringIO()
    progress = Progress(3, stream, every_s=0.05)
    progress.step("srv", "a", failed=False)
    with progress.timed("driver build client:slow"):
        time.sleep(0.4)
    progress.finish()
    running = [line for line in stream.getvalue().splitlines() if "running for" in line]
    assert len(running) >= 3
    assert all(line.startswith("progress: 1/3 rows, ") for line in running)
    assert not [t for t in threading.enumerate() if t.name == "progress" and t.is_alive()]
    written = stream.getvalue()
    time.sleep(0.2)
    assert stream.getvalue() == written  # stopped: nothing more


def test_a_phase_after_finish_beats_while_it_runs_and_stops_its_heartbeat() -> None:
    stream = io.StringIO()
    progress = Progress(1, stream, every_s=0.05)
    progress.step("srv", "a", failed=False)
    progress.finish()
    with progress.timed("report"):
        time.sleep(0.2)
    assert "report: running for" in stream.getvalue()
    assert not [t for t in threading.enumerate() if t.name == "progress" and t.is_alive()]


def test_the_total_can_be_raised_and_never_falls_below_the_rows_done() -> None:
    stream, clock = io.StringIO(), _Clock()
    progress = Progress(1, stream, every_n=1, clock=clock, heartbeat=False)
    progress.step("srv", "a", failed=False)
    progress.expect(2)
    progress.step("client:x", "b", failed=False)
    progress.step("client:x", "c", failed=False)
    progress.step("client:x", "d", failed=False)  # one more than anyone said
    assert [line.split(",")[0] for line in stream.getvalue().splitlines()] == [
        "progress: 1/1 rows",
        "progress: 2/3 rows",
        "progress: 3/3 rows",
        "progress: 4/4 rows",
    ]


def test_on_a_terminal_one_bar_redrawn_with_the_same_head() -> None:
    stream, clock = _Terminal(), _Clock()
    progress = Progress(4, stream, width=4, clock=clock, heartbeat=False)
    progress.step("srv", "case.one", failed=True)
    clock.now = 3.0
    with progress.timed("report"):
        clock.now = 5.0
        progress.beat()
    progress.finish()
    text = stream.getvalue()
    assert "\r[#---] 1/4 rows, 0.0s ! case.one" in text
    assert "\r[#---] 1/4 rows, 5.0s report 2.0s" in text
    assert "progress: 1/4 rows, 3.0s: report: started\n" in text
    assert "\n" not in text.replace("started\n", "").replace("done in 2.0s\n", "")


def _judged() -> list[tuple[ResultRow, Verdict]]:
    return [
        (_row("a.pass", "pass"), Verdict.OK),
        (_row("a.info", "fail", level="info"), Verdict.OK),
        (_row("a.base", "fail"), Verdict.EXPECTED),
        (_row("a.new", "fail", "broke"), Verdict.UNEXPECTED),
        (_row("a.stale", "pass"), Verdict.STALE),
        (_row("a.rerun", "pass", "flaky: passed on attempt 2 after attempt 1: fail: x"),
         Verdict.FLAKY),
        (_row("a.marked", "pass"), Verdict.FLAKY),
    ]  # fmt: skip


def test_the_summary_is_one_line_per_target_unless_full() -> None:
    short = summary(_judged()).splitlines()
    full = summary(_judged(), full=True).splitlines()
    assert short[1].split() == ["srv", "(1.0)", "all", "4", "3", "0", "0", "1", "2"]
    assert [line.split()[2] for line in full[1:3]] == ["must", "info"]
    assert short[2:] == full[3:]  # the same problems listed in both
    assert "unexpected failure (not run again): srv: a.new: fail: broke" in short
    assert "baseline is stale (passes): srv: a.stale: pass: " in short
    assert f"2 {FLAKY_MEANS}:" in short


def test_the_verdict_names_the_gating_rows_the_reruns_and_the_exit_code() -> None:
    lines = verdict_lines(_judged(), 1, reruns=1).splitlines()
    assert lines == [
        "rerun: each gating failure beyond the baseline ran up to 1 more time(s): 1 passed on a "
        "rerun (flaky), 1 still fail",
        "gating: srv: a.new: unexpected failure",
        "gating: srv: a.stale: baseline is stale (passes)",
        "verdict: exit 1: failed: must or robustness rows beyond the baseline (gating, above); "
        "2 gating rows (1 unexpected failures, 1 stale baseline entries), 1 baselined failures, "
        "2 flaky",
    ]
    passed = verdict_lines([(_row("a", "pass"), Verdict.OK)], 0, reruns=0).splitlines()
    assert passed[0].startswith("rerun: none")
    assert passed[-1].startswith("verdict: exit 0: passed")
    assert verdict_lines([], 3, reruns=1).splitlines()[-1].startswith("verdict: exit 3: no report")


def test_without_the_documents_vectors_check_says_where_to_put_them_as_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "spec"
    assert main(["vectors", "check", str(SMALL_VECTORS), "--spec", str(missing)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"note: quotes not compared with the documents' words: {missing} ")
    assert "put the specification documents there or name their directory with --spec" in first
