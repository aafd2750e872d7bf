"""Requirement coverage: for each statement of the documents, the cases that cite it and their
outcomes per target in the latest runs (``coverage.json``, computed by ``reports.coverage``) and
``coverage.html``, linked from index.html's header."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ..coverage import bundled_coverage
from ..formats import dumps
from ..html import badge, document, esc, muted, plural, row, section, table, tag
from ..model import Report
from ..section import Given, Section

PAGE = "coverage.html"
DATA = "coverage.json"
COVERAGE_WORDS = 240  # characters of a statement's words shown (the index has them all)


def render_coverage(data: Mapping[str, Any], generated: str) -> str:
    """coverage.html: per document, the statements no case exercises first, then each statement
    with its cases and their rows' outcomes summed over the targets (coverage.json: per target)."""
    documents = data.get("documents", {})
    body = tag("h1", "Requirement coverage") + muted(
        f"Generated {generated}. A statement of the specification documents is exercised "
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


class CoverageSection(Section[dict[str, Any]]):
    name = "coverage"

    def compute(self, given: Given) -> dict[str, Any]:
        return bundled_coverage((r.target, r.case_id, r.outcome) for r in given.cases)

    def nav(self, report: Report) -> tuple[str, str] | None:
        return (PAGE, "Requirement coverage") if self.of(report) else None

    def files(self, report: Report) -> dict[str, str]:
        data = self.of(report)
        if not data:  # not computed (a report built by hand)
            return {}
        return {DATA: dumps(data), PAGE: render_coverage(data, report.generated)}


SECTION = CoverageSection()
