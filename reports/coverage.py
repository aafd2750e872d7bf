"""Requirement coverage: for each statement of the documents, the cases that cite it and their
outcomes per target (coverage.json). Pure: the caller gives the latest outcome of each case."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from ..conformance import requirements, vectors

FORMAT = "nats-conformance-coverage/1"


def citations(cases: Iterable[vectors.Case]) -> dict[str, list[str]]:
    """Statement id -> the ids of the cases citing it, in case order."""
    cited: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        for rid in case.data.get("requirements", []):
            cited[rid].append(case.id)
    return cited


def by_case(rows: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str], Counter[str]]:
    """(target, vector id) -> outcome counts, from (target, row id, outcome) rows: a client row
    id is ``<vector id>@<path>``, so one vector may have several rows at a target."""
    counted: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for target, row_id, outcome in rows:
        counted[target, row_id.split("@", 1)[0]][outcome] += 1
    return counted


def coverage(
    statements: list[dict[str, str]],
    cited: dict[str, list[str]],
    outcomes: dict[tuple[str, str], Counter[str]],
) -> dict[str, Any]:
    """Per document, each statement with its cases and, per target, counts of their rows'
    outcomes (``outcomes``: by_case). Counts, not rows, keep a statement that thousands of rows
    exercise one line; statements no case exercises come first."""
    targets = sorted({target for target, _ in outcomes})
    documents: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for statement in statements:
        cases = cited.get(statement["id"], [])
        per_target = {
            target: dict(sorted(sum((outcomes.get((target, c), Counter()) for c in cases),
                                    Counter()).items()))
            for target in targets
        }  # fmt: skip
        documents[statement["document"]].append(
            statement | {"cases": cases, "outcomes": {t: n for t, n in per_target.items() if n}}
        )
    return {
        "format": FORMAT,
        "targets": targets,
        "documents": {
            name: {
                "statements": len(rows),
                "exercised": sum(bool(r["cases"]) for r in rows),
                "rows": sorted(rows, key=lambda r: bool(r["cases"])),
            }
            for name, rows in documents.items()
        },
    }


def bundled_coverage(rows: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """Coverage of the bundled index by the bundled vectors, from each target's latest rows
    (target, row id, outcome)."""
    return coverage(requirements.bundled_index(), citations(vectors.bundled_cases()), by_case(rows))
