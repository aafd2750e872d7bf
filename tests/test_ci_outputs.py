"""The CI outputs, from rows built here (no target)."""

from __future__ import annotations

import json
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance.vectors import BUNDLED_DIR
from nats_conformance.harness.ci_outputs import (
    BUNDLED_BASE,
    junit_xml,
    local_paths,
    md_text,
    sarif,
    sarif_json,
    summary_md,
    vector_uris,
)
from nats_conformance.harness.gate import Baseline, Verdict
from nats_conformance.harness.results import ResultRow


def _row(
    case_id: str,
    outcome: str,
    message: str = "",
    level: str = "must",
    category: str = "conformance",
) -> ResultRow:
    return ResultRow("r", "t", "0", "v", "srv", "kind", "1.0", case_id, "g.x", level, outcome,
                     1.0, message, category)  # fmt: skip


# A green gate: every failure is baselined (two classes), one case passed when run again, one
# should case failed (never gating), the rest passed or skipped.
BASELINE = Baseline(
    {
        "srv": {
            "1.0": {
                "a.known": {"class": "deviation", "reason": "fail", "statement": "cp.pub.1"},
                "a.known-error": {
                    "class": "upstream-bug",
                    "reason": "error",
                    "upstream": "https://example.org/issues/7",
                },
            }
        }
    }
)
GREEN = [
    (_row("a.pass", "pass"), Verdict.OK),
    (_row("a.known", "fail", "got -ERR"), Verdict.EXPECTED),
    (_row("a.known-error", "error", "hung"), Verdict.EXPECTED),
    (_row("a.flaky", "pass", "flaky: passed on attempt 2 after attempt 1: fail: x"), Verdict.FLAKY),
    (_row("a.should", "fail", "no -ERR", level="should"), Verdict.OK),
    (_row("a.skip", "skip", "unsupported"), Verdict.OK),
]


def test_a_green_gate_has_no_junit_failure_baselined_ones_skip_with_their_class() -> None:
    [suite] = ET.fromstring(junit_xml(GREEN, BASELINE)).findall("testsuite")
    counts = [suite.get(k) for k in ("tests", "failures", "errors", "skipped")]
    assert counts == ["6", "0", "0", "4"]
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert not suite.findall("testcase/failure") and not suite.findall("testcase/error")
    known = cases["a.known"].find("skipped")
    assert known is not None
    assert known.get("message") == "[must, baselined: deviation (fail, cp.pub.1)] got -ERR"
    error = cases["a.known-error"].find("skipped")
    assert error is not None and error.get("message", "").startswith(
        "[must, baselined: upstream-bug (error, https://example.org/issues/7)] "
    )
    props = {p.get("name"): p.get("value") for p in cases["a.known"].iter("property")}
    assert props == {"outcome": "fail", "gate": "must, baselined: deviation (fail, cp.pub.1)"}
    flaky = cases["a.flaky"]
    assert flaky.find("skipped") is None and flaky.find("failure") is None  # a pass
    props = {p.get("name"): p.get("value") for p in flaky.iter("property")}
    assert props["flaky"] == "flaky: passed on attempt 2 after attempt 1: fail: x"
    should = cases["a.should"].find("skipped")
    assert should is not None and should.get("message") == "[should, not gating] no -ERR"
    assert cases["a.pass"].find("properties") is None  # a plain pass carries nothing more
    listed = Baseline({"srv": {"1.0": {"a.sometimes": {"class": "flaky", "reason": "fail"}}}})
    xml = junit_xml([(_row("a.sometimes", "pass"), Verdict.FLAKY)], listed)
    [case] = ET.fromstring(xml).iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["flaky"] == "must, flaky: not gating; baselined: flaky (fail)"
    assert case.find("skipped") is None


def test_junit_failures_and_errors_are_exactly_what_fails_the_gate() -> None:
    rows = [
        *GREEN,
        (_row("b.bad", "fail"), Verdict.UNEXPECTED),
        (_row("b.broken", "error"), Verdict.UNEXPECTED),
        (_row("b.hang", "error", level="info", category="robustness"), Verdict.UNEXPECTED),
        (_row("b.stale", "pass"), Verdict.STALE),
    ]
    [suite] = ET.fromstring(junit_xml(rows, BASELINE)).findall("testsuite")
    assert (suite.get("failures"), suite.get("errors")) == ("2", "2")
    failed = {c.get("name") for c in suite.findall("testcase") if c.find("failure") is not None}
    errored = {c.get("name") for c in suite.findall("testcase") if c.find("error") is not None}
    assert (failed, errored) == ({"b.bad", "b.stale"}, {"b.broken", "b.hang"})


