"""The gate in the report: what each target's latest run gives under the run's baseline, first on
index.html after the invalid rows.

The rows come from each target's latest run (``GateRow``); the verdicts are the harness's own
(``harness.gate``), so the report says what the command's exit code said: which failures gate,
which the baseline lists (with the entry's class), which passed only when run again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...conformance.verdicts import ROBUSTNESS
from ...harness.gate import (
    FAILING,
    FLAKY_MARK,
    GATING_LEVEL,
    Baseline,
    Verdict,
    entry_words,
    gate_fails,
)
from ...harness.results import ResultRow
from ..html import badge, breakable, esc, row, section, shown_of, table, tag
from ..model import Report
from ..section import Given, Index, Section

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# The order the report lists verdicts in: what gates first.
ORDER = (Verdict.UNEXPECTED, Verdict.STALE, Verdict.EXPECTED, Verdict.FLAKY)
SHOWN = 500  # rows per verdict the section lists (the counts are exact)
# How the section says each verdict (harness.gate.Verdict values).
SAID = {
    "unexpected": "gates: not in the baseline",
    "stale": "gates: the baseline lists it, but it passes (the baseline is stale)",
    "expected": "baselined",
    "flaky": "flaky: passed after failing when run again, or a pass of a case the baseline "
    "marks flaky",
}


@dataclass(frozen=True)
class GateRow:
    """A row of a target's latest run the gate looks at: a failure that can gate (a must case's,
    a crash's or a hang's), such a case that passed after failing (``retried``: the harness's
    flaky rows), or a pass of a case the baseline lists."""

    target: str
    version: str
    kind: str
    case_id: str
    group: str
    level: str
    category: str
    outcome: str
    retried: bool = False


@dataclass(frozen=True)
class Gated:
    """What the gate made of a GateRow: its verdict (a value of harness.gate.Verdict other than
    ok) and, for a case the baseline lists, the entry in words and its class."""

    row: GateRow
    verdict: str
    entry: str = ""
    entry_class: str = ""  # deviation, upstream-bug or flaky


def gate_rows(latest: DataFrame, listed: Iterable[str]) -> list[GateRow]:
    """The rows of the ``latest`` runs the gate looks at: few, whatever the runs. ``listed``: the
    case ids a baseline lists, whose passes the gate looks at."""
    from pyspark.sql import functions as F

    gating = (F.col("level") == GATING_LEVEL) | (F.col("category") == ROBUSTNESS)
    passed = F.col("outcome") == "pass"
    retried = passed & F.col("message").startswith(FLAKY_MARK)
    ids = sorted(set(listed))
    # A stale entry, or a flaky one that passed: the baseline tells which.
    stale = passed & (F.col("case_id").isin(*ids) if ids else F.lit(False))
    looked_at = F.col("outcome").isin(*FAILING) | retried | stale
    columns = ("target", "target_version", "target_kind", "case_id", "group", "level", "category",
               "outcome")  # fmt: skip
    found = latest.where(gating & looked_at).select(*columns, retried.alias("retried"))
    return [GateRow(*r) for r in found.orderBy("target", "case_id").collect()]


def judge(rows: Iterable[GateRow], baseline: Baseline) -> list[Gated]:
    """Each row the gate does not pass over, with its verdict: a retried pass is flaky (as the
    harness judged it when it ran), anything else as the baseline says."""
    out = []
    for r in rows:
        row = ResultRow("", "", "", "", r.target, r.kind, r.version, r.case_id, r.group, r.level,
                        r.outcome, 0.0, "", r.category)  # fmt: skip
        verdict = Verdict.FLAKY if r.retried else baseline.verdict(row)
        if verdict is Verdict.OK:
            continue
        entry = baseline.entry(r.target, r.version, r.case_id)
        words, kind = (entry_words(entry), entry["class"]) if entry else ("", "")
        out.append(Gated(r, verdict.value, words, kind))
    return sorted(out, key=lambda g: (ORDER.index(Verdict(g.verdict)), g.row.target, g.row.case_id))


def exit_code(gated: Sequence[Gated]) -> int:
    """The exit code the gate gives these rows: 1 when one fails it, else 0."""
    return 1 if gate_fails(Verdict(g.verdict) for g in gated) else 0


class GateSection(Section[list[Gated]]):
    name = "gate"

    def compute(self, given: Given) -> list[Gated]:
        expected = given.baseline.expected
        listed = {c for versions in expected.values() for cases in versions.values() for c in cases}
        return judge(gate_rows(given.latest, listed), given.baseline)

    def nav(self, report: Report) -> tuple[str, str]:
        return ("#gate", "The gate")

    def index(self, page: Index) -> str:
        """The exit code the gate gives, then what gates, what the baseline lists (with the
        entry's class) and what is flaky, case by case: the exit code is explained here, not
        only on a console."""
        gated = self.of(page.report)
        counted = {verdict: [g for g in gated if g.verdict == verdict] for verdict in SAID}
        code = exit_code(gated)
        classes = Counter(g.entry_class for g in counted["expected"])
        said = (
            f"The gate gives exit {code} for the latest run of each target: "
            f"{len(counted['unexpected'])} unexpected failure(s) and {len(counted['stale'])} "
            f"stale baseline entr{'y' if len(counted['stale']) == 1 else 'ies'} gate; "
            f"{len(counted['expected'])} baselined failure(s)"
            + (f" ({', '.join(f'{c} {n}' for c, n in sorted(classes.items()))})" if classes else "")
            + f" and {len(counted['flaky'])} flaky case(s) do not. Only a must case, or a crash "
            "or hang on any case, can gate."
        )
        tables = ""
        for verdict, what in SAID.items():
            found = counted[verdict]
            if not found:
                continue
            body = [
                row(
                    breakable(g.row.target),
                    tag("code", esc(g.row.case_id)),
                    esc(g.row.level),
                    badge(g.row.outcome),
                    esc(g.entry or what),
                )
                for g in found[:SHOWN]
            ]
            rows = table(("target", "case", "level", "outcome", "why"), body, class_="small")
            title = esc(f"{what}: " + shown_of(len(body), len(found), "case"))
            opened = "" if verdict in ("unexpected", "stale") else None  # what gates shows open
            tables += tag(
                "details", tag("summary", title) + tag("div", rows, class_="scroll"), open=opened
            )
        return section(
            f"The gate: exit {code}",
            tag("p", esc(said)) + tables,
            id="gate",
            class_="alert" if code else None,
        )


SECTION = GateSection()
