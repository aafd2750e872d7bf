"""From the history store to a ``Report``: matrix, changes, per-case history, first failing
versions and flaky cases. Spark does the scans and joins; only small results reach Python."""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..conformance.verdicts import CONFORMANCE, ROBUSTNESS
from ..harness.gate import FAILING, Baseline
from ..harness.implementations import implementation
from ..harness.results import LEVELS, OUTCOMES
from . import history as history_store
from . import sections, strips
from .model import (
    Cell,
    Change,
    Counts,
    Failure,
    FirstFailure,
    FlakyChange,
    Point,
    Report,
    Run,
    TargetReport,
    Varied,
    VersionChange,
)
from .section import Given, LatestCase
from .sections import transport_support
from .strips import version_order

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from .ingest import RowProblem
    from .summary import Summaries

SHOWN_PER_TARGET = 300  # failing cases and changes kept per target (the totals are exact)
HISTORY_POINTS = 20  # runs shown in a case's history
LEVEL_ORDER = {level: n for n, level in enumerate(LEVELS)}


def generated_micros() -> int:
    """When the report says it was generated, in microseconds since the epoch: now, or
    ``SOURCE_DATE_EPOCH`` when set (the reproducible-builds convention; ``bin/publish
    --render-only`` sets it to the results' commit time, so a render of unchanged results is the
    same bytes)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    return int(epoch) * 1_000_000 if epoch.isdecimal() else time.time_ns() // 1000


def _iso(micros: int) -> str:
    """A time given as microseconds since the epoch (as Spark's ``unix_micros`` gives it, which
    does not depend on any time zone), in ISO 8601 to the second, UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(micros // 1_000_000))


def _run_order(run: Run) -> tuple[str, str]:
    return (run.started, run.run_id)


# (target, run id) -> the partitions (run date, target directory) it has rows in
Dates = dict[tuple[str, str], list[tuple[str, str]]]


def _runs(summary: DataFrame) -> tuple[dict[str, list[Run]], Dates]:
    """Every run per target, oldest first, and the partitions each run is in, from the runs
    summary (a row per run, version and partition: a run may span two dates, and in principle
    report two versions; its version and kind are those of its first rows)."""
    from pyspark.sql import functions as F

    started_at = F.unix_micros("started")
    columns = ("target", "run_id", started_at, "target_version", "target_kind", "rows")
    first: dict[tuple[str, str], tuple[Any, ...]] = {}
    rows: Counter[tuple[str, str]] = Counter()
    dates: Dates = defaultdict(list)
    for target, run_id, started, version, kind, count, run_date, target_dir in summary.select(
        *columns, "run_date", "target_dir"
    ).collect():  # started: microseconds since the epoch
        key = (target, run_id)
        if key not in first or started < first[key][0]:
            first[key] = (started, version, kind)
        rows[key] += count
        dates[key].append((run_date, target_dir))
    merged = [
        Run(target, run_id, _iso(started), version, kind, rows[target, run_id])
        for (target, run_id), (started, version, kind) in first.items()
    ]
    runs: dict[str, list[Run]] = defaultdict(list)
    for run in sorted(merged, key=_run_order):
        runs[run.target].append(run)
    return runs, dates


def _cells(rows: list[tuple[str, str, str, str, str]]) -> list[Cell]:
    """The matrix from (target, case id, group, level, outcome) rows of the latest runs."""
    counted: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    for target, _, group, level, outcome in rows:
        counted[target, group, level][outcome] += 1
    return [
        Cell(target, group, level, Counts(n["pass"], n["fail"], n["error"], n["skip"]))
        for (target, group, level), n in sorted(counted.items())
    ]


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


def analyse(
    spark: SparkSession,
    history: DataFrame,
    summaries: Summaries,
    baseline: Baseline,
    problems: Sequence[RowProblem] = (),
) -> Report:
    """The report on ``history`` (the store's rows) and its ``summaries``: runs, flaky cases and
    version series come from the summaries; the rest reads only the partitions of the runs it
    needs (each target's latest, previous and recent runs). A difference at a version whose
    runs disagree on the case is no change (against the previous run or between versions): it
    is reported with the flaky cases. Then each section computes its part (``reports.sections``)
    from the core and the latest rows; ``baseline``: the one the report judges the latest runs
    by, as the gate does; ``problems``: the invalid rows of the results read."""
    from pyspark.sql import functions as F

    runs, dates = _runs(summaries.runs)
    unstable = _unstable(summaries.cases).persist()  # read three times; small
    # (target, version, case) -> what varied there; a case with two levels at a version is one.
    varied = unstable.groupBy("target", "target_version", "case_id").agg(
        F.array_compact(
            F.array(
                F.when(F.max("outcome_varies"), "outcome"),
                F.when(F.max("observation_varies"), "observation"),
            )
        ).alias("varied")
    )
    noisy = F.broadcast(varied.select("target", "target_version", "case_id"))
    latest = [target_runs[-1] for target_runs in runs.values()]
    previous = [target_runs[-2] for target_runs in runs.values() if len(target_runs) > 1]
    latest_rows = _rows_of(spark, history, latest, dates).persist()  # read three times

    # A row per case of each target's latest run: the matrix (conformance rows only), the
    # robustness failures, requirement coverage, strips and, for info cases, the observation.
    is_info = F.col("level") == "info"
    latest_cases = latest_rows.select(
        "target", "case_id", "group", "level", "outcome", "category",
        F.when(is_info, F.col("observed")).alias("observed"), "transport",
        transport_support.own_row().alias("own"),
    ).collect()  # fmt: skip
    latest_cases = [LatestCase(*r) for r in latest_cases]
    outcomes = [(r[0], r[1], r[2], r[3], r[4]) for r in latest_cases]
    # The scores count each case once, over tcp: a row over another transport is counted by
    # the transports section, so a server run over six transports weighs what it did over one.
    scored = zip(outcomes, latest_cases, strict=True)
    cells = _cells([o for o, r in scored if r.category == CONFORMANCE and r.own])
    # Failures are rows, each listed under its own id whatever carried it (case@ws is a case).
    failing_rows = Counter(r.target for r in latest_cases if r.outcome in FAILING)
    robustness = Counter(
        r.target for r in latest_cases if r.category == ROBUSTNESS and r.outcome in FAILING
    )

    failing = latest_rows.where(F.col("outcome").isin(*FAILING))
    failures: dict[str, list[Failure]] = defaultdict(list)
    # Robustness failures (a crash, a hang) first, whatever their level.
    apart = (F.col("category") != ROBUSTNESS).cast("int")
    for r in (
        _ranked(failing, [apart, _level_rank(), "group", "case_id"], SHOWN_PER_TARGET)
        .orderBy("target", "_n")
        .collect()
    ):
        failures[r.target].append(
            Failure(r.case_id, r.group, r.level, r.outcome, r.message, r.category, r.transport)
        )

    changes: dict[str, list[Change]] = defaultdict(list)
    change_totals: dict[str, tuple[int, int]] = {}
    if previous:
        from pyspark.sql import Window

        before = _rows_of(spark, history, previous, dates).select(
            "target",
            "case_id",
            F.col("outcome").alias("before"),
            F.col("target_version").alias("before_version"),
        )
        per_target = Window.partitionBy("target")
        regression = F.col("outcome").isin(*FAILING)
        changed = (
            latest_rows.join(before, ["target", "case_id"])
            .where(regression != F.col("before").isin(*FAILING))
            .where((F.col("outcome") != "skip") & (F.col("before") != "skip"))
            # Flaky at either run's version: not reproduced, so neither regression nor fix.
            .join(noisy, ["target", "target_version", "case_id"], "left_anti")
            .join(
                noisy.withColumnRenamed("target_version", "before_version"),
                ["target", "before_version", "case_id"],
                "left_anti",
            )
            .withColumns(
                {
                    "regression": regression,
                    "regressions": F.count(F.when(regression, 1)).over(per_target),
                    "fixes": F.count(F.when(~regression, 1)).over(per_target),
                }
            )
        )
        for r in (
            _ranked(
                changed, [F.col("regression").desc(), _level_rank(), "case_id"], SHOWN_PER_TARGET
            )
            .orderBy("target", "_n")
            .collect()
        ):
            change_totals[r.target] = (r.regressions, r.fixes)
            changes[r.target].append(
                Change(r.case_id, r.group, r.level, r.before, r.outcome, r.message)
            )
    recent = [run for target_runs in runs.values() for run in target_runs[-HISTORY_POINTS:]]
    history_points = _case_history(
        spark, _rows_of(spark, history, recent, dates), failures, changes
    )

    by_target_cells: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_target_cells[cell.target].append(cell)
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
                implementation=implementation(run.target),
                runs=len(target_runs),
                totals=totals,
                must=must,
                failures=failures[run.target],
                failures_total=failing_rows[run.target],
                changes=changes[run.target],
                regressions_total=regressions,
                fixes_total=fixes,
                history=history_points.get(run.target, {}),
                robustness=robustness[run.target],
            )
        )
    own_newest = summaries.newest.where(transport_support.own_row())
    series = _version_series(spark, own_newest, runs, varied)
    # Across versions each case is followed over tcp; the transports section follows each
    # transport (a transport a version lacks would otherwise turn every case into a change).
    own_outcomes = [o for o, r in zip(outcomes, latest_cases, strict=True) if r.own]
    version_strips = strips.without_noise(
        strips.strips(own_outcomes, latest, version_order), series["flaky_changes"]
    )
    report = Report(
        generated=_iso(generated_micros()),
        targets=targets,
        cells=cells,
        groups=sorted({c.group for c in cells}),
        **series,
        runs_total=sum(len(r) for r in runs.values()),
        rows_total=sum(run.rows for target_runs in runs.values() for run in target_runs),
        strips=version_strips,
    )
    given = Given(latest, latest_cases, latest_rows, unstable, baseline, problems)
    report.parts = sections.compute(given)
    latest_rows.unpersist()
    unstable.unpersist()
    return report


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
        .select(
            "target",
            "case_id",
            "run_id",
            F.unix_micros("ts").alias("at"),
            "target_version",
            "outcome",
        )
        .collect()
    ):
        points[r.target][r.case_id].append(Point(r.run_id, _iso(r.at), r.target_version, r.outcome))
    return points


