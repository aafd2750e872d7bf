"""The compliance report as one self-contained HTML page.

Nothing is fetched when the page is viewed (a strict Content-Security-Policy says so), charts are
inline SVG and drill-downs are ``<details>`` elements, so the page works offline and without
JavaScript. Every string that came from a target or a results file passes through ``esc``;
``tag`` escapes attribute values itself, so element bodies are the only place HTML is assembled.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from ..conformance.verdicts import ROBUSTNESS, level_rank
from ..harness.results import LEVELS, OUTCOMES
from .model import (
    Counts,
    Flaky,
    FlakyChange,
    Report,
    TargetReport,
)
from .section import Index, Section
from .strips import version_order

CLIENT_KIND = "client"
# Styles from the report itself (its one stylesheet) and inline (a page's filter rules) only.
CSP = "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src data:"
STYLESHEET = "report.css"  # packaged beside this module, written once at the report's root
# Elements a line ends after (where a browser ignores the newline): a table row or a section a
# line, so that the diff of a regenerated report shows the rows that changed.
LINE_ENDS = frozenset({"tr", "section"})
# Score bands, best first: (class, lowest score in the band, legend text).
BANDS = (
    ("s-full", 1.0, "100%"),
    ("s-high", 0.9, "≥ 90%"),
    ("s-mid", 0.5, "≥ 50%"),
    ("s-low", 0.0, "< 50%"),
)
NO_SCORE = ("s-none", "nothing judged")
CHART_LABEL_CHARS = 38
OPEN_FIRST_FAILURES = 12  # an implementation's first-failure list starts open up to this length
SLUG_MAX = 100  # characters of a file name taken from a target or implementation (ASCII)
OBSERVED_SHOWN = 600  # characters of an observation a page shows (the JSON files have it whole)

LevelCounts = Mapping[str, Counts]
Links = Mapping[str, str]  # target -> the address of its place on its implementation's page
Filters = Mapping[str, Mapping[str, str]]  # filter -> value -> the option value rows carry


# --- building blocks -------------------------------------------------------------------------


def esc(value: object) -> str:
    """Text as HTML: the one escaping helper for everything from targets and results files."""
    return escape(str(value), quote=True)


def tag(name: str, body: str = "", **attrs: object) -> str:
    """An element whose ``body`` is HTML already; attribute values are escaped here.

    ``class_`` names the class attribute; other underscores become dashes (``aria_label``)."""
    rendered = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{esc(value)}"'
        for key, value in attrs.items()
        if value is not None
    )
    return f"<{name}{rendered}>{body}</{name}>" + ("\n" if name in LINE_ENDS else "")


def breakable(text: str) -> str:
    """Escaped text that may wrap after separators: dotted groups and long target specs."""
    escaped = esc(text)
    for sep in (".", ":", "/", "->", "=="):
        escaped = escaped.replace(esc(sep), esc(sep) + "<wbr>")
    return escaped


def target_id(target: str) -> str:
    """A safe, stable element id for a target's drill-down (target names are arbitrary text)."""
    return "t-" + hashlib.sha1(target.encode("utf-8")).hexdigest()[:12]


