"""The HTML report in a real browser: headless Chromium loads it without console errors (a CSP
violation or a failed load would be one) and the matrix is visible; a screenshot is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_samples import browser_check, browser_tools, sample_report

from nats_conformance.reports.html import CSP, render

pytestmark = pytest.mark.skipif(
    browser_tools() is None,
    reason="chromium and chromedriver are not installed (CI installs them)",
)

REPO = Path(__file__).resolve().parents[1]
SCREENSHOT = REPO / "out" / "artifacts" / "report-screenshot.png"
PNG = b"\x89PNG\r\n\x1a\n"
MATRIX = '<table id="matrix"><tr><td>matrix</td></tr></table>'


def page(tmp_path: Path, html: str) -> Path:
    path = tmp_path / "page.html"
    path.write_text(html, encoding="utf-8")
    return path


def test_report_loads_cleanly_and_shows_the_matrix(tmp_path: Path) -> None:
    problems = browser_check(page(tmp_path, render(sample_report())), SCREENSHOT)
    assert problems == []
    assert SCREENSHOT.read_bytes().startswith(PNG)


def test_the_published_report_loads_cleanly() -> None:
    """The committed report, made by the pipeline from real runs, passes the same check."""
    published = REPO / "published" / "report" / "index.html"
    shot = REPO / "out" / "artifacts" / "published-report-screenshot.png"
    assert browser_check(published, shot) == []
    assert shot.read_bytes().startswith(PNG)


# The check must be able to fail: each page below has exactly one thing wrong with it.


def test_check_reports_console_errors(tmp_path: Path) -> None:
    html = f'<!DOCTYPE html>{MATRIX}<script>console.error("boom")</script>'
    problems = browser_check(page(tmp_path, html), tmp_path / "shot.png")
    assert len(problems) == 1 and "boom" in problems[0], problems


def test_check_reports_csp_violations(tmp_path: Path) -> None:
    html = (
        f'<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"{MATRIX}<script>document.title = 'ran'</script>"
    )
    problems = browser_check(page(tmp_path, html), tmp_path / "shot.png")
    assert problems and all("Content Security Policy" in p for p in problems), problems


def test_check_reports_a_hidden_matrix(tmp_path: Path) -> None:
    html = f"<!DOCTYPE html><div hidden>{MATRIX}</div>"
    problems = browser_check(page(tmp_path, html), tmp_path / "shot.png")
    assert "#matrix: not displayed" in problems, problems
    assert not [p for p in problems if p.startswith("console")], problems


def test_check_reports_a_missing_matrix(tmp_path: Path) -> None:
    problems = browser_check(page(tmp_path, "<!DOCTYPE html><p>no matrix</p>"), tmp_path / "s.png")
    assert problems == ["#matrix: no such element"], problems