def _version_series(
    spark: SparkSession, newest_rows: DataFrame, runs: dict[str, list[Run]], varied: DataFrame
) -> dict[str, list[Any]]:
    """For each implementation with several versions, judging each version by its latest run
    (the strips' rule; ``newest_rows``: the rows of each target's newest run per version):
    where each case first fails at a version whose runs agree on it (``first_failures``), and
    every case whose outcome or observation differs from the version before: a version change
    (``version_changes``) when the runs of both versions agree on the case, else a flaky one
    (``flaky_changes``; ``varied``: what varied per target, version and case, where the runs of
    one disagree)."""
    from pyspark.sql import functions as F

    every_run = [run for target_runs in runs.values() for run in target_runs]
    judging = strips.columns(every_run, version_order)  # impl -> version, in order -> its run
    series_of = {impl: list(versions) for impl, versions in judging.items()}
    chosen = [
        (run.target, run.run_id, impl, rank)
        for impl, versions in judging.items()
        if len(versions) > 1
        for rank, run in enumerate(versions.values())
    ]
    if not chosen:
        return {"first_failures": [], "version_changes": [], "flaky_changes": []}
    ranks = spark.createDataFrame(chosen, "target string, run_id string, impl string, rank int")
    # Per (implementation, case), its outcome at each version that ran it, oldest first: one
    # aggregation finds the first failing version, the last passing one before it and every
    # change between consecutive versions.
    series = F.col("s")
    # Only a version whose runs agree on the case counts: one that failed in one run and passed
    # in another is flaky there, neither its first failure nor a pass before one.
    agreed = F.filter(series, lambda x: F.size(x["varied"]) == 0)
    first = F.get(F.filter(agreed, lambda x: x["outcome"].isin(*FAILING)), 0)["rank"]
    passed_before = F.filter(agreed, lambda x: (x["outcome"] == "pass") & (x["rank"] < first))
    steps = F.transform(
        F.slice(series, 2, F.size(series)),
        lambda after, i: F.struct(F.get(series, i).alias("before"), after.alias("after")),
    )
    varied_here = F.coalesce("varied", F.array().cast("array<string>")).alias("varied")
    found = (
        newest_rows.join(F.broadcast(ranks), ["target", "run_id"])
        .join(F.broadcast(varied), ["target", "target_version", "case_id"], "left")
        .groupBy("impl", "case_id")
        .agg(
            F.sort_array(
                F.collect_list(F.struct("rank", "outcome", "observed", varied_here))
            ).alias("s"),
            F.max("group").alias("group"),
            F.max("level").alias("level"),
        )
        .select(
            "impl",
            "case_id",
            "group",
            "level",
            first.alias("first_rank"),
            F.array_max(F.transform(passed_before, lambda x: x["rank"])).alias("last_rank"),
            F.element_at(series, -1).alias("newest"),
            F.size(series).alias("versions"),
            F.filter(
                steps,
                lambda x: (
                    (x["before"]["outcome"] != x["after"]["outcome"])
                    | (x["before"]["observed"] != x["after"]["observed"])
                ),
            ).alias("changes"),
        )
        .where(F.col("first_rank").isNotNull() | (F.size("changes") > 0))
        .collect()
    )
    steps_found = sorted(
        ((r, c) for r in found for c in r.changes),
        key=lambda rc: (rc[0].impl, rc[1].after["rank"], rc[0].case_id),
    )
    changes, flaky_changes = [], []
    for r, c in steps_found:
        change = VersionChange(
            implementation=r.impl,
            case_id=r.case_id,
            group=r.group,
            level=r.level,
            before_version=series_of[r.impl][c.before["rank"]],
            before_outcome=c.before["outcome"],
            after_version=series_of[r.impl][c.after["rank"]],
            after_outcome=c.after["outcome"],
            before_observed=c.before["observed"],
            after_observed=c.after["observed"],
        )
        unstable = tuple(
            Varied(series_of[r.impl][side["rank"]], tuple(side["varied"]))
            for side in (c.before, c.after)
            if side["varied"]
        )
        if unstable:
            flaky_changes.append(FlakyChange(change, unstable))
        else:
            changes.append(change)
    firsts = [
        FirstFailure(
            implementation=r.impl,
            case_id=r.case_id,
            group=r.group,
            level=r.level,
            first_failing=series_of[r.impl][r.first_rank],
            last_passing=None if r.last_rank is None else series_of[r.impl][r.last_rank],
            newest_version=series_of[r.impl][r.newest["rank"]],
            newest_outcome=r.newest["outcome"],
            versions=r.versions,
        )
        for r in sorted(found, key=lambda r: (r.impl, r.case_id))
        if r.first_rank is not None
    ]
    return {"first_failures": firsts, "version_changes": changes, "flaky_changes": flaky_changes}


def _unstable(cases: DataFrame) -> DataFrame:
    """From the cases summary (per target, version, case and level: outcome counts, rows that
    passed only when run again, the observations' least and greatest digest), those whose rows
    disagree: on the outcome, or a row passed only on a later attempt (``outcome_varies``), or
    on the observation (``observation_varies``)."""
    from pyspark.sql import functions as F

    # A run has one row per case.
    summed = [F.sum(c).alias(c) for c in (*OUTCOMES, "runs", "retried")]
    kinds = sum(F.when(F.col(o) > 0, 1).otherwise(0) for o in OUTCOMES)
    return (
        cases.groupBy("target", "target_version", "case_id", "level")  # across target dirs
        .agg(*summed, F.min("observed_lo").alias("lo"), F.max("observed_hi").alias("hi"))
        .withColumns(
            {
                "outcome_varies": (kinds > 1) | (F.col("retried") > 0),
                "observation_varies": F.col("lo") != F.col("hi"),
            }
        )
        .where(F.col("outcome_varies") | F.col("observation_varies"))
    )
