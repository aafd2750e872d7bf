"""From the history store to a ``Report``: matrix, changes, per-case history, first failing
versions and flaky cases. Spark does the scans and joins; only small results reach Python."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from nats_conformance.harness.gate import FAILING
from nats_conformance.harness.implementations import implementation
from nats_conformance.harness.results import LEVELS, OUTCOMES
from nats_conformance.reports import coverage, strips
from nats_conformance.reports import history as history_store
from nats_conformance.reports.model import (
    Cell,
    Change,
    Counts,
    Failure,
    FirstFailure,
    Flaky,
    Point,
    Report,
    Run,
    TargetReport,
    VersionChange,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from nats_conformance.reports.summary import Summaries

SHOWN_PER_TARGET = 300  # failing cases and changes kept per target (the totals are exact)
HISTORY_POINTS = 20  # runs shown in a case's history
SHOWN_FLAKY = 500
LEVEL_ORDER = {level: n for n, level in enumerate(LEVELS)}


def version_order(version: str) -> tuple[int, ...]:
    """Versions compare by their numbers: 2.9.10 < 2.10.25."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def _counts(rows: DataFrame, *keys: str) -> DataFrame:
    from pyspark.sql import functions as F

    return rows.groupBy(*keys).agg(
        *[
            F.count(F.when(F.col("outcome") == outcome, 1)).alias(outcome)
            for outcome in ("pass", "fail", "error", "skip")
        ]
    )


def _as_counts(row: object) -> Counts:
    return Counts(row["pass"], row["fail"], row["error"], row["skip"])  # type: ignore[index]