def _slug(name: str) -> str:
    """``name`` as a short file name: a long one keeps its start and a digest of the whole, as a
    file name holds 255 bytes and a target name can be longer."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.") or "target"
    if len(slug) <= SLUG_MAX:
        return slug
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return slug[:SLUG_MAX].rstrip("-.") + "-" + digest


def unique_slugs(names: Sequence[str]) -> dict[str, str]:
    """A file name (no extension) per name: readable, and unique even when two slug alike."""
    slugs = {n: _slug(n) for n in names}
    taken = defaultdict(list)
    for name, slug in slugs.items():
        taken[slug].append(name)
    return {
        name: slug + (f"-{sorted(taken[slug]).index(name) + 1}" if len(taken[slug]) > 1 else "")
        for name, slug in slugs.items()
    }


def by_version(target: TargetReport) -> tuple[tuple[int, ...], str]:
    """Targets in version order (2.9.10 < 2.10.25)."""
    return (version_order(target.run.version), target.run.version)


def percent(score: float | None) -> str:
    # Rounded down so 202/203 never reads as 100%.
    return "—" if score is None else f"{math.floor(score * 1000) / 10:.1f}%"


def fraction(counts: Counts) -> str:
    return f"{counts.passed}/{counts.judged}"


def score_class(score: float | None) -> str:
    if score is None:
        return NO_SCORE[0]
    return next(cls for cls, low, _ in BANDS if score >= low)


def outcome_class(outcome: str) -> str:
    # Outcomes come from results files: only known ones become class names.
    return f"o-{outcome}" if outcome in OUTCOMES else "o-other"


def level_class(level: str) -> str:
    return f"lv-{level}" if level in LEVELS else "lv-other"


def ordered_levels(levels: Iterable[str]) -> list[str]:
    """Known levels in severity order, then anything else alphabetically."""
    return sorted(set(levels), key=lambda lv: (level_rank(lv), lv))


def counts_title(counts: Counts) -> str:
    return (
        f"{counts.passed} pass, {counts.failed} fail, {counts.errored} error, {counts.skipped} skip"
    )


def counts_line(counts: Counts) -> str:
    """pass · fail · error · skip as small coloured numbers (the legend explains the order)."""
    values = (counts.passed, counts.failed, counts.errored, counts.skipped)
    spans = (
        tag("span", str(n), class_=f"{outcome_class(o)}{' zero' if n == 0 else ''}")
        for o, n in zip(OUTCOMES, values, strict=True)
    )
    return tag("span", "".join(spans), class_="cnt", title=counts_title(counts))


def observation(observed: str) -> str:
    """What an implementation did (canonical text from a target), cut to its start and escaped;
    an empty one says nothing was observed."""
    if not observed:
        return tag("span", "nothing observed", class_="muted")
    shown = observed if len(observed) <= OBSERVED_SHOWN else observed[:OBSERVED_SHOWN] + "…"
    return tag("code", esc(shown), class_="obs")


def badge(outcome: str) -> str:
    return tag("span", esc(outcome), class_=f"badge {outcome_class(outcome)}")


def bar(score: float | None, width: int = 80, height: int = 8) -> str:
    filled = 0 if score is None else round(score * width)
    return tag(
        "svg",
        tag("rect", "", class_="bar-bg", width=width, height=height, rx=2)
        + tag("rect", "", class_=f"bar-fg {score_class(score)}", width=filled, height=height, rx=2),
        class_="bar",
        width=width,
        height=height,
        viewBox=f"0 0 {width} {height}",
        role="img",
        aria_label=percent(score),
    )


def table(headers: Sequence[str], rows: Iterable[str], **attrs: object) -> str:
    """A table from plain-text headers and rendered ``<tr>`` rows."""
    head = tag("thead", tag("tr", "".join(tag("th", esc(h)) for h in headers)))
    return tag("table", head + tag("tbody", "".join(rows)), **attrs)


def row(*cells: str) -> str:
    """A ``<tr>`` of ``<td>``s from cell bodies that are HTML already."""
    return tag("tr", "".join(tag("td", c) for c in cells))


def section(title: str, body: str, **attrs: object) -> str:
    return tag("section", tag("h2", esc(title)) + body, **attrs)


def muted(text: str) -> str:
    return tag("p", esc(text), class_="muted")


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}{'es' if noun.endswith('x') else 's'}"


def shown_of(shown: int, total: int, noun: str) -> str:
    """'3 regressions' or, when the list was capped, 'showing 300 of 1234 regressions'."""
    counted = plural(total, noun)
    return counted if shown >= total else f"showing {shown} of {counted}"


# --- the matrix ------------------------------------------------------------------------------


def level_counts(report: Report) -> dict[tuple[str, str], dict[str, Counts]]:
    """(target, group) -> level -> counts of the target's latest run."""
    found: dict[tuple[str, str], dict[str, Counts]] = defaultdict(dict)
    for cell in report.cells:
        levels = found[(cell.target, cell.group)]
        levels[cell.level] = levels.get(cell.level, Counts()) + cell.counts
    return found


