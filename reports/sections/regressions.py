"""Regressions: the cases that passed in a target's previous run and fail in its latest, listed in
summary.md (each target's changes, regressions and fixes, are in summary.json's ``targets`` and
on the implementation pages)."""

from __future__ import annotations

from ..formats import code_span
from ..model import Report
from ..section import Given, Section


class RegressionsSection(Section[None]):
    name = "regressions"

    def compute(self, given: Given) -> None:
        return None  # the core: each target's changes against its previous run

    def markdown(self, report: Report) -> list[str]:
        regressions = [(t, c) for t in report.targets for c in t.changes if c.regression]
        if not regressions:
            return []
        return [
            "",
            "### Regressions",
            "",
            *(
                f"- `{code_span(t.run.target)}` {code_span(c.case_id)} ({c.level}): "
                f"{c.before} -> {c.after}"
                for t, c in regressions
            ),
        ]


SECTION = RegressionsSection()
