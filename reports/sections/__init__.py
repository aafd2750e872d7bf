"""The sections of the report (``reports.section.Section``), one module each, and the order each
output shows them in. Adding a section: its module here, and its entry in these lists."""

from __future__ import annotations

from typing import Any

from ..section import Given, Section
from . import (
    behaviour_view,
    compliance_matrix,
    flaky_cases,
    interop_grid,
    invalid_rows,
    regressions,
    report_gate,
    requirement_coverage,
    robustness_failures,
    transport_support,
    version_changes,
    what_fails,
)

# index.html (and its header's links), summary.json, the implementation pages and their data, in
# this order; computed in this order.
SECTIONS: tuple[Section[Any], ...] = (
    invalid_rows.SECTION,
    report_gate.SECTION,
    what_fails.SECTION,
    robustness_failures.SECTION,
    compliance_matrix.SECTION,
    interop_grid.SECTION,
    transport_support.SECTION,
    flaky_cases.SECTION,
    regressions.SECTION,
    version_changes.SECTION,
    behaviour_view.SECTION,
    requirement_coverage.SECTION,
)
# summary.md, in this order: the table of targets first, what is wrong last.
MARKDOWN: tuple[Section[Any], ...] = (
    compliance_matrix.SECTION,
    interop_grid.SECTION,
    transport_support.SECTION,
    regressions.SECTION,
    version_changes.SECTION,
    robustness_failures.SECTION,
    flaky_cases.SECTION,
    invalid_rows.SECTION,
)


def compute(given: Given) -> dict[str, object]:
    """Every section's data, by name (``Report.parts``)."""
    return {s.name: s.compute(given) for s in SECTIONS}
