"""The report job: results files -> validated rows -> history store -> analysis -> outputs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..harness.gate import SHIPPED_BASELINE, Baseline
from . import analysis, details, history, ingest, outputs, summary
from .model import Report
from .spark import session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def build(
    paths: Sequence[Path],
    out: Path,
    *,
    store: str | None = None,
    master: str | None = None,
    baseline: Path = SHIPPED_BASELINE,
    full: bool = False,
) -> tuple[Report, list[ingest.RowProblem]]:
    """Report on ``paths`` (results files or directories) and everything already in the history
    ``store`` (default ``OUT/history``); writes the outputs into ``out``. The store's summaries
    are brought up to date with the new runs, or recomputed from every row when ``full``.

    The report judges each target's latest run by the ``baseline`` as the gate does (which
    failures gate, which are baselined, which flaky, the exit code), and a failure it lists
    with the URL of an upstream bug report shows that URL.
    Returns the report and every invalid row found in ``paths``.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    started = time.monotonic()
    files, detail_files = ingest.results_files(paths)
    # Absolute: with Spark Connect or a cluster, paths are resolved by the server, not by us.
    store = store if store and "://" in store else str(Path(store or out / "history").resolve())
    spark = session(master)
    # One pass over the JSON: valid rows go to the history while the bad ones are counted; only
    # when there are bad rows are the files read again, to say what is wrong where.
    seen = Observation("ingested")
    # The observe stands between the parse and the filters below: without it Spark copies the
    # JSON parse into each filter on `bad` (tens of times slower).
    rows = ingest.read_rows(spark, files).observe(
        seen, F.count(F.when(F.col("bad"), 1)).alias("bad")
    )
    known = summary.prepare(spark, store, full=full)
    added = history.append(spark, rows.where(~F.col("bad")), store, known)
    problems = _problems(spark, files, seen.get["bad"])
    ingested = time.monotonic()
    summary.update(spark, store, added.partitions)
    summarised = time.monotonic()
    judge_by = Baseline.load(baseline)
    report = analysis.analyse(
        spark, history.load(spark, store), summary.load(spark, store), judge_by, problems
    )
    analysed = time.monotonic()
    report.rows_added = added.rows
    report.details = details.load(detail_files, _detail_keys(report))
    report.upstream = details.upstream(report.targets, judge_by)
    report.timings = {
        "ingest": ingested - started,
        "summarise": summarised - ingested,
        "analyse": analysed - summarised,
    }
    outputs.write_all(report, out)
    report.timings["write"] = time.monotonic() - analysed
    return report, problems


def _problems(spark: SparkSession, files: list[Path], bad: int) -> list[ingest.RowProblem]:
    """Every bad row, located (the slow explanation runs only when there are bad rows)."""
    if not bad:
        return []
    problems = ingest.locate(ingest.explain(spark, [str(f) for f in files]))
    # The fast and the slow path apply the same checks; if they ever disagree, say so.
    if len(problems) < bad:
        missing = f"{bad - len(problems)} invalid row(s) not located"
        problems.append(ingest.RowProblem(", ".join(map(str, files)), 0, missing))
    return problems


def _detail_keys(report: Report) -> set[details.Key]:
    return {
        (t.run.run_id, t.run.target, case.case_id)
        for t in report.targets
        for case in (*t.failures, *t.changes)
    }
