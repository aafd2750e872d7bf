"""The report's data files have JSON Schemas in the repository (schemas/): what the
renderer writes validates, the committed published report validates, and the schemas refuse what
they should."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_samples import sample_report

from nats_conformance.reports import outputs, validate
from nats_conformance.reports.sections import requirement_coverage

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "published" / "report"


def test_the_schemas_are_valid_and_shipped() -> None:
    names = {p.name for p in validate.SCHEMA_DIR.glob("*.schema.json")}
    assert set(validate.SCHEMAS.values()) <= names
    for name in names:
        validate.validator(name)  # check_schema raises on a broken schema
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"nats_conformance.schemas" = ["*.schema.json", "README.md"]' in pyproject


def test_a_rendered_report_validates(tmp_path: Path) -> None:
    report = sample_report()
    coverage = {"format": "nats-conformance-coverage/1", "targets": [], "documents": {}}
    report.parts[requirement_coverage.SECTION.name] = coverage
    outputs.write_all(report, tmp_path)
    checked = validate.problems(tmp_path)
    assert len([n for n in checked if n.startswith("impl/")]) == 6
    assert {"implementations.json", "coverage.json"} <= set(checked)
    # The hostile sample's outcomes and levels are all known ones, so everything validates.
    assert not any(checked.values()), checked


@pytest.mark.skipif(
    not (PUBLISHED / "implementations.json").exists(), reason="no published report here"
)
def test_the_published_report_validates() -> None:
    checked = validate.problems(PUBLISHED)
    assert "implementations.json" in checked
    assert not any(checked.values()), {k: v for k, v in checked.items() if v}


def test_a_schema_refuses_what_it_should(tmp_path: Path) -> None:
    outputs.write_all(sample_report(), tmp_path)
    page = next((tmp_path / "impl").glob("nats-server.json"))
    data = json.loads(page.read_text())
    data["failures"][0]["level"] = "sometimes"
    data["versions"][0]["must"]["score"] = 2
    del data["strip"]
    page.write_text(json.dumps(data))
    problems = validate.problems(tmp_path)["impl/nats-server.json"]
    assert any("'sometimes' is not one of" in p for p in problems), problems
    assert any("2 is greater than the maximum of 1" in p for p in problems), problems
    assert any("'strip' is a required property" in p for p in problems), problems
