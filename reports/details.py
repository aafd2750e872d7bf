"""What a drill-down shows beside a failing case: the requirement it rests on and the transcript.

The harness writes both for every row that did not pass into a side file next to the results
(``results-<run>.details.ndjson``); a case with no side-file entry still gets its requirement from
the bundled vectors when its id is a vector case.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from nats_conformance.conformance import vectors
from nats_conformance.harness.results import requirement

Key = tuple[str, str, str]  # (run_id, target, case_id)


def load(files: Iterable[Path], wanted: set[Key]) -> dict[Key, dict[str, Any]]:
    """The side-file entries of ``wanted`` rows; a line that is not an entry is passed over
    (side files only add to a report; the rows themselves are validated elsewhere)."""
    found: dict[Key, dict[str, Any]] = {}
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                    key = (entry["run_id"], entry["target"], entry["case_id"])
                except (json.JSONDecodeError, KeyError, TypeError):
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
    loaded = vectors.load_all([vectors.BUNDLED_DIR])
    return {case.id: requirement(case.source, case.data["description"]) for case in loaded.cases}
