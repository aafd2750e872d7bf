"""Every JSON Schema of the suite lives in schemas/: each is a valid 2020-12 schema with an $id of
its own and a line in schemas/README.md; the result row's schema says what the harness writes
(every row a run makes validates) and what the report's reader accepts."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nats_conformance.conformance.verdicts import CATEGORIES, LEVELS, OUTCOMES
from nats_conformance.harness.results import LATER_KEYS, ROW_KEYS, RunContext
from nats_conformance.reports.ingest import MESSAGE_MAX, NON_EMPTY_KEYS, TEXT_MAX

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
ROW_SCHEMA = json.loads((SCHEMAS / "result-row.schema.json").read_text("utf-8"))
ROW = jsonschema.Draft202012Validator(
    ROW_SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
)


def test_every_schema_is_valid_has_its_own_id_and_is_listed_in_the_readme() -> None:
    readme = (SCHEMAS / "README.md").read_text("utf-8")
    ids = []
    for path in sorted(SCHEMAS.glob("*.json")):
        assert path.name.endswith(".schema.json"), path
        schema = json.loads(path.read_text("utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        ids.append(schema["$id"])
        assert f"`{path.name}`" in readme, path.name
    assert len(ids) == len(set(ids)) >= 11


def test_the_row_schema_has_the_rows_keys_vocabularies_and_limits() -> None:
    props = ROW_SCHEMA["properties"]
    assert tuple(props) == ROW_KEYS
    assert set(ROW_SCHEMA["required"]) == set(ROW_KEYS) - set(LATER_KEYS)
    assert {k: props[k]["default"] for k in LATER_KEYS} == LATER_KEYS
    assert (props["level"]["enum"], props["outcome"]["enum"], props["category"]["enum"]) == (
        list(LEVELS), list(OUTCOMES), list(CATEGORIES)
    )  # fmt: skip
    defs = ROW_SCHEMA["$defs"]
    assert defs["bounded"]["maxLength"] == MESSAGE_MAX
    assert defs["text"]["maxLength"] == defs["name"]["maxLength"] == TEXT_MAX
    assert {k for k, v in props.items() if v.get("$ref") == "#/$defs/name"} == set(NON_EMPTY_KEYS)


texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=3000)
names = texts.filter(bool)


@settings(max_examples=60, deadline=None)
@given(
    names, names, names, names, names, texts, st.sampled_from(LEVELS), st.sampled_from(OUTCOMES),
    st.sampled_from(CATEGORIES), st.floats(0, 1e9), texts, texts,
)  # fmt: skip
def test_every_row_a_run_makes_validates(
    target: str, kind: str, case_id: str, group: str, run_id: str, version: str, level: str,
    outcome: str, category: str, duration: float, message: str, observed: str,
) -> None:  # fmt: skip
    context = RunContext(run_id, "0.1.0", "sha256:0123456789abcdef")
    row = context.row(
        target=target[:200], target_kind=kind[:200], target_version=version[:200],
        case_id=case_id[:200], group=group[:200], level=level, outcome=outcome,
        duration_ms=duration, message=message, category=category, observed=observed,
    )  # fmt: skip
    errors = [e.message for e in ROW.iter_errors(json.loads(row.to_json()))]
    assert not errors


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"outcome": "passed"}, "outcome"),
        ({"level": "MUST"}, "level"),
        ({"duration_ms": -1}, "duration"),
        ({"target": ""}, "empty target"),
        ({"message": "x" * (MESSAGE_MAX + 1)}, "unbounded message"),
        ({"time": "yesterday"}, "time"),
    ],
)
def test_the_row_schema_refuses_rows_the_reader_refuses(
    change: dict[str, object], why: str
) -> None:
    row = json.loads(
        RunContext("r", "0.1.0", "v").row(
            target="t", target_kind="k", target_version="1", case_id="c", group="g",
            level="must", outcome="pass", duration_ms=1.0, message="",
        ).to_json()
    )  # fmt: skip
    assert ROW.is_valid(row)
    assert not ROW.is_valid(row | change), why
