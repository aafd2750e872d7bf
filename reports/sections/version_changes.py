"""Changes between versions: across one implementation's versions (in version order), each case
whose outcome or observation differs from the version before, where the runs of both versions
agree on it (``Report.version_changes``, from the version series), on the implementation pages,
in their data and implementations.json (``version_changes``), and in summary.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import html
from ..formats import code_span, table_cell
from ..model import Report, VersionChange
from ..section import Given, Section


def version_change(v: VersionChange) -> dict[str, Any]:
    """A change between consecutive versions: what changed (outcome, observation or both) and
    the outcome and observation on each side."""
    return {
        "case_id": v.case_id,
        "group": v.group,
        "level": v.level,
        "changed": list(v.changed),
        "before": {
            "version": v.before_version,
            "outcome": v.before_outcome,
            "observed": v.before_observed,
        },
        "after": {
            "version": v.after_version,
            "outcome": v.after_outcome,
            "observed": v.after_observed,
        },
    }


def version_changes_table(changes: Sequence[Mapping[str, Any]]) -> str:
    """Each change between consecutive versions: the outcome and the observation on each side."""
    if not changes:
        return html.muted("No outcome or observation changes between versions.")
    rows = [
        html.row(
            html.tag("code", html.esc(c["case_id"])),
            html.esc(c["level"]),
            html.esc(" and ".join(c["changed"])),
            *(
                html.tag("strong", html.esc(side["version"]))
                + " "
                + html.badge(side["outcome"])
                + html.tag("div", html.observation(side["observed"]))
                for side in (c["before"], c["after"])
            ),
        )
        for c in changes
    ]
    note = html.muted(
        f"{html.plural(len(changes), 'change')}, in version order: an outcome, or what the "
        "implementation did (its observation), that differs from the version before."
    )
    headers = ("case", "level", "changed", "before", "after")
    return note + html.tag("div", html.table(headers, rows, class_="small obs"), class_="scroll")


class VersionChangesSection(Section[None]):
    name = "version_changes"

    def compute(self, given: Given) -> None:
        return None  # the core's version series

    def implementation(self, report: Report, implementation: str) -> dict[str, Any]:
        return {
            "version_changes": [
                version_change(v)
                for v in report.version_changes
                if v.implementation == implementation
            ]
        }

    def implementation_html(self, page: Mapping[str, Any]) -> str:
        return html.section(
            "Changes between versions",
            version_changes_table(page["version_changes"]),
            id="version-changes",
        )

    def markdown(self, report: Report) -> list[str]:
        """The outcome changes, one a line, and how many observations changed."""
        lines = []
        outcome_changes = [v for v in report.version_changes if "outcome" in v.changed]
        if outcome_changes:
            lines += ["", "### Changes between versions", ""]
            lines += [
                f"- {table_cell(v.implementation)} {code_span(v.case_id)} ({v.level}): "
                f"{v.before_outcome} at {table_cell(v.before_version)} -> "
                f"{v.after_outcome} at {table_cell(v.after_version)}"
                for v in outcome_changes
            ]
        observed = sum("observation" in v.changed for v in report.version_changes)
        if observed:
            lines += [
                "",
                f"{observed} observation change(s) between versions: what an implementation did "
                "differs from the version before (see implementations.json).",
            ]
        return lines


SECTION = VersionChangesSection()
