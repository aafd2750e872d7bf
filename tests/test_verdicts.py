"""The level rules every row passes through (conformance.verdicts) and the row they give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance.verdicts import (
    CATEGORIES,
    CONFORMANCE,
    LEVELS,
    OUTCOMES,
    ROBUSTNESS,
    derived_level,
    level_rank,
    observation,
    scrub,
    settle,
)
from nats_conformance.harness.results import (
    ROW_KEYS,
    CaseRef,
    Found,
    ResultsWriter,
    RunContext,
    read_rows,
)

levels = st.sampled_from(LEVELS)


@given(levels, levels)
def test_a_derived_row_is_never_stricter_than_its_case(case: str, check: str) -> None:
    level = derived_level(case, check)
    assert level_rank(level) >= level_rank(case)
    assert level_rank(level) >= level_rank(check)
    assert level in (case, check)


@given(levels, st.sampled_from(OUTCOMES), st.sampled_from(CATEGORIES))
def test_only_an_info_conformance_failure_changes_and_it_becomes_a_pass(
    level: str, outcome: str, category: str
) -> None:
    settled = settle(level, outcome, category)
    if level == "info" and outcome == "fail" and category == CONFORMANCE:
        assert settled == "pass"
    else:
        assert settled == outcome


def test_a_crash_fails_an_info_case_too() -> None:
    assert settle("info", "fail", ROBUSTNESS) == "fail"
    with pytest.raises(ValueError, match="unknown category"):
        settle("must", "fail", "style")


def test_an_observation_is_canonical_and_free_of_names_made_up_per_run() -> None:
    one = {"events": ["msg"], "reply": "_INBOX.abc.1", "server": "NCXKQ2ZB7KGOEMCS3DP2TM"}
    two = {"server": "NDFFDX5YVHN7OZL4PVS2T6", "reply": "_INBOX.xyz.2", "events": ["msg"]}
    assert observation(one) == observation(two)
    assert json.loads(observation(one)) == {
        "events": ["msg"],
        "reply": "_INBOX.*",
        "server": "<nuid>",
    }
    assert observation(None) == observation({}) == ""
    assert scrub("timestamp 1732752000123456789 seq 12") == "timestamp <time> seq 12"


@given(st.dictionaries(st.text(max_size=5), st.text(max_size=8), max_size=4))
def test_an_observation_does_not_depend_on_key_order(what: dict[str, str]) -> None:
    assert observation(what) == observation(dict(reversed(list(what.items()))))


def test_every_row_is_settled_in_one_place_and_keeps_its_observation(tmp_path: Path) -> None:
    ctx = RunContext("run", "0.1.0", "sha256:x")
    results = tmp_path / "r.jsonl"
    with ResultsWriter(results) as writer:
        for level, category in (("info", CONFORMANCE), ("must", CONFORMANCE), ("info", ROBUSTNESS)):
            ctx.record(
                writer,
                ("t", "kind", "1"),
                CaseRef(f"c.{level}.{category}", level, None, group="g"),
                Found("fail", "closed", 1.0, observed='{"closed":true}', category=category),
            )
    rows = {row.case_id: row for row in read_rows(results)}
    assert rows["c.info.conformance"].outcome == "pass"  # recorded, never failed
    assert rows["c.must.conformance"].outcome == "fail"
    assert rows["c.info.robustness"].outcome == "fail"  # a crash fails at every level
    assert {row.observed for row in rows.values()} == {'{"closed":true}'}
    assert next(json.loads(line) for line in results.read_text().splitlines()).keys() == set(
        ROW_KEYS
    )


def test_a_row_written_before_category_and_observed_existed_still_reads(tmp_path: Path) -> None:
    old = {k: "x" for k in ROW_KEYS if k not in ("category", "observed")} | {"duration_ms": 1.0}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (row,) = read_rows(path)
    assert (row.category, row.observed) == (CONFORMANCE, "")
