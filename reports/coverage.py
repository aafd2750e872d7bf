"""Requirement coverage: for each statement of the documents, the cases that cite it and their
outcomes per target (coverage.json). Pure: the caller gives the latest outcome of each case."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from conformance import requirements, vectors

FORMAT = "nats-conformance-coverage/1"


def citations(cases: Iterable[vectors.Case]) -> dict[str, list[str]]:
    """Statement id -> the ids of the cases citing it, in case order."""
    cited: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        for rid in case.data.get("requirements", []):
            cited[rid].append(case.id)
    return cited


def coverage(
    statements: list[dict[str, str]],
    cited: dict[str, list[str]],
    outcomes: dict[tuple[str, str], str],
) -> dict[str, Any]:
    """Per document, each statement with its cases and, per target, counts of their outcomes
    (``outcomes``: (target, case id) -> outcome). Counts, not rows, keep a statement that
    thousands of rows exercise one line; statements no case exercises come first."""
    targets = sorted({target for target, _ in outcomes})
    documents: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for statement in statements:
        cases = cited.get(statement["id"], [])
        per_target = {
            target: dict(
                sorted(
                    Counter(outcomes[target, c] for c in cases if (target, c) in outcomes).items()
                )
            )
            for target in targets
        }
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


def bundled_coverage(outcomes: dict[tuple[str, str], str]) -> dict[str, Any]:
    """Coverage of the bundled index by the bundled vectors."""
    loaded = vectors.load_all([vectors.BUNDLED_DIR])
    return coverage(requirements.bundled_index(), citations(loaded.cases), outcomes)