def matrix_groups(report: Report, targets: Sequence[TargetReport]) -> list[str]:
    """The groups the matrix rows ran (interop-only groups excluded). A family of groups
    (``protocol.*``) is placed by the first row that ran it, so servers' columns come first."""
    row_of = {t.run.target: i for i, t in enumerate(targets)}
    first_row: dict[str, int] = {}
    for cell in report.cells:
        if cell.target in row_of:
            family = group_family(cell.group)[0]
            first_row[family] = min(first_row.get(family, len(row_of)), row_of[cell.target])
    present = {c.group for c in report.cells if c.target in row_of}
    return sorted(present, key=lambda g: (first_row[group_family(g)[0]], g))


def group_family(group: str) -> tuple[str, str]:
    """'protocol.pub' -> ('protocol', 'pub'): the matrix header has a row per part."""
    family, _, rest = group.partition(".")
    return family, rest or family


def matrix_head(groups: Sequence[str]) -> str:
    families: list[tuple[str, int]] = []
    for group in groups:
        family = group_family(group)[0]
        if families and families[-1][0] == family:
            families[-1] = (family, families[-1][1] + 1)
        else:
            families.append((family, 1))
    top = tag("th", "Target", rowspan=2, class_="tname") + tag("th", "Must", rowspan=2)
    top += tag("th", "Robustness", rowspan=2, title="failures: a crash or a hang")
    top += "".join(tag("th", esc(f), colspan=n, class_="family") for f, n in families)
    sub = "".join(tag("th", breakable(group_family(g)[1]), title=g, scope="col") for g in groups)
    return tag("thead", tag("tr", top) + tag("tr", sub))


def matrix_cell(group: str, levels: LevelCounts) -> str:
    if not levels:
        return tag("td", "·", class_="na", title=f"{group}: not run")
    total = sum(levels.values(), Counts())
    must = levels.get("must", Counts())
    # Coloured by the must score; a group without judged must cases by its overall score.
    shown = must if must.judged else total
    title = "\n".join(
        [f"{group} — must {fraction(must)}"]
        + [f"{lv}: {counts_title(levels[lv])}" for lv in ordered_levels(levels)]
    )
    headline = fraction(must) if must.judged else "—"
    body = tag("span", esc(headline), class_="frac") + counts_line(total)
    return tag("td", body, class_=f"cell {score_class(shown.score)}", title=title)


def robustness_cell(failures: int) -> str:
    """A target's robustness failures (crashes, hangs): red when there is one."""
    return tag(
        "td",
        str(failures),
        class_=f"cell robust {'s-low' if failures else 's-full'}",
        title=f"{plural(failures, 'robustness failure')} (not in the scores)",
    )


def target_label(target: TargetReport, links: Links) -> str:
    link = tag("a", breakable(target.run.target), href=links[target.run.target])
    return link + tag("span", esc(f"{target.run.version} · {target.run.kind}"), class_="sub")


def headline(counts: Counts) -> str:
    body = (
        tag("span", esc(fraction(counts)), class_="frac")
        + bar(counts.score)
        + tag("span", percent(counts.score), class_="pct")
    )
    return tag("td", body, class_=f"headline {score_class(counts.score)}")


def matrix_bands(targets: Sequence[TargetReport]) -> list[tuple[str, list[TargetReport]]]:
    """Servers and clients, read separately: their groups barely overlap."""
    bands = (
        ("Servers", [t for t in targets if t.run.kind != CLIENT_KIND]),
        ("Clients", [t for t in targets if t.run.kind == CLIENT_KIND]),
    )
    return [(title, members) for title, members in bands if members]


