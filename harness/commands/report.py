"""``nats-conformance report``: turn results files into the compliance report (the PySpark
pipeline, ``reports``), as ``run`` does at its end."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...reports import pipeline
from ..console import Progress
from ..gate import SHIPPED_BASELINE


def main(args: argparse.Namespace) -> int:
    return write_report(
        args.results,
        args.out,
        args.history,
        args.spark_master,
        full=args.full,
        fail_on_regression=args.fail_on_regression,
        baseline=args.baseline,
    )


def write_report(
    paths: list[Path],
    out: Path,
    history: str | None,
    master: str | None,
    *,
    full: bool = False,
    fail_on_regression: bool = False,
    baseline: Path = SHIPPED_BASELINE,
    progress: Progress | None = None,
) -> int:
    """Build the report (with ``progress``'s heartbeat: Spark takes minutes); 0 when fine, 1 for
    invalid rows (or regressions, when they fail), 3 when no report could be written (no Spark,
    unreadable input, unwritable output or history, any failure of the job): the results files
    are never changed, so the report can be run again."""
    try:
        with (progress or Progress(0)).timed("report (Spark)"):
            report, problems = pipeline.build(
                paths, out, store=history, master=master, baseline=baseline, full=full
            )
    except Exception as exc:  # every failure of the job means the same: no report, exit 3
        print(f"nats-conformance: no report: {failure_reason(exc)}", file=sys.stderr)
        return 3
    for problem in problems:
        print(f"invalid row: {problem}", file=sys.stderr)
    print((out / "summary.md").read_text(encoding="utf-8"))
    print(f"report: {out / 'index.html'}")
    regressed = sum(t.regressions_total for t in report.targets)
    return 1 if problems or (fail_on_regression and regressed) else 0


def failure_reason(exc: BaseException, limit: int = 500) -> str:
    """One line saying why ``exc`` happened. A Java error reaches Python as a message holding a
    stack trace (Py4J puts the Java exception on a line of its own, after ": "): keep that line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    java = [line.removeprefix(": ") for line in lines if line.startswith(": ")]
    reason = (java or lines or [type(exc).__name__])[0]
    return reason if len(reason) <= limit else reason[:limit] + "..."
