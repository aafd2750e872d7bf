"""Benchmark: synthetic results of 10^6 and 10^7 rows through the whole report pipeline.

Each size gets fresh results files (written by Spark, not timed) and a fresh history store; the
timed part is ``reports.pipeline.build``: validate every row, append to the Parquet history,
summarise it, analyse, write the outputs. Prints rows/s per size and the 10^7 / 10^6 time ratio
(10 means the growth is linear); then, on a line starting ``incremental:``, the same build for
one more run of INCREMENT_TARGETS targets (about 5,000 rows) appended to that history. The goals
on local[2]: 10^7 rows from scratch in at most 120 s, the run appended to them in at most 20 s.

    .venv/bin/python bench/report_bench.py [--sizes 1000000 10000000] [--master local[2]]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from nats_conformance.reports import pipeline
from nats_conformance.reports.model import Report
from nats_conformance.reports.spark import session

TARGETS = 50
CASES = 330
GROUPS = 24
RUNS_PER_VERSION = 48
RUN_EVERY_SECONDS = 3600  # hourly CI runs: 10^7 rows are 606 runs of each target, 25 days
INCREMENT_TARGETS = 15  # 4,950 rows
GOAL_SECONDS = 120
INCREMENT_GOAL_SECONDS = 20


def generate(spark: object, rows: int, out: Path, start: int = 0) -> None:
    """``rows`` results rows like the harness writes, from row number ``start`` on: TARGETS
    targets x CASES cases per run, a run of every target each hour, a new version every
    RUNS_PER_VERSION runs; most cases pass, a few fail throughout, and a rare (run, case) flips."""
    from pyspark.sql import functions as F

    per_run = TARGETS * CASES
    run = (F.col("id") / per_run).cast("long")
    target_n = (F.col("id") % per_run / CASES).cast("long")
    case_n = F.col("id") % CASES
    stable_fail = F.abs(F.hash(target_n, case_n)) % 20 == 0
    flip = F.abs(F.hash(run, target_n, case_n)) % 500 == 0
    outcome = F.when(case_n % 37 == 0, "skip").when(stable_fail != flip, "fail").otherwise("pass")
    when = F.timestamp_seconds(F.lit(1_767_225_600) + run * RUN_EVERY_SECONDS + target_n * 10)
    frame = spark.range(start, start + rows).select(  # type: ignore[attr-defined]
        F.concat(F.lit("run-"), F.lpad(run.cast("string"), 6, "0")).alias("run_id"),
        F.date_format(when, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("time"),
        F.lit("0.1.0").alias("suite_version"),
        F.lit("sha256:0000000000000000").alias("vectors_version"),
        F.concat(F.lit("client:lib"), target_n.cast("string")).alias("target"),
        F.lit("client").alias("target_kind"),
        F.concat(
            F.lit("1."), (run / RUNS_PER_VERSION).cast("long").cast("string"), F.lit(".0")
        ).alias("target_version"),
        F.concat(F.lit("synthetic.case-"), case_n.cast("string")).alias("case_id"),
        F.concat(F.lit("synthetic.group-"), (case_n % GROUPS).cast("string")).alias("group"),
        F.when(case_n % 4 == 0, "should").otherwise("must").alias("level"),
        outcome.alias("outcome"),
        (F.col("id") % 1000 / 10).alias("duration_ms"),
        F.when(outcome == "fail", "expected PONG, got -ERR 'Unknown Protocol Operation'")
        .otherwise("")
        .alias("message"),
    )
    frame.select(F.to_json(F.struct("*")).alias("value")).write.text(str(out))
    for part in out.glob("part-*"):
        part.rename(part.with_suffix(".jsonl"))


def timed_build(work: Path, results: Path) -> tuple[float, Report]:
    """Seconds to report on ``results`` with the history in ``work``, and the report."""
    started = time.monotonic()
    report, problems = pipeline.build([results], work / "report", store=str(work / "history"))
    assert not problems, "the pipeline found invalid rows"
    return time.monotonic() - started, report


def stages(report: Report) -> str:
    return ", ".join(f"{stage} {t:.1f} s" for stage, t in report.timings.items())


def verdict(seconds: float, goal: float) -> str:
    return f"{'meets' if seconds <= goal else 'misses'} the {goal} s goal"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = session(args.master)
    seconds: dict[int, float] = {}
    for size in args.sizes:
        work = Path(tempfile.mkdtemp(prefix="report-bench-"))
        try:
            started = time.monotonic()
            generate(spark, size, work / "results")
            made = time.monotonic() - started
            seconds[size], report = timed_build(work, work / "results")
            assert report.rows_total == size, "the pipeline lost rows"
            print(
                f"{size:>11,} rows: {seconds[size]:7.1f} s, {size / seconds[size]:>9,.0f} rows/s "
                f"({report.runs_total} runs, {len(report.targets)} targets; {stages(report)}; "
                f"generating the input took {made:.1f} s)",
                flush=True,
            )
            per_run = TARGETS * CASES
            added = INCREMENT_TARGETS * CASES
            generate(spark, added, work / "next", start=(size // per_run + 1) * per_run)
            took, report = timed_build(work, work / "next")
            assert report.rows_added == added, "the pipeline lost rows"
            print(
                f"incremental: {added:,} rows appended to {size:,} in {took:.1f} s "
                f"({stages(report)}; {verdict(took, INCREMENT_GOAL_SECONDS)})",
                flush=True,
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if len(seconds) > 1:
        small, large = min(seconds), max(seconds)
        ratio = seconds[large] / seconds[small]
        print(f"time ratio {large:,} / {small:,} rows: {ratio:.2f} (linear: {large / small:.0f})")
    if 10_000_000 in seconds:
        took = seconds[10_000_000]
        print(f"10^7 rows in {took:.1f} s: {verdict(took, GOAL_SECONDS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