def matrix(
    report: Report,
    bands: Sequence[tuple[str, list[TargetReport]]],
    links: Links,
    filters: Filters,
) -> str:
    targets = [t for _, members in bands for t in members]
    groups = matrix_groups(report, targets)
    cells = level_counts(report)
    width = len(groups) + 3
    bodies = []
    for title, members in bands:
        rows = [tag("tr", tag("th", esc(title), colspan=width, class_="band"))]
        for t in members:
            row_cells = "".join(matrix_cell(g, cells.get((t.run.target, g), {})) for g in groups)
            rows.append(
                tag(
                    "tr",
                    tag("th", target_label(t, links), scope="row")
                    + headline(t.must)
                    + robustness_cell(t.robustness)
                    + row_cells,
                    data_i=filters["impl"][t.implementation],
                )
            )
        bodies.append(tag("tbody", "".join(rows)))
    if not bodies:
        bodies.append(tag("tbody", tag("tr", tag("td", "No targets in this report.", colspan=2))))
    return tag(
        "div", tag("table", matrix_head(groups) + "".join(bodies), id="matrix"), class_="scroll"
    )


def pair_of(target: str) -> tuple[str, str]:
    """'client:a->client:b' -> (sender, receiver)."""
    sender, _, receiver = target.partition("->")
    return sender, receiver


def must_class(failing: int, passed: int) -> str:
    """Failing a must case is red whatever the score; passing every judged must case is green;
    nothing judged is grey."""
    if failing:
        return "s-low"
    return "s-full" if passed else NO_SCORE[0]


def interop_grid(targets: Sequence[TargetReport], links: Links) -> str:
    """Senders down, receivers across; a cell is the pair's must cases passed of judged,
    coloured by must failures."""
    pairs = {pair_of(t.run.target): t for t in targets}
    senders = sorted({s for s, _ in pairs})
    receivers = sorted({r for _, r in pairs})
    head = tag("th", "sender ↓ / receiver →", class_="tname") + "".join(
        tag("th", breakable(r), scope="col") for r in receivers
    )
    rows = []
    for sender in senders:
        cells = []
        for receiver in receivers:
            pair = pairs.get((sender, receiver))
            if pair is None:
                cells.append(tag("td", "·", class_="na", title="not run"))
                continue
            must = pair.must
            text = fraction(must) if must.judged else "—"
            link = tag("a", esc(text), href=links[pair.run.target])
            title = (
                f"{pair.run.target} ({pair.run.version})\nmust: {counts_title(must)}\n"
                f"all levels: {counts_title(pair.totals)}"
            )
            cls = must_class(must.failed + must.errored, must.passed)
            cells.append(tag("td", link, class_=f"cell {cls}", title=title))
        rows.append(tag("tr", tag("th", breakable(sender), scope="row") + "".join(cells)))
    return tag(
        "div",
        tag("table", tag("thead", tag("tr", head)) + tag("tbody", "".join(rows)), id="interop"),
        class_="scroll",
    )


