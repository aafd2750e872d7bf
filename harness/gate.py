"""The CI gate: which outcomes fail a run, and the expected-failures baseline.

Only `must` cases can fail the gate; `should`, `may` and `info` outcomes are recorded and
reported, never gating. A `must` case that fails (or cannot be run: `error`) fails the gate
unless the baseline lists it for that target. A listed case that passes fails the gate too, so
the baseline cannot go stale; `update` rewrites it from a run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from harness.results import ResultRow

BASELINE_FORMAT = "nats-conformance-baseline/1"
GATING_LEVEL = "must"
FAILING = frozenset({"fail", "error"})


class Verdict(StrEnum):
    OK = "ok"  # passed, skipped, or a non-gating level
    EXPECTED = "expected"  # a gating failure the baseline lists
    UNEXPECTED = "unexpected"  # a gating failure the baseline does not list
    STALE = "stale"  # the baseline lists it, but it passed


class BaselineError(ValueError):
    """A baseline file that cannot be read; the message names the file and the problem."""


@dataclass
class Baseline:
    """Expected must-level failures per target: {target: {case_id: message when recorded}}."""

    expected: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None) -> Baseline:
        if path is None or not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise BaselineError(f"{path}: cannot read baseline: {exc}") from exc
        expected = data.get("expected_failures") if isinstance(data, dict) else None
        if data.get("format") != BASELINE_FORMAT or not _is_table(expected):
            raise BaselineError(
                f"{path}: not a baseline (format {BASELINE_FORMAT!r} with "
                '"expected_failures": {target: {case_id: message}})'
            )
        return cls(expected)

    def lists(self, target: str, case_id: str) -> bool:
        return case_id in self.expected.get(target, {})

    def verdict(self, row: ResultRow) -> Verdict:
        listed = self.lists(row.target, row.case_id)
        if row.level != GATING_LEVEL:
            return Verdict.OK
        if row.outcome in FAILING:
            return Verdict.EXPECTED if listed else Verdict.UNEXPECTED
        if row.outcome == "pass" and listed:
            return Verdict.STALE
        return Verdict.OK

    def updated(self, rows: Iterable[ResultRow]) -> Baseline:
        """This baseline with the entries of every target in ``rows`` replaced by its failures."""
        fresh: dict[str, dict[str, str]] = {}
        for row in rows:
            entries = fresh.setdefault(row.target, {})
            if row.level == GATING_LEVEL and row.outcome in FAILING:
                entries[row.case_id] = f"{row.outcome}: {row.message}"[:300]
        merged = {**self.expected, **fresh}
        return Baseline({t: dict(sorted(merged[t].items())) for t in sorted(merged) if merged[t]})

    def save(self, path: Path) -> None:
        doc = {"format": BASELINE_FORMAT, "expected_failures": self.expected}
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _is_table(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(cases, dict) and all(isinstance(m, str) for m in cases.values())
        for cases in value.values()
    )


def gate_fails(verdicts: Iterable[Verdict]) -> bool:
    return any(v in (Verdict.UNEXPECTED, Verdict.STALE) for v in verdicts)
