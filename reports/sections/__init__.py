"""The sections of the report (``reports.section.Section``), one module each, and the order each
output shows them in. Adding a section: its module here, and its entry in these lists."""

from __future__ import annotations

from typing import Any

from ..section import Given, Section
from . import invalid_rows, report_gate, robustness_failures, what_fails

# index.html (and its header's links) and summary.json, in this order; computed in this order.
SECTIONS: tuple[Section[Any], ...] = (
    invalid_rows.SECTION,
    report_gate.SECTION,
    what_fails.SECTION,
    robustness_failures.SECTION,
)
# summary.md, in this order (its table of targets first, what is wrong last).
MARKDOWN: tuple[Section[Any], ...] = (invalid_rows.SECTION,)


def compute(given: Given) -> dict[str, object]:
    """Every section's data, by name (``Report.parts``)."""
    return {s.name: s.compute(given) for s in SECTIONS}
