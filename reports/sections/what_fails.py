"""What fails: each (implementation, failing case) of the latest runs at the levels index.html
lists, must first, with a line per implementation before the cases and a filter by level, group
and implementation made of CSS alone (see reports/README.md). The rows are the implementation
pages' failures (reports.pages), so each links to its evidence there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...harness.results import LEVELS
from ..html import (
    Filters,
    badge,
    esc,
    failing_at,
    index_failing,
    level_class,
    muted,
    plural,
    row,
    section,
    since_text,
    table,
    tag,
    upstream_link,
)
from ..model import Report
from ..section import Given, Index, Section

FILTER_LABELS = {"level": "Level", "group": "Group", "impl": "Implementation"}


def filter_form(filters: Filters) -> str:
    """Selects whose choice hides rows through CSS ``:has()``: no script (see reports/README)."""
    selects = []
    for name, values in filters.items():
        options = tag("option", "all", value="", selected=None if name == "level" else "")
        options += "".join(
            tag("option", esc(label), value=value, selected="" if value == "must" else None)
            for label, value in values.items()
        )
        select = tag("select", options, id=f"f-{name}")
        selects.append(tag("label", esc(FILTER_LABELS[name]) + " " + select))
    return tag("form", "".join(selects), class_="filter")


def failing_table(rows: Sequence[Mapping[str, Any]], filters: Filters) -> str:
    if not rows:
        return muted("No case fails in the latest runs.")
    body = []
    for r in rows:
        f = r["failure"]
        at = f["at"]
        upstream = next((a["upstream"] for a in at if a["upstream"]), None)
        evidence = f"{r['page']}#{r['anchor']}"
        body.append(
            tag(
                "tr",
                tag("td", tag("a", esc(r["implementation"]), href=r["page"]))
                + tag("td", tag("a", tag("code", esc(f["case_id"])), href=evidence))
                + tag("td", esc(f["level"]), class_=f"lvl {level_class(f['level'])}")
                + tag("td", badge(at[0]["outcome"]) + esc(" " + failing_at(at)))
                + tag("td", esc(since_text(f["since"])))
                + tag("td", upstream_link(upstream) if upstream else ""),
                data_i=filters["impl"][r["implementation"]],
                data_g=filters["group"][f["group"]],
                data_l=f["level"] if f["level"] in LEVELS else "other",
            )
        )
    headers = ("implementation", "case", "level", "failing at", "since", "known")
    return tag("div", table(headers, body, class_="small flt", id="failing-table"), class_="scroll")


def failing_summary(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line per implementation with a failure: the first thing a reader wants, before the
    cases. A regression is a case that passed at an earlier version or run."""
    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        f = r["failure"]
        line = per.setdefault(
            r["implementation"],
            {"page": r["page"], "must": 0, "regressed": 0, "should": 0, "upstream": 0},
        )
        line[f["level"]] += 1
        if f["level"] == "must" and f["since"] and f["since"]["passed_before"]:
            line["regressed"] += 1
        line["upstream"] += any(a["upstream"] for a in f["at"])
    order = sorted(per.items(), key=lambda kv: (-kv[1]["must"], -kv[1]["should"], kv[0]))
    body = [
        row(
            tag("a", esc(name), href=line["page"]),
            tag("span", str(line["must"]), class_="o-fail" if line["must"] else ""),
            str(line["regressed"]),
            str(line["should"]),
            str(line["upstream"]),
        )
        for name, line in order
    ]
    headers = ("implementation", "must failing", "must regressions", "should failing",
               "known upstream")  # fmt: skip
    return table(headers, body, class_="small", id="failing-summary")


class WhatFailsSection(Section[None]):
    name = "what_fails"

    def compute(self, given: Given) -> None:
        return None  # drawn from the implementation pages' failures

    def nav(self, report: Report) -> tuple[str, str]:
        return ("#what-fails", "What fails")

    def index(self, page: Index) -> str:
        failing = index_failing(page.failing)
        must_rows = [r for r in failing if r["failure"]["level"] == "must"]
        impls = plural(len({r["implementation"] for r in must_rows}), "implementation")
        return section(
            "What fails",
            muted(
                f"{len(must_rows)} must case(s) fail across {impls} in the latest runs of their "
                "versions; each row links to its evidence. The filter starts at must; should "
                "failures are one choice away, may failures are on each implementation's "
                "page; info cases never fail: what implementations did there is compared in "
                "the behaviour view. Crashes and hangs are robustness failures, listed apart. "
                "The implementation filter applies to the matrix too."
            )
            + failing_summary(failing)
            + filter_form(page.filters)
            + failing_table(failing, page.filters),
            id="what-fails",
        )


SECTION = WhatFailsSection()
