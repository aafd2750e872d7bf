"""The HTML report in a real browser: headless Chromium loads each kind of page (the index, an
implementation's page, an interop pair's page, the coverage page, the behaviour page) without
console errors (a CSP violation or a failed load would be one) and shows its key element, and the
index's filter (CSS only, no script) hides the rows its choice excludes; a screenshot of each is
kept in out/artifacts/ for a person to look at."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_samples import (
    WebDriver,
    browser_check,
    browser_page,
    browser_tools,
    sample_report,
    save_screenshot,
)

from nats_conformance.reports import outputs
from nats_conformance.reports.coverage import bundled_coverage
from nats_conformance.reports.html import CSP
from nats_conformance.reports.sections import requirement_coverage

pytestmark = pytest.mark.skipif(
    browser_tools() is None,
    reason="chromium and chromedriver are not installed (CI installs them)",
)

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "out" / "artifacts"
PNG = b"\x89PNG\r\n\x1a\n"
MATRIX = '<table id="matrix"><tr><td>matrix</td></tr></table>'


def page(tmp_path: Path, html: str) -> Path:
    path = tmp_path / "page.html"
    path.write_text(html, encoding="utf-8")
    return path


# page kind -> (file in the report, the element that must be visible)
PAGES = {
    "index": ("index.html", "#failing-table"),
    "implementation": ("impl/nats-server.html", "#strip"),
    "interop-pair": ("impl/client-nats-py--client-nats.go.html", "#failing"),
    "coverage": ("coverage.html", "main h2"),
    "behaviour": ("behaviour.html", "#diverging"),
}


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    report = sample_report()
    report.parts[requirement_coverage.SECTION.name] = bundled_coverage(
        [(t.run.target, f.case_id, f.outcome) for t in report.targets for f in t.failures]
    )
    outputs.write_all(report, out)
    return out


@pytest.mark.parametrize("kind", PAGES)
def test_each_page_kind_loads_cleanly_and_shows_its_key_element(
    sample_dir: Path, kind: str
) -> None:
    name, visible = PAGES[kind]
    shot = ARTIFACTS / f"report-{kind}.png"
    assert browser_check(sample_dir / name, shot, visible) == []
    assert shot.read_bytes().startswith(PNG)


def test_the_published_report_loads_cleanly() -> None:
    """The committed report, made by the pipeline from real runs, passes the same check, and
    so does its first implementation page when it has pages."""
    published = REPO / "published" / "report"
    shot = ARTIFACTS / "published-report-screenshot.png"
    assert browser_check(published / "index.html", shot) == []
    assert shot.read_bytes().startswith(PNG)
    for page_file in sorted(published.glob("impl/nats-server.html")):
        shot = ARTIFACTS / "published-implementation-screenshot.png"
        assert browser_check(page_file, shot, "#strip") == []


FILTERED = ("data-i", "data-g", "data-l")  # what a row of the index's filter may carry
Rows = dict[str, dict[str, str | None]]  # element id -> its FILTERED attributes


def filter_rows(driver: WebDriver, selector: str) -> Rows:
    return {
        element: {name: driver.attribute(element, name) for name in FILTERED}
        for element in driver.elements(selector)
    }


def choose(driver: WebDriver, select: str, label: str) -> str | None:
    """Click the option of ``select`` that reads ``label``, as a reader would; its value."""
    (option,) = driver.elements(f'//select[@id="{select}"]/option[.="{label}"]', "xpath")
    driver.click(option)
    assert driver.command("GET", f"/element/{option}/selected"), f"{select}: {label} not chosen"
    return driver.attribute(option, "value")


def assert_shown(driver: WebDriver, rows: Rows, name: str, value: str | None) -> None:
    """Exactly the rows whose ``name`` attribute is ``value`` are displayed, and there are
    others to hide (so a page without the filter's rules, showing every row, fails)."""
    expected = {e for e, attrs in rows.items() if attrs[name] == value}
    assert 0 < len(expected) < len(rows), (name, value, rows)
    shown = {e for e in rows if driver.displayed(e)}
    assert shown == expected, (name, value, [rows[e] for e in shown])


def test_index_filter_hides_the_rows_the_choice_excludes(sample_dir: Path) -> None:
    """Choosing an option of the filter shows exactly the rows that carry its value, in What
    fails and (for an implementation) in the matrix; the page opens at level must."""
    with browser_page(sample_dir / "index.html") as driver:
        failing = filter_rows(driver, "#failing-table tr[data-l]")
        matrix = filter_rows(driver, "#matrix tr[data-i]")
        assert_shown(driver, failing, "data-l", "must")

        assert choose(driver, "f-level", "should") == "should"
        assert_shown(driver, failing, "data-l", "should")

        choose(driver, "f-level", "all")
        impl = choose(driver, "f-impl", "nats-server")
        assert_shown(driver, failing, "data-i", impl)
        assert_shown(driver, matrix, "data-i", impl)
        save_screenshot(driver, ARTIFACTS / "report-index-filtered.png")

        choose(driver, "f-impl", "all")
        group = choose(driver, "f-group", "client.connect")
        assert_shown(driver, failing, "data-g", group)
        assert all(driver.displayed(e) for e in matrix)  # its rows carry no group


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
