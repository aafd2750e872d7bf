"""The compliance matrix: each implementation at its newest version × rule group, coloured by
the must score, with a column of robustness failures and a chart of must scores, on index.html;
each target's latest run in summary.json (``targets``) and a table row in summary.md."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ...harness.results import OUTCOMES
from ..formats import table_cell
from ..html import (
    BANDS,
    NO_SCORE,
    Filters,
    Links,
    badge_names,
    bar,
    breakable,
    by_version,
    counts_line,
    counts_title,
    esc,
    fraction,
    muted,
    ordered_levels,
    outcome_class,
    percent,
    plural,
    score_class,
    section,
    tag,
)
from ..model import Counts, Report, TargetReport
from ..section import Given, Index, Section
from . import transport_support

CLIENT_KIND = "client"
CHART_LABEL_CHARS = 38
TABLE_HEAD = (
    "| target | version | must | must score | all levels | robustness failures | regressions "
    "| fixes |",
    "|---|---|---|---|---|---|---|---|",
)

LevelCounts = Mapping[str, Counts]


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
    top += tag("th", "Transports", rowspan=2, title="each transport's state: hover for its counts")
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
    carried = transport_support.by_target(transport_support.SECTION.of(report))
    width = len(groups) + 4
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
                    + tag("td", transport_support.marks(carried.get(t.run.target, [])))
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


def newest_versions(targets: Sequence[TargetReport]) -> list[TargetReport]:
    """Each implementation's target at its newest version (its page has the others)."""
    newest: dict[str, TargetReport] = {}
    for target in sorted(targets, key=by_version):
        newest[target.implementation] = target
    return sorted(newest.values(), key=lambda t: t.run.target)


def _levels(report: Report, target: str) -> dict[str, dict[str, Any]]:
    by_level: dict[str, Counts] = defaultdict(Counts)
    for cell in report.cells:
        if cell.target == target:
            by_level[cell.level] += cell.counts
    return {level: counts.to_json() for level, counts in sorted(by_level.items())}


def _groups(report: Report, target: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = defaultdict(dict)
    for cell in sorted(report.cells, key=lambda c: (c.group, c.level)):
        if cell.target == target:
            groups[cell.group][cell.level] = cell.counts.to_json()
    return dict(groups)


def _percent(counts: Counts) -> str:
    score = counts.score
    return "n/a" if score is None else f"{score:.1%}"


def markdown_row(t: TargetReport) -> str:
    """A target's row of summary.md's table (``TABLE_HEAD``)."""
    return (
        f"| {table_cell(t.run.target)} | {table_cell(t.run.version)} "
        f"| {t.must.passed}/{t.must.judged} "
        f"| {_percent(t.must)} | {_percent(t.totals)} | {t.robustness} | {t.regressions_total} "
        f"| {t.fixes_total} |"
    )


class MatrixSection(Section[None]):
    name = "matrix"

    def compute(self, given: Given) -> None:
        return None  # the core: each target's latest run and the matrix cells

    def nav(self, report: Report) -> tuple[str, str]:
        return ("#matrix", "Matrix")

    def index(self, page: Index) -> str:
        report = page.report
        bands = matrix_bands(newest_versions([t for t in report.targets if not t.interop]))
        return section(
            "Compliance matrix",
            muted(
                "Each implementation at its newest version (its page has every version and the "
                "version strip). A cell shows the must cases passed of judged (— when none was "
                "judged) and the counts across all levels; hover for the breakdown. Scores count "
                "conformance rows only, each case once, over tcp; robustness failures (over every "
                "transport) have their own column. Transports: a mark per transport the run's "
                "rows went over, green where it works, red where a gating case fails over it but "
                "not over tcp, grey where the target lacks it (hover for its counts)."
            )
            + legend()
            + tag("div", matrix(report, bands, page.links, page.filters), class_="flt")
            + tag("h3", "Must score per target")
            + must_chart([t for _, members in bands for t in members]),
        )

    def summary(self, report: Report) -> dict[str, Any]:
        badges = badge_names([t.run.target for t in report.targets])
        return {
            "targets": [
                {
                    "target": t.run.target,
                    "kind": t.run.kind,
                    "implementation": t.implementation,
                    "version": t.run.version,
                    "run_id": t.run.run_id,
                    "started": t.run.started,
                    "runs": t.runs,
                    "previous_run_id": t.previous.run_id if t.previous else None,
                    "must": t.must.to_json(),
                    "totals": t.totals.to_json(),
                    "robustness": t.robustness,
                    "levels": _levels(report, t.run.target),
                    "groups": _groups(report, t.run.target),
                    "failures": t.failures_total,
                    "regressions": t.regressions_total,
                    "fixes": t.fixes_total,
                    "changes": [
                        {
                            "case_id": c.case_id,
                            "group": c.group,
                            "level": c.level,
                            "before": c.before,
                            "after": c.after,
                            "kind": "regression" if c.regression else "fix",
                            "message": c.message,
                        }
                        for c in t.changes
                    ],
                    "badge": f"badges/{badges[t.run.target]}",
                }
                for t in report.targets
            ]
        }

    def markdown(self, report: Report) -> list[str]:
        return ["", *TABLE_HEAD, *(markdown_row(t) for t in report.targets if not t.interop)]


SECTION = MatrixSection()