def shorten(text: str, limit: int = CHART_LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def must_chart(targets: Sequence[TargetReport]) -> str:
    """One horizontal bar per target: its must score."""
    row_h, label_w, bar_w, value_w = 20, 280, 320, 130
    parts = []
    for i, t in enumerate(targets):
        y = i * row_h
        score = t.must.score
        label = tag("title", esc(t.run.target)) + esc(shorten(t.run.target))
        parts.append(
            tag("text", label, x=label_w - 8, y=y + 14, class_="label")
            + tag("rect", "", x=label_w, y=y + 5, width=bar_w, height=10, class_="bar-bg")
            + tag(
                "rect",
                "",
                x=label_w,
                y=y + 5,
                width=0 if score is None else round(score * bar_w),
                height=10,
                class_=f"bar-fg {score_class(score)}",
            )
            + tag(
                "text",
                esc(f"{fraction(t.must)}  {percent(score)}"),
                x=label_w + bar_w + 8,
                y=y + 14,
                class_="value",
            )
        )
    width, height = label_w + bar_w + value_w, max(len(targets), 1) * row_h
    return tag(
        "svg",
        "".join(parts),
        class_="chart",
        width=width,
        height=height,
        viewBox=f"0 0 {width} {height}",
        role="img",
        aria_label="Must score per target",
    )


# --- evidence ------------------------------------------------------------------------------------


def requirement(req: object) -> str:
    if not isinstance(req, Mapping) or not req:
        return muted("No requirement recorded for this case.")
    source = " § ".join(esc(req[k]) for k in ("document", "section") if req.get(k))
    parts = [tag("p", source, class_="src") if source else ""]
    if req.get("quote"):
        parts.append(tag("blockquote", esc(req["quote"])))
    if req.get("description"):
        parts.append(tag("p", esc(req["description"]), class_="desc"))
    return tag("div", "".join(parts), class_="req")


# --- cross-target sections -------------------------------------------------------------------


def flaky_cases(items: Sequence[Flaky], total: int, changes: Sequence[FlakyChange]) -> str:
    """The cases whose runs of one target at one version disagree, then the differences between
    versions that such a case makes unconfirmed (not version changes)."""
    if not total:
        return muted(
            "No case changed its outcome or observation between runs of one target at one version."
        )
    rows = (
        row(
            esc(f.target),
            esc(f.version),
            tag("code", esc(f.case_id)),
            esc(f.level),
            " ".join(badge(o) for o in f.outcomes),
            esc(" and ".join(f.varied)),
            str(f.runs),
        )
        for f in items
    )
    note = tag("p", esc(shown_of(len(items), total, "flaky case") + "."))
    body = note + table(
        ("target", "version", "case", "level", "outcomes", "varied", "runs"), rows, class_="small"
    )
    if changes:
        body += tag(
            "p",
            esc(
                f"{plural(len(changes), 'difference')} between versions not confirmed: at the "
                "version(s) named, the runs disagree on the case, so it is not a version change."
            ),
        ) + table(
            ("implementation", "case", "level", "before", "after", "runs disagree"),
            (
                row(
                    esc(f.change.implementation),
                    tag("code", esc(f.change.case_id)),
                    esc(f.change.level),
                    *(
                        tag("strong", esc(version)) + " " + badge(outcome)
                        for version, outcome in (
                            (f.change.before_version, f.change.before_outcome),
                            (f.change.after_version, f.change.after_outcome),
                        )
                    ),
                    esc("; ".join(f"at {u.version}: {' and '.join(u.varied)}" for u in f.unstable)),
                )
                for f in changes
            ),
            class_="small",
        )
    return body


def header(report: Report, sections: Sequence[Section[Any]]) -> str:
    stats = (
        ("targets", len(report.targets)),
        ("runs", report.runs_total),
        ("rows", report.rows_total),
        ("rows added", report.rows_added),
    )
    cards = "".join(
        tag("div", tag("b", esc(f"{value:,}")) + tag("span", esc(name)), class_="stat")
        for name, value in stats
    )
    links = [link for s in sections if (link := s.nav(report))]
    nav = " · ".join(
        tag("a", esc(text), href=address)
        for address, text in [
            *links,
            ("#matrix", "Matrix"),
            ("#interop-section", "Interop"),
            ("#flaky", "Flaky cases"),
        ]
    )
    nav += " · " + tag("a", "Behaviour where the documents are silent", href="behaviour.html")
    if report.coverage:
        nav += " · " + tag("a", "Requirement coverage", href="coverage.html")
    return tag(
        "header",
        tag("h1", "NATS conformance report")
        + tag("p", "Generated " + tag("time", esc(report.generated)), class_="muted")
        + tag("div", cards, class_="stats")
        + tag("nav", nav),
    )


def legend() -> str:
    bands = [*((cls, text) for cls, _, text in BANDS), NO_SCORE]
    swatches = "".join(tag("span", esc(text), class_=f"chip {cls}") for cls, text in bands)
    outcomes = "".join(
        tag("span", tag("span", "", class_=f"sq {outcome_class(o)}") + esc(o), class_="key")
        for o in OUTCOMES
    )
    counts = tag(
        "span", "".join(tag("span", o, class_=outcome_class(o)) for o in OUTCOMES), class_="cnt"
    )
    return tag(
        "div",
        tag("span", "Score:", class_="lt")
        + swatches
        + tag("span", "Outcomes:", class_="lt")
        + outcomes
        + tag("span", "Cell counts:", class_="lt")
        + counts,
        class_="legend",
    )


def since_text(since: Mapping[str, Any] | None) -> str:
    """Since when a case fails: a version of the series, or a run of the target."""
    if not since:
        return "unknown (no history of this case)"
    before = since["passed_before"]
    if since["kind"] == "version":
        return f"version {since['value']}" + (
            f" (passed at {before})" if before else " (failed at every earlier version)"
        )
    return f"run {since['value']}" + (
        f" (passed in run {before})" if before else " (the oldest run shown)"
    )


def upstream_link(url: str) -> str:
    return tag("a", "upstream bug", href=url, class_="upstream", rel="noreferrer")


def filter_values(rows: Sequence[Mapping[str, Any]], report: Report) -> dict[str, dict[str, str]]:
    """The filter's option values: rows carry these short ids, never the names themselves, so
    no text from a results file reaches the filter's CSS."""
    impls = sorted({t.implementation for t in report.targets})
    groups = sorted({r["failure"]["group"] for r in rows})
    return {
        "impl": {name: f"i{n}" for n, name in enumerate(impls)},
        "group": {name: f"g{n}" for n, name in enumerate(groups)},
        "level": {level: level for level in INDEX_LEVELS},
    }


INDEX_LEVELS = ("must", "should")  # failing levels index.html lists (pages have every level)


def index_failing(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The failing rows index.html lists and filters: conformance failures at INDEX_LEVELS (a
    robustness failure has a section of its own)."""
    return [
        r
        for r in rows
        if r["failure"]["level"] in INDEX_LEVELS and r["failure"]["category"] != ROBUSTNESS
    ]


def filter_style(filters: Filters) -> str:
    """One rule per option: while it is chosen, rows that carry another value are hidden."""
    short = {"impl": "i", "group": "g", "level": "l"}
    return "".join(
        f'body:has(#f-{name} option[value="{value}"]:checked) .flt tr[data-{short[name]}]'
        f':not([data-{short[name]}="{value}"]){{display:none}}'
        for name, values in filters.items()
        for value in values.values()
    )


def newest_versions(targets: Sequence[TargetReport]) -> list[TargetReport]:
    """Each implementation's target at its newest version (its page has the others)."""
    newest: dict[str, TargetReport] = {}
    for target in sorted(targets, key=by_version):
        newest[target.implementation] = target
    return sorted(newest.values(), key=lambda t: t.run.target)


def render(
    report: Report,
    links: Links,
    failing: Sequence[Mapping[str, Any]],
    sections: Sequence[Section[Any]],
) -> str:
    """index.html: the ``sections`` in order (reports.sections): what fails (must first, filtered
    by level, group and implementation), the matrix and the interop grid; each implementation
    has a page of its own (reports.pages)."""
    bands = matrix_bands(newest_versions([t for t in report.targets if not t.interop]))
    interop_targets = [t for t in report.targets if t.interop]
    filters = filter_values(index_failing(failing), report)
    page = Index(report, links, failing, filters)
    main = (
        "".join(s.index(page) for s in sections)
        + section(
            "Compliance matrix",
            muted(
                "Each implementation at its newest version (its page has every version and the "
                "version strip). A cell shows the must cases passed of judged (— when none was "
                "judged) and the counts across all levels; hover for the breakdown. Scores count "
                "conformance rows only; robustness failures have their own column."
            )
            + legend()
            + tag("div", matrix(report, bands, links, filters), class_="flt")
            + tag("h3", "Must score per target")
            + must_chart([t for _, members in bands for t in members]),
        )
        + section(
            "Interoperability",
            muted("Each cell: the pair's must cases passed of judged; red when a must case fails.")
            + interop_grid(interop_targets, links)
            if interop_targets
            else muted("No interop pairs in this report."),
            id="interop-section",
        )
        + section(
            "Flaky cases",
            flaky_cases(report.flaky, report.flaky_total, report.flaky_changes),
            id="flaky",
        )
    )
    return document(
        "NATS conformance report",
        header(report, sections) + tag("main", main),
        filter_style(filters),
    )


def stylesheet() -> str:
    """The report's stylesheet (``reports/report.css``), written once per report."""
    return (Path(__file__).resolve().parent / STYLESHEET).read_text(encoding="utf-8")


def document(title: str, body: str, style: str = "", root: str = "") -> str:
    """An HTML5 page: nothing is fetched when it is viewed but the report's own stylesheet, at
    ``root`` (the way from the page to the report's root) (the CSP says so)."""
    return (
        "<!DOCTYPE html>\n"
        + tag(
            "html",
            tag(
                "head",
                '<meta charset="utf-8">'
                + f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
                + '<meta name="viewport" content="width=device-width, initial-scale=1">'
                + tag("title", esc(title))
                + f'<link rel="stylesheet" href="{esc(root + STYLESHEET)}">'
                + (tag("style", style) if style else ""),
            )
            + tag("body", body),
            lang="en",
        )
        + "\n"
    )


# --- requirement coverage ------------------------------------------------------------------------

COVERAGE_WORDS = 240  # characters of a statement's words shown (the index has them all)


def render_coverage(report: Report) -> str:
    """coverage.html: per document, the statements no case exercises first, then each statement
    with its cases and their rows' outcomes summed over the targets (coverage.json: per target)."""
    documents = report.coverage.get("documents", {})
    assert isinstance(documents, dict)
    body = tag("h1", "Requirement coverage") + muted(
        f"Generated {report.generated}. A statement of the specification documents is exercised "
        "when a vector cites it; its outcomes are the rows of those vectors in each target's "
        "latest run. coverage.json has the counts per target."
    )
    body += tag("p", tag("a", "Back to the compliance report", href="index.html"))
    for name, doc in sorted(documents.items()):
        rows = (
            row(
                tag("code", esc(r["id"])),
                esc(r["kind"]),
                esc(_cut(r["words"], COVERAGE_WORDS)),
                str(len(r["cases"])) if r["cases"] else tag("strong", "none"),
                _outcome_totals(r["outcomes"]),
            )
            for r in doc["rows"]
        )
        summary = f"{doc['exercised']} of {plural(doc['statements'], 'statement')} exercised"
        body += section(
            name,
            muted(summary)
            + table(("statement", "kind", "words", "cases", "rows"), rows, class_="small"),
            id=f"doc-{name}",
        )
    return document("NATS conformance: requirement coverage", tag("main", body))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _outcome_totals(per_target: dict[str, dict[str, int]]) -> str:
    totals: dict[str, int] = defaultdict(int)
    for counts in per_target.values():
        for outcome, n in counts.items():
            totals[outcome] += n
    if not totals:
        return tag("span", "no rows", class_="muted")
    return " ".join(f"{badge(o)} {n}" for o, n in sorted(totals.items()))
