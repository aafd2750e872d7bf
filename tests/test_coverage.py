"""Requirement coverage (reports/coverage.py) on a small sample of results."""

from __future__ import annotations

import json

from nats_conformance.conformance import vectors
from nats_conformance.reports import coverage

STATEMENTS = [
    {"id": "d.s.00000001", "document": "d.txt", "section": "S", "kind": "syntax", "words": "A"},
    {"id": "d.s.00000002", "document": "d.txt", "section": "S", "kind": "syntax", "words": "B"},
]


def _case(case_id: str, cited: list[str]) -> vectors.Case:
    return vectors.Case("f.json", "g", {"id": case_id, "requirements": cited})


def test_coverage_counts_outcomes_per_target_and_lists_unexercised_first() -> None:
    cited = coverage.citations([_case("c.1", ["d.s.00000001"]), _case("c.2", ["d.s.00000001"])])
    rows = [("srv", "c.1", "pass"), ("srv", "c.2", "fail"), ("cli", "c.1@decode", "pass"),
            ("cli", "c.1@hmsg", "fail")]  # fmt: skip
    got = coverage.coverage(STATEMENTS, cited, coverage.by_case(rows))
    assert got["targets"] == ["cli", "srv"]
    doc = got["documents"]["d.txt"]
    assert (doc["statements"], doc["exercised"]) == (2, 1)
    assert [r["id"] for r in doc["rows"]] == ["d.s.00000002", "d.s.00000001"]
    assert doc["rows"][0]["cases"] == [] and doc["rows"][0]["outcomes"] == {}
    assert doc["rows"][1]["cases"] == ["c.1", "c.2"]
    # A client's rows of one vector (one per path) all count for it.
    assert doc["rows"][1]["outcomes"] == {
        "cli": {"fail": 1, "pass": 1},
        "srv": {"fail": 1, "pass": 1},
    }


def test_bundled_coverage_counts_every_statement() -> None:
    """Per document, every statement of the bundled index once, and as exercised those that a
    bundled case cites: counted here from the files themselves, so the figures follow the index
    as it grows."""
    index = json.loads((vectors.BUNDLED_DIR / "requirements.json").read_text())["statements"]
    files = [p for p in vectors.BUNDLED_DIR.glob("*.json") if p.name not in vectors.NOT_VECTORS]
    cited = {rid for path in files for case in json.loads(path.read_text())["cases"]
             for rid in case["requirements"]}  # fmt: skip
    got = coverage.bundled_coverage([])
    assert {name: (d["statements"], d["exercised"]) for name, d in got["documents"].items()} == {
        name: (sum(s["document"] == name for s in index),
               sum(s["document"] == name and s["id"] in cited for s in index))
        for name in {s["document"] for s in index}
    }  # fmt: skip
    rows = [r["id"] for d in got["documents"].values() for r in d["rows"]]
    assert sorted(rows) == sorted(s["id"] for s in index) and len(set(rows)) == len(rows)
    assert 0 < len(cited & set(rows)) < len(rows)  # some statements are exercised, not all
