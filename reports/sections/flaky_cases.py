"""Flaky cases: where the runs of one target at one version disagree (on the outcome, or a row
passed only when run again, or on the observation), and the differences between versions such a
case leaves unconfirmed (``Report.flaky_changes``, from the version series: never version
changes), on index.html, in summary.json (``flaky``) and counted in summary.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...harness.results import OUTCOMES
from ..html import badge, esc, muted, plural, row, section, shown_of, table, tag
from ..model import FlakyChange, Report
from ..section import Given, Index, Section
from .version_changes import version_change

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SHOWN = 500  # flaky cases listed (the total is exact)


@dataclass(frozen=True)
class Flaky:
    """A case whose runs of one target at one version disagree, on the outcome or on what was
    observed (``varied``: ``outcome``, ``observation`` or both)."""

    target: str
    version: str
    case_id: str
    level: str
    outcomes: tuple[str, ...]
    runs: int
    varied: tuple[str, ...] = ("outcome",)


@dataclass(frozen=True)
class FlakyCases:
    cases: list[Flaky]  # the first SHOWN, by target and case
    total: int


def flaky_cases(unstable: DataFrame) -> FlakyCases:
    """The flaky cases (``unstable``: analysis): runs of one target at one version disagree on the
    outcome or the observation."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    counted = Observation("flaky")
    shown = (
        unstable.observe(counted, F.count(F.lit(1)).alias("total"))
        .orderBy("target", "case_id")
        .limit(SHOWN)
        .collect()
    )
    total = counted.get["total"]
    cases = [
        Flaky(
            r.target,
            r.target_version,
            r.case_id,
            r.level,
            tuple(sorted(o for o in OUTCOMES if r[o])),
            r.runs,
            tuple(
                what
                for what, varies in (
                    ("outcome", r.outcome_varies),
                    ("observation", r.observation_varies),
                )
                if varies
            ),
        )
        for r in shown
    ]
    return FlakyCases(cases, total)


def flaky_html(items: Sequence[Flaky], total: int, changes: Sequence[FlakyChange]) -> str:
    """The cases whose runs of one target at one version disagree, then the differences between
    versions that such a case makes unconfirmed (not version changes)."""
    if not total:
        return muted(
            "No case changed its outcome or observation between runs of one target at one version."
        )
    rows = (
        row(
            esc(f.target),
            esc(f.version),
            tag("code", esc(f.case_id)),
            esc(f.level),
            " ".join(badge(o) for o in f.outcomes),
            esc(" and ".join(f.varied)),
            str(f.runs),
        )
        for f in items
    )
    note = tag("p", esc(shown_of(len(items), total, "flaky case") + "."))
    body = note + table(
        ("target", "version", "case", "level", "outcomes", "varied", "runs"), rows, class_="small"
    )
    if changes:
        body += tag(
            "p",
            esc(
                f"{plural(len(changes), 'difference')} between versions not confirmed: at the "
                "version(s) named, the runs disagree on the case, so it is not a version change."
            ),
        ) + table(
            ("implementation", "case", "level", "before", "after", "runs disagree"),
            (
                row(
                    esc(f.change.implementation),
                    tag("code", esc(f.change.case_id)),
                    esc(f.change.level),
                    *(
                        tag("strong", esc(version)) + " " + badge(outcome)
                        for version, outcome in (
                            (f.change.before_version, f.change.before_outcome),
                            (f.change.after_version, f.change.after_outcome),
                        )
                    ),
                    esc("; ".join(f"at {u.version}: {' and '.join(u.varied)}" for u in f.unstable)),
                )
                for f in changes
            ),
            class_="small",
        )
    return body


class FlakySection(Section[FlakyCases]):
    name = "flaky"

    def compute(self, given: Given) -> FlakyCases:
        return flaky_cases(given.unstable)

    def nav(self, report: Report) -> tuple[str, str]:
        return ("#flaky", "Flaky cases")

    def index(self, page: Index) -> str:
        found = self.of(page.report)
        return section(
            "Flaky cases",
            flaky_html(found.cases, found.total, page.report.flaky_changes),
            id="flaky",
        )

    def summary(self, report: Report) -> dict[str, Any]:
        found = self.of(report)
        return {
            "flaky": {
                "total": found.total,
                "cases": [
                    {
                        "target": f.target,
                        "version": f.version,
                        "case_id": f.case_id,
                        "level": f.level,
                        "outcomes": list(f.outcomes),
                        "varied": list(f.varied),
                        "runs": f.runs,
                    }
                    for f in found.cases
                ],
                # Differences between versions the runs do not confirm: not version changes.
                "changes": [
                    {
                        "implementation": f.change.implementation,
                        **version_change(f.change),
                        "unstable": [
                            {"version": u.version, "varied": list(u.varied)} for u in f.unstable
                        ],
                    }
                    for f in report.flaky_changes
                ],
            }
        }

    def markdown(self, report: Report) -> list[str]:
        lines = []
        if total := self.of(report).total:
            lines += ["", f"{total} flaky case(s): outcomes or observations differ "
                      "between runs of one version (see summary.json)."]  # fmt: skip
        if report.flaky_changes:
            unconfirmed = len(report.flaky_changes)
            lines += ["", f"{unconfirmed} difference(s) between versions not confirmed (the runs "
                      "of a version disagree): flaky, not changes (see summary.json)."]  # fmt: skip
        return lines


SECTION = FlakySection()
