"""What a drill-down shows beside a failing case: the requirement it rests on and the transcript.

The harness writes both for every row that did not pass into a side file next to the results
(``results-<run>.details.ndjson``, or ``.details.ndjson.gz`` compressed); a case with no side-file
entry still gets its requirement from the bundled vectors when its id is a vector case.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from ..conformance import requirements, vectors
from ..harness.gate import Baseline
from ..harness.results import open_text, requirement
from .model import TargetReport

Key = tuple[str, str, str]  # (run_id, target, case_id)


def load(files: Iterable[Path], wanted: set[Key]) -> dict[Key, dict[str, Any]]:
    """The side-file entries of ``wanted`` rows (an entry under a former case id is the current
    id's, as the rows are: ``history.current_ids``); a line that is not an entry is passed over
    (side files only add to a report; the rows themselves are validated elsewhere)."""
    found: dict[Key, dict[str, Any]] = {}
    renames = vectors.bundled_renames()
    for path in files:
        with open_text(path, errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                    key = (entry["run_id"], entry["target"], renames.current(entry["case_id"]))
                except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                    continue
                if key in wanted:
                    found[key] = {
                        "requirement": entry.get("requirement"),
                        "transcript": entry.get("transcript") or "",
                    }
    for key in wanted:
        entry = found.setdefault(key, {"requirement": None, "transcript": ""})
        if not entry["requirement"]:
            entry["requirement"] = bundled_requirements().get(key[2])
    return found


@cache
def bundled_requirements() -> dict[str, dict[str, str]]:
    """Case id -> the requirement (document, section, quote, description) of bundled vectors."""
    return {
        case.id: requirement(case.source, case.data["description"])
        for case in vectors.bundled_cases()
    }


def vector_of(case_id: str) -> dict[str, Any] | None:
    """The bundled vector behind a row's case id (a client row's id is ``<vector id>@<path>``):
    its file, its id and the statements of the requirement index it cites, with their words."""
    found = bundled_vectors().get(case_id.split("@", 1)[0])
    if found is None:
        return None
    statements = requirements.statement_words()
    file, vector_id, cited = found
    return {
        "file": file,
        "case_id": vector_id,
        "requirements": [{"id": rid, "words": statements.get(rid, "")} for rid in cited],
    }


@cache
def bundled_vectors() -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """Vector id -> (file as ``vectors/<name>``, id, cited requirement ids)."""
    return {
        case.id: (
            f"vectors/{Path(case.file).name}",
            case.id,
            tuple(case.data.get("requirements", ())),
        )
        for case in vectors.bundled_cases()
    }


def upstream(targets: Iterable[TargetReport], baseline: Baseline) -> dict[tuple[str, str], str]:
    """(target, case id) -> the bug report URL the baseline entry of a failing case names."""
    return {
        (t.run.target, f.case_id): url
        for t in targets
        for f in t.failures
        if (url := baseline.upstream(t.run.target, t.run.version, f.case_id)) is not None
    }
