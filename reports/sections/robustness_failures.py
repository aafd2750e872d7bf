"""Robustness failures: every case where an implementation crashed or hung in the latest runs,
whatever the level, in a section of index.html of its own and in summary.md; they are in no
conformance score (the matrix has a column of them, each implementation's page lists their
evidence first)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...conformance.verdicts import ROBUSTNESS
from ..formats import code_span
from ..html import badge, esc, failing_at, muted, row, section, table, tag
from ..model import Report
from ..section import Given, Index, Section


def robustness_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Every robustness failure (a crash or a hang, at any level) of the latest runs."""
    if not rows:
        return muted("No implementation crashed or hung in the latest runs.")
    body = [
        row(
            tag("a", esc(r["implementation"]), href=r["page"]),
            tag("a", tag("code", esc(r["failure"]["case_id"])), href=f"{r['page']}#{r['anchor']}"),
            esc(r["failure"]["level"]),
            badge(r["failure"]["at"][0]["outcome"]) + esc(" " + failing_at(r["failure"]["at"])),
        )
        for r in rows
    ]
    headers = ("implementation", "case", "level", "failing at")
    return tag("div", table(headers, body, class_="small", id="robustness-table"), class_="scroll")


class RobustnessSection(Section[None]):
    name = "robustness"

    def compute(self, given: Given) -> None:
        return None  # drawn from the implementation pages' failures and each target's counts

    def nav(self, report: Report) -> tuple[str, str]:
        return ("#robustness", "Robustness")

    def index(self, page: Index) -> str:
        rows = [r for r in page.failing if r["failure"]["category"] == ROBUSTNESS]
        return section(
            "Robustness failures",
            muted(
                f"{len(rows)} case(s) where an implementation crashed or hung, whatever "
                "the level; they are not in the conformance scores."
            )
            + robustness_table(rows),
            id="robustness",
        )

    def markdown(self, report: Report) -> list[str]:
        robust = [t for t in report.targets if t.robustness]
        if not robust:
            return []
        return [
            "",
            "### Robustness failures (a crash or a hang; not in the scores)",
            "",
            *(f"- `{code_span(t.run.target)}`: {t.robustness}" for t in robust),
        ]


SECTION = RobustnessSection()
