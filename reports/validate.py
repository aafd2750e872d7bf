"""The JSON Schemas of the report's data files (in the top-level ``schemas/``), for others to
build on: ``implementations.json``, each implementation page's ``impl/<slug>.json``,
``coverage.json`` and ``behaviour.json``."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
SCHEMAS = {  # a report file (glob, relative to the report) -> its schema
    "implementations.json": "implementations.schema.json",
    "impl/*.json": "implementation.schema.json",
    "coverage.json": "coverage.schema.json",
    "behaviour.json": "behaviour.schema.json",
}


@cache
def _registry() -> Registry:
    resources = []
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def validator(schema_name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMA_DIR / schema_name).read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=_registry(), format_checker=cls.FORMAT_CHECKER)


def problems(report: Path) -> dict[str, list[str]]:
    """Each data file of the report in ``report`` that its schema refuses -> why (path: error).
    Returns the files checked, each with its problems (an empty list: valid)."""
    found: dict[str, list[str]] = {}
    for pattern, schema_name in SCHEMAS.items():
        check = validator(schema_name)
        for path in sorted(report.glob(pattern)):
            data: Any = json.loads(path.read_text(encoding="utf-8"))
            found[str(path.relative_to(report))] = [
                f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
                for e in check.iter_errors(data)
            ][:20]
    return found
