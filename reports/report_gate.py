"""The gate in the report: what each target's latest run gives under the run's baseline.

The rows come from the analysis (model.GateRow); the verdicts are the harness's own
(``harness.gate``), so the report says what the command's exit code said: which failures gate,
which the baseline lists (with the entry's class), which passed only when run again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..harness.gate import Baseline, Verdict, entry_words, gate_fails
from ..harness.results import ResultRow
from .model import Gated, GateRow

# The order the report lists verdicts in: what gates first.
ORDER = (Verdict.UNEXPECTED, Verdict.STALE, Verdict.EXPECTED, Verdict.FLAKY)


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