def _iso(ts: datetime) -> str:
    return ts.replace(tzinfo=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _run_order(run: Run) -> tuple[str, str]:
    return (run.started, run.run_id)


# (target, run id) -> the partitions (run date, target directory) it has rows in
Dates = dict[tuple[str, str], list[tuple[str, str]]]


def _runs(summary: DataFrame) -> tuple[dict[str, list[Run]], Dates]:
    """Every run per target, oldest first, and the partitions each run is in, from the runs
    summary (a row per run, version and partition)."""
    merged: dict[tuple[str, str], Run] = {}
    dates: Dates = defaultdict(list)
    for r in summary.collect():  # a run may span two dates, and (in principle) report two versions
        key = (r.target, r.run_id)
        seen = merged.get(key)
        started = _iso(r.started)
        if seen is None or started < seen.started:
            seen = Run(r.target, r.run_id, started, r.target_version, r.target_kind, 0)
        merged[key] = replace(seen, rows=seen.rows + r.rows)
        dates[key].append((r.run_date, r.target_dir))
    runs: dict[str, list[Run]] = defaultdict(list)
    for run in sorted(merged.values(), key=_run_order):
        runs[run.target].append(run)
    return runs, dates


def _rows_of(spark: SparkSession, history: DataFrame, runs: list[Run], dates: Dates) -> DataFrame:
    """The rows of ``runs``, reading only the partitions they are in."""
    keys = [(r.target, r.run_id) for r in runs]
    return history_store.rows_of(spark, history, keys, [p for key in keys for p in dates[key]])


def _ranked(rows: DataFrame, order: list[Column], limit: int) -> DataFrame:
    """The first ``limit`` rows per target in ``order``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy("target").orderBy(*order)
    return rows.withColumn("_n", F.row_number().over(window)).where(F.col("_n") <= limit)


def _level_rank() -> Column:
    from pyspark.sql import functions as F

    rank = F.lit(len(LEVEL_ORDER))
    for level, n in reversed(LEVEL_ORDER.items()):
        rank = F.when(F.col("level") == level, n).otherwise(rank)
    return rank


def analyse(spark: SparkSession, history: DataFrame, summaries: Summaries) -> Report:
    """The report on ``history`` (the store's rows) and its ``summaries``: runs, flaky cases and
    version series come from the summaries; the rest reads only the partitions of the runs it
    needs (each target's latest, previous and recent runs)."""
    from pyspark.sql import functions as F

    runs, dates = _runs(summaries.runs)
    latest = [target_runs[-1] for target_runs in runs.values()]
    previous = [target_runs[-2] for target_runs in runs.values() if len(target_runs) > 1]
    latest_rows = _rows_of(spark, history, latest, dates).persist()  # read four times

    cells = [
        Cell(r.target, r.group, r.level, _as_counts(r))
        for r in _counts(latest_rows, "target", "group", "level").collect()
    ]

    failing = latest_rows.where(F.col("outcome").isin(*FAILING))
    failures: dict[str, list[Failure]] = defaultdict(list)
    for r in (
        _ranked(failing, [_level_rank(), "group", "case_id"], SHOWN_PER_TARGET)
        .orderBy("target", "_n")
        .collect()
    ):
        failures[r.target].append(Failure(r.case_id, r.group, r.level, r.outcome, r.message))

    changes: dict[str, list[Change]] = defaultdict(list)
    change_totals: dict[str, tuple[int, int]] = {}
    if previous:
        before = _rows_of(spark, history, previous, dates).select(
            "target", "case_id", F.col("outcome").alias("before")
        )
        changed = (
            latest_rows.join(before, ["target", "case_id"])
            .where(F.col("outcome").isin(*FAILING) != F.col("before").isin(*FAILING))
            .where((F.col("outcome") != "skip") & (F.col("before") != "skip"))
            .withColumn("regression", F.col("outcome").isin(*FAILING))
        )
        for r in (
            changed.groupBy("target")
            .agg(
                F.count(F.when(F.col("regression"), 1)).alias("regressions"),
                F.count(F.when(~F.col("regression"), 1)).alias("fixes"),
            )
            .collect()
        ):
            change_totals[r.target] = (r.regressions, r.fixes)
        for r in (
            _ranked(
                changed, [F.col("regression").desc(), _level_rank(), "case_id"], SHOWN_PER_TARGET
            )
            .orderBy("target", "_n")
            .collect()
        ):
            changes[r.target].append(
                Change(r.case_id, r.group, r.level, r.before, r.outcome, r.message)
            )

    # Each target's latest outcomes, for requirement coverage: a row per case of the latest runs.
    latest_outcomes = [
        (r.target, r.case_id, r.outcome)
        for r in latest_rows.select("target", "case_id", "outcome").toLocalIterator()
    ]
    version_strips = strips.build(latest_rows, latest, version_order)
    latest_rows.unpersist()
    recent = [run for target_runs in runs.values() for run in target_runs[-HISTORY_POINTS:]]
    history_points = _case_history(
        spark, _rows_of(spark, history, recent, dates), failures, changes
    )

    by_target_cells: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_target_cells[cell.target].append(cell)
    implementations = {target: implementation(target) for target in runs}
    targets = []
    for run in sorted(latest, key=lambda r: r.target):
        target_cells = by_target_cells[run.target]
        totals = sum((c.counts for c in target_cells), Counts())
        must = sum((c.counts for c in target_cells if c.level == "must"), Counts())
        regressions, fixes = change_totals.get(run.target, (0, 0))
        target_runs = runs[run.target]
        targets.append(
            TargetReport(
                run=run,
                previous=target_runs[-2] if len(target_runs) > 1 else None,
                implementation=implementations[run.target],
                runs=len(target_runs),
                totals=totals,
                must=must,
                failures=failures[run.target],
                failures_total=totals.failed + totals.errored,
                changes=changes[run.target],
                regressions_total=regressions,
                fixes_total=fixes,
                history=history_points.get(run.target, {}),
            )
        )
    flaky, flaky_total = _flaky(summaries.cases)
    return Report(
        generated=_iso(datetime.now(UTC).replace(tzinfo=None)),
        targets=targets,
        cells=cells,
        groups=sorted({c.group for c in cells}),
        **_version_series(spark, summaries.newest, runs, implementations),
        flaky=flaky,
        flaky_total=flaky_total,
        runs_total=sum(len(r) for r in runs.values()),
        rows_total=sum(run.rows for target_runs in runs.values() for run in target_runs),
        coverage=coverage.bundled_coverage(latest_outcomes),
        strips=version_strips,
    )


def _case_history(
    spark: SparkSession,
    history: DataFrame,
    failures: dict[str, list[Failure]],
    changes: dict[str, list[Change]],
) -> dict[str, dict[str, list[Point]]]:
    """The newest outcomes of each case shown in a drill-down (failing now, or changed), from
    ``history`` (the rows of each target's recent runs)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = {
        (target, item.case_id)
        for shown in (failures, changes)
        for target, items in shown.items()
        for item in items
    }
    if not keys:
        return {}
    wanted = spark.createDataFrame(sorted(keys), "target string, case_id string")
    window = Window.partitionBy("target", "case_id").orderBy(
        F.col("ts").desc(), F.col("run_id").desc()
    )
    points: dict[str, dict[str, list[Point]]] = defaultdict(lambda: defaultdict(list))
    for r in (
        history.join(F.broadcast(wanted), ["target", "case_id"])
        .withColumn("_n", F.row_number().over(window))
        .where(F.col("_n") <= HISTORY_POINTS)
        .orderBy("target", "case_id", "_n")
        .select("target", "case_id", "run_id", "ts", "target_version", "outcome")
        .collect()
    ):
        points[r.target][r.case_id].append(Point(r.run_id, _iso(r.ts), r.target_version, r.outcome))
    return points


def _version_series(
    spark: SparkSession,
    newest_rows: DataFrame,
    runs: dict[str, list[Run]],
    impl_of: dict[str, str],
) -> dict[str, list[Any]]:
    """For each implementation with several versions, judging each version by its latest run
    (``newest_rows``: the rows of each target's newest run per version):
    where each case first fails (``first_failures``), and every case whose outcome differs from
    the version before (``version_changes``)."""
    from pyspark.sql import functions as F

    newest: dict[tuple[str, str], Run] = {}
    for run in (run for target_runs in runs.values() for run in target_runs):
        key = (impl_of[run.target], run.version)
        if key not in newest or (run.started, run.run_id) > (
            newest[key].started,
            newest[key].run_id,
        ):
            newest[key] = run
    series: dict[str, list[str]] = defaultdict(list)
    for impl, version in newest:
        series[impl].append(version)
    for versions in series.values():
        versions.sort(key=lambda v: (version_order(v), v))
    chosen = [
        (run.target, run.run_id, impl, series[impl].index(version))
        for (impl, version), run in newest.items()
        if len(series[impl]) > 1
    ]
    if not chosen:
        return {"first_failures": [], "version_changes": []}
    ranks = spark.createDataFrame(chosen, "target string, run_id string, impl string, rank int")
    rows = (
        newest_rows.join(F.broadcast(ranks), ["target", "run_id"])
        .withColumn("failing", F.col("outcome").isin(*FAILING))
        .select("impl", "case_id", "rank", "outcome", "failing", "group", "level")
        .persist()  # one run per version: small, and read by both aggregations
    )
    first = (
        rows.groupBy("impl", "case_id")
        .agg(
            F.min(F.when(F.col("failing"), F.col("rank"))).alias("first_rank"),
            F.max("rank").alias("newest_rank"),
            F.max_by("outcome", "rank").alias("newest_outcome"),
            F.max("group").alias("group"),
            F.max("level").alias("level"),
            F.count(F.lit(1)).alias("versions"),  # one chosen run per version, one row per case
        )
        .where(F.col("first_rank").isNotNull())
    )
    last_passing = (
        rows.join(first.select("impl", "case_id", "first_rank"), ["impl", "case_id"])
        .where((F.col("outcome") == "pass") & (F.col("rank") < F.col("first_rank")))
        .groupBy("impl", "case_id")
        .agg(F.max("rank").alias("last_rank"))
    )
    found = first.join(last_passing, ["impl", "case_id"], "left").orderBy("impl", "case_id")
    collected = found.collect()
    changed = _changes(rows).collect()
    rows.unpersist()
    changes = [
        VersionChange(
            implementation=r.impl,
            case_id=r.case_id,
            group=r.group,
            level=r.level,
            before_version=series[r.impl][r.before_rank],
            before_outcome=r.before_outcome,
            after_version=series[r.impl][r.rank],
            after_outcome=r.outcome,
        )
        for r in changed
    ]
    firsts = [
        FirstFailure(
            implementation=r.impl,
            case_id=r.case_id,
            group=r.group,
            level=r.level,
            first_failing=series[r.impl][r.first_rank],
            last_passing=None if r.last_rank is None else series[r.impl][r.last_rank],
            newest_version=series[r.impl][r.newest_rank],
            newest_outcome=r.newest_outcome,
            versions=r.versions,
        )
        for r in collected
    ]
    return {"first_failures": firsts, "version_changes": changes}


def _changes(rows: DataFrame) -> DataFrame:
    """The rows whose outcome differs from the same case's in the version ranked before."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    before = Window.partitionBy("impl", "case_id").orderBy("rank")
    return (
        rows.withColumn("before_outcome", F.lag("outcome").over(before))
        .withColumn("before_rank", F.lag("rank").over(before))
        .where(F.col("before_outcome").isNotNull() & (F.col("before_outcome") != F.col("outcome")))
        .orderBy("impl", "rank", "case_id")
    )


def _flaky(cases: DataFrame) -> tuple[list[Flaky], int]:
    """Cases with different outcomes in runs of one target at one version, from the cases
    summary (outcome counts per target, version, case and level)."""
    from pyspark.sql import functions as F

    summed = [F.sum(c).alias(c) for c in (*OUTCOMES, "runs")]  # a run has one row per case
    kinds = sum(F.when(F.col(o) > 0, 1).otherwise(0) for o in OUTCOMES)
    flaky = (
        cases.groupBy("target", "target_version", "case_id", "level")  # across target dirs
        .agg(*summed)
        .where(kinds > 1)
    )
    flaky = flaky.persist()  # small; counted and listed from one read of the summary
    total = flaky.count()
    shown = flaky.orderBy("target", "case_id").limit(SHOWN_FLAKY).collect()
    flaky.unpersist()
    return [
        Flaky(
            r.target,
            r.target_version,
            r.case_id,
            r.level,
            tuple(sorted(o for o in OUTCOMES if r[o])),
            r.runs,
        )
        for r in shown
    ], total
