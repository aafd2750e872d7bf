"""The CI outputs, from rows built here (no target)."""

from __future__ import annotations

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


def test_sarif_locates_a_bundled_vector_by_its_own_base_wherever_the_package_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A virtualenv inside the checkout must not put site-packages paths into code scanning."""
    # The package's files are under the working directory; pytest's temporary directory, which
    # may be anywhere (under the clone's parent, or inside the clone), is not under this one.
    monkeypatch.chdir(BUNDLED_DIR)
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
