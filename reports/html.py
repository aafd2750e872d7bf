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
    TCP,
    Counts,
    Report,
    TargetReport,
    transport_order,
)
from .section import Index, Section
from .strips import version_order

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
SLUG_MAX = 100  # characters of a file name taken from a target or implementation (ASCII)
OBSERVED_SHOWN = 600  # characters of an observation a page shows (the JSON files have it whole)

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


def badge_names(targets: list[str]) -> dict[str, str]:
    """A badge's file name per target: readable, and unique even when two targets slug alike."""
    return {target: slug + ".json" for target, slug in unique_slugs(targets).items()}


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


def must_class(failing: int, passed: int) -> str:
    """Failing a must case is red whatever the score; passing every judged must case is green;
    nothing judged is grey."""
    if failing:
        return "s-low"
    return "s-full" if passed else NO_SCORE[0]


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
    nav = " · ".join(tag("a", esc(text), href=address) for address, text in links)
    return tag(
        "header",
        tag("h1", "NATS conformance report")
        + tag("p", "Generated " + tag("time", esc(report.generated)), class_="muted")
        + tag("div", cards, class_="stats")
        + tag("nav", nav),
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


def over(transports: Iterable[str]) -> str:
    """' over tcp, ws' (tcp first, then by name), or nothing when tcp alone carried the rows."""
    shown = sorted(set(transports), key=transport_order)
    return "" if shown == [TCP] else " over " + ", ".join(shown)


def failing_at(at: Sequence[Mapping[str, Any]]) -> str:
    """Where a case fails: its versions, newest first, each with the transports that carried a
    failing row when another than tcp did; versions failing over the same ones share them
    ('2.15.1 over tcp, tls-first, ws; 2.9.10 over tcp, ws')."""
    carried: dict[str, set[str]] = {}
    for a in at:
        carried.setdefault(a["version"], set()).add(a.get("transport", TCP))
    shared: dict[str, list[str]] = {}
    for version, transports in carried.items():
        shared.setdefault(over(transports), []).append(version)
    return "; ".join(", ".join(versions) + said for said, versions in shared.items())


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


def render(
    report: Report,
    links: Links,
    failing: Sequence[Mapping[str, Any]],
    sections: Sequence[Section[Any]],
) -> str:
    """index.html: its header, then the ``sections`` in order (reports.sections: the gate, what
    fails, the matrix...); ``failing``: a row per (implementation, failing case) of the
    implementation pages (reports.pages), which the page's filter applies to."""
    filters = filter_values(index_failing(failing), report)
    page = Index(report, links, failing, filters)
    main = "".join(s.index(page) for s in sections)
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