def test_sarif_shows_a_baselined_failure_as_a_suppressed_note_and_gating_ones_as_errors() -> None:
    rows = [*GREEN, (_row("b.hang", "error", level="info", category="robustness"),
                     Verdict.UNEXPECTED)]  # fmt: skip
    results = sarif(rows, {}, "1.0", BASELINE)["runs"][0]["results"]  # type: ignore[index]
    by_id = {r["ruleId"]: r for r in results}
    assert set(by_id) == {"a.known", "a.known-error", "a.should", "b.hang"}
    assert by_id["a.known"]["level"] == "note"
    assert by_id["a.known"]["suppressions"] == [
        {"kind": "external", "justification": "baselined: deviation (fail, cp.pub.1)"}
    ]
    assert by_id["a.should"]["level"] == "warning" and "suppressions" not in by_id["a.should"]
    assert by_id["b.hang"]["level"] == "error"  # a hang gates at any level
    green = sarif(GREEN, {}, "1.0", BASELINE)["runs"][0]["results"]  # type: ignore[index]
    assert not [r for r in green if r["level"] == "error"]


def test_markdown_lists_baselined_failures_with_their_class_and_ends_with_the_exit_code() -> None:
    text = summary_md(GREEN, BASELINE)
    assert "### srv: 2 baselined (not gating)" in text
    assert "- a.known (fail): deviation (fail, cp.pub.1): got -ERR" in text
    assert text.rstrip().endswith(
        "The gate passes (exit 0): 0 unexpected failures, 0 stale baseline entries, "
        "2 baselined failures (not gating), 1 flaky (not gating)."
    )
    red = summary_md([*GREEN, (_row("b.bad", "fail"), Verdict.UNEXPECTED)], BASELINE)
    assert red.rstrip().splitlines()[-1].startswith("The gate fails (exit 1): 1 unexpected")


def test_no_output_holds_a_path_of_the_machine_that_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Vectors under the temporary directory, messages naming them, the home directory and the
    working directory: every output writes them relative (or as ~ and $TMPDIR)."""
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    mine = vectors / "mine.json"
    work = tmp_path / "repo"
    work.mkdir()
    monkeypatch.chdir(work)
    home = Path.home().resolve()
    target = f"launch:{work / 'launch.toml'}"
    rows = [
        (
            _row("m.case", "fail", f"{mine}: refused; driver {home}/.cache/d/run"),
            Verdict.UNEXPECTED,
        ),
        (_row("m.known", "fail", f"see {work}"), Verdict.EXPECTED),
        (_row("m.exec", "fail", "exec:/usr/sbin/nats-server said no"), Verdict.UNEXPECTED),
    ]
    rows = [(replace(r, target=target), v) for r, v in rows]
    scrub = local_paths([vectors])
    uris = vector_uris({"m.case": str(mine)}, [vectors])
    outputs = [
        junit_xml(rows, BASELINE, scrub),
        sarif_json(rows, uris, "1.0", BASELINE, scrub),
        summary_md(rows, BASELINE, scrub),
    ]
    for text in outputs:
        for local in (str(tmp_path), str(home), str(Path(tempfile.gettempdir()).resolve())):
            assert local not in text.replace("\\", "")
        assert "/usr/sbin/nats-server" in text  # the same path on every machine stays
    assert "mine.json: refused; driver ~/.cache/d/run" in outputs[0]
    assert "launch:launch.toml" in outputs[0]
    [result, *_] = json.loads(outputs[1])["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "mine.json"}


@given(st.lists(st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,7}", fullmatch=True), max_size=4))
def test_a_path_under_the_temporary_or_home_directory_never_survives(parts: list[str]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir("/")  # the filesystem's root is never a base: only tmp and home act here
        scrub = local_paths()
    for root, shown in ((Path(tempfile.gettempdir()).resolve(), "$TMPDIR"),
                        (Path.home().resolve(), "~")):  # fmt: skip
        if root == Path("/"):
            continue
        under = "/".join(parts)
        text = scrub(f"at {root}{'/' if parts else ''}{under}: x")
        assert text == f"at {shown}{'/' if parts else ''}{under}: x"
        assert scrub(f"at {root}x/y") == f"at {root}x/y"  # a sibling with a longer name


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
