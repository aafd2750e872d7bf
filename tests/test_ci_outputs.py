"""The CI outputs and progress lines, from rows built here (no target)."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nats_conformance.conformance.vectors import BUNDLED_DIR
from nats_conformance.harness.ci_outputs import (
    BUNDLED_BASE,
    junit_xml,
    md_text,
    sarif,
    summary_md,
    vector_uris,
)
from nats_conformance.harness.console import Progress
from nats_conformance.harness.gate import Verdict
from nats_conformance.harness.results import ResultRow


def _row(case_id: str, outcome: str, message: str = "", level: str = "must") -> ResultRow:
    return ResultRow("r", "t", "0", "v", "srv", "kind", "1.0", case_id, "g.x", level, outcome,
                     1.0, message)  # fmt: skip


def test_junit_carries_any_byte_a_target_sent_as_parseable_xml() -> None:
    rows = [(_row("a", "fail", "got \x00\x1b[31m <x>&"), Verdict.UNEXPECTED)]
    failure = ET.fromstring(junit_xml(rows)).find("testsuite/testcase/failure")
    assert failure is not None
    assert failure.get("message") == "[must, gating] got \\x00\\x1b[31m <x>&"


def test_markdown_lists_stale_entries_and_neutralises_a_targets_words() -> None:
    words = "[x](http://evil) @someone <b>\n| cell " + "y" * 400
    rows = [
        (_row("a.stale", "pass"), Verdict.STALE),
        (_row("a.bad", "fail", words), Verdict.UNEXPECTED),
    ]
    text = summary_md(rows)
    assert "### srv: 1 stale baseline entries (they pass now)\n\n- a.stale (pass): " in text
    [line] = [x for x in text.splitlines() if x.startswith("- a.bad")]
    assert "\\[x\\]\\(http://evil\\) \\@someone \\<b\\> \\| cell" in line
    assert "[400 characters" not in line and "characters, sha256" in line  # bounded
    assert text.index("a.bad") < text.index("a.stale")  # unexpected failures first
    assert md_text("a\r\nb") == "a b"


def test_markdown_counts_baselined_and_flaky_apart_from_gating_failures() -> None:
    rows = [
        (_row("a.pass", "pass"), Verdict.OK),
        (_row("a.flaky", "pass", "flaky: passed on attempt 2"), Verdict.FLAKY),
        (_row("a.bad", "fail"), Verdict.UNEXPECTED),
        (_row("a.known", "fail"), Verdict.EXPECTED),
        (_row("a.known-error", "error"), Verdict.EXPECTED),
        (_row("a.broken", "error"), Verdict.UNEXPECTED),
        (_row("a.skip", "skip"), Verdict.OK),
        (_row("a.should", "fail", level="should"), Verdict.OK),
    ]
    lines = summary_md(rows).splitlines()
    assert (
        "| target | version | must pass | must fail | must error | must skip | must baselined "
        "| must flaky |" in lines
    )
    assert "| srv | 1.0 | 1 | 1 | 1 | 1 | 2 | 1 |" in lines  # the should row counts nowhere
    assert "### srv: 1 flaky (not gating)" in lines


def test_progress_off_a_terminal_prints_a_line_every_n_cases_and_timed_steps() -> None:
    stream, now = io.StringIO(), [0.0]
    progress = Progress(5, stream, every_n=2, every_s=60, clock=lambda: now[0])
    for i in range(5):
        progress.step("srv", f"case{i}", failed=i == 1)
    with progress.timed("driver build client:x"):
        now[0] += 2.5
    progress.finish()
    assert stream.getvalue().splitlines() == [
        "progress: 2/5 cases: srv 2 (1 unexpected)",
        "progress: 4/5 cases: srv 4 (1 unexpected)",
        "driver build client:x: started",
        "driver build client:x: done in 2.5s",
        "progress: 5/5 cases: srv 5 (1 unexpected)",
    ]


def test_progress_off_a_terminal_prints_a_line_after_every_s_seconds() -> None:
    stream, now = io.StringIO(), [0.0]
    progress = Progress(1000, stream, every_n=100, every_s=5, clock=lambda: now[0])
    progress.step("srv", "a", failed=False)
    now[0] = 5.0
    progress.step("other", "b", failed=False)
    assert stream.getvalue() == "progress: 2/1000 cases: srv 1, other 1\n"


def test_sarif_locates_a_bundled_vector_by_its_own_base_wherever_the_package_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A virtualenv inside the checkout must not put site-packages paths into code scanning."""
    monkeypatch.chdir(BUNDLED_DIR.parent.parent)  # the package's files are under the directory
    mine = tmp_path / "mine.json"
    files = {"a.case": str(BUNDLED_DIR / "headers-parse.json"), "b.case": str(mine)}
    uris = vector_uris(files, [BUNDLED_DIR, tmp_path])
    assert uris == {"a.case": ("headers-parse.json", BUNDLED_BASE), "b.case": ("mine.json", None)}
    rows = [(_row("a.case@decode", "fail"), Verdict.UNEXPECTED),
            (_row("b.case", "fail"), Verdict.UNEXPECTED)]  # fmt: skip
    run = sarif(rows, uris, "1.0")["runs"][0]  # type: ignore[index]
    artifacts = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run["results"]]
    assert artifacts == [
        {"uri": "headers-parse.json", "uriBaseId": BUNDLED_BASE},
        {"uri": "mine.json"},
    ]
    assert BUNDLED_BASE in run["originalUriBaseIds"]
