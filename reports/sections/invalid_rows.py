"""Invalid rows: the results lines that break the row schema, first on index.html (an alert),
counted and listed in summary.json and summary.md. They are left out of every other count."""

from __future__ import annotations

from dataclasses import dataclass

from ..formats import table_cell
from ..html import esc, section, tag
from ..model import Report
from ..section import Given, Index, Section

SHOWN = 200  # invalid rows listed in the report (all are printed by the command)


@dataclass(frozen=True)
class InvalidRows:
    total: int
    shown: list[str]  # the first SHOWN, as ``file:line: problem``


class InvalidRowsSection(Section[InvalidRows]):
    name = "invalid_rows"

    def compute(self, given: Given) -> InvalidRows:
        return InvalidRows(len(given.problems), [str(p) for p in given.problems[:SHOWN]])

    def index(self, page: Index) -> str:
        rows = self.of(page.report)
        if not rows.total and not rows.shown:
            return ""
        total = max(rows.total, len(rows.shown))
        listed = f" (the first {len(rows.shown)} are listed)" if len(rows.shown) < total else ""
        body = tag(
            "p",
            tag("strong", esc(f"Rows that break the results schema: {total}"))
            + esc(f"{listed}. They are left out of every count in this report."),
        ) + tag("ul", "".join(tag("li", tag("code", esc(line))) for line in rows.shown))
        return section("Invalid rows", body, id="invalid", class_="alert")

    def summary(self, report: Report) -> dict[str, object]:
        rows = self.of(report)
        return {"invalid_rows": {"total": rows.total, "shown": rows.shown}}

    def markdown(self, report: Report) -> list[str]:
        rows = self.of(report)
        if not rows.total:
            return []
        return [
            "",
            f"### {rows.total} invalid row(s)",
            "",
            *(f"- {table_cell(p)}" for p in rows.shown),
        ]


SECTION = InvalidRowsSection()
