"""Older vector files keep working: a format-1 or format-2 file, or a format-3 file written
before cases cited statements, means what it meant. The fixtures in ``vector_formats/`` are cases
of the suite's own files as they were then (format 1: one file per kind it had; format 2: wire
scripts with what it added; format 3: the three kinds it added), none naming ``requirements``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_command import CLI

from nats_conformance.conformance import levels, requirements, vectors
from nats_conformance.harness.servers import runner

FIXTURES = Path(__file__).parent / "vector_formats"
FILES = sorted(FIXTURES.glob("*.json"))
LOADED = vectors.load_all([FIXTURES])
# The kinds format 1 had; format 3 added the rest of the schema's.
FORMAT_1_KINDS = {
    "protocol.parse", "protocol.encode", "protocol.session", "headers.parse", "headers.encode",
    "headers.op", "subject.validate", "subject.tokens", "subject.match", "name.validate",
    "streaming.encode", "streaming.decode", "streaming.subject",
}  # fmt: skip
FORMAT_3_KINDS = {"client.script", "interop", "streaming.client", "streaming.server"}
# Kinds format 3 gained after these fixtures were written (the fixtures hold none).
LATER_KINDS = {"frames.layout"}


def _format(path: Path) -> str:
    return str(json.loads(path.read_text())["format"])


def test_the_fixtures_hold_a_format_1_file_of_each_kind_and_name_no_requirements() -> None:
    by_format: dict[str, set[str]] = {}
    for path in FILES:
        doc = json.loads(path.read_text())
        by_format.setdefault(doc["format"], set()).update(c["kind"] for c in doc["cases"])
        assert all("requirements" not in case for case in doc["cases"]), path.name
    assert by_format["nats-conformance-vectors/1"] == FORMAT_1_KINDS
    assert "nats-conformance-vectors/2" in by_format
    assert by_format["nats-conformance-vectors/3"] == FORMAT_3_KINDS
    schema_kinds = set(vectors.schema()["$defs"]["case"]["properties"]["kind"]["enum"])
    assert schema_kinds == FORMAT_1_KINDS | FORMAT_3_KINDS | LATER_KINDS


def test_an_older_file_loads_whole_with_a_note_and_cites_what_its_quotes_cite() -> None:
    assert LOADED.problems == []
    assert len(LOADED.cases) == sum(len(json.loads(p.read_text())["cases"]) for p in FILES)
    assert sorted(note.file for note in LOADED.notes) == [str(p) for p in FILES]  # one per file
    assert all(note.field == "requirements" for note in LOADED.notes)
    index = requirements.bundled_index()
    for case in LOADED.cases:
        assert case.data["requirements"] == requirements.derive_citations(case.data, index)
    assert any(case.data["requirements"] for case in LOADED.cases)


def test_derived_citations_are_those_the_bundled_case_cites_today() -> None:
    """The same case, same quote, in the bundled files: the same statements."""
    bundled = {case.id: case for case in vectors.bundled_cases()}
    compared = 0
    for case in LOADED.cases:
        now = bundled.get(case.id)
        if now is not None and now.data["source"] == case.data["source"]:
            assert case.data["requirements"] == now.data["requirements"], case.id
            compared += 1
    assert compared >= len(LOADED.cases) // 2


@pytest.mark.parametrize("case", LOADED.cases, ids=lambda case: case.id)
def test_the_reference_passes_an_older_case_at_its_level(case: vectors.Case) -> None:
    assert vectors.evaluate(case) is None
    index, statement_levels = requirements.bundled_index(), levels.bundled_levels()
    assert requirements.citation_problems(case, index) == []
    assert levels.case_problems(case, index, statement_levels) == []


def test_vectors_check_passes_older_files_with_notes() -> None:
    result = subprocess.run(
        [*CLI, "vectors", "check", str(FIXTURES)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout
    assert "FAIL" not in result.stdout
    notes = [line for line in result.stdout.splitlines() if line.startswith("NOTE ")]
    assert len(notes) == len(FILES)
    assert "case(s) name no requirements (written before cases cited statements)" in notes[0]
    assert f"{len(LOADED.cases)} passed, 0 failed" in result.stdout


def test_a_run_takes_an_older_file_s_server_cases() -> None:
    cases, loaded = runner.load_server_cases([FIXTURES])
    assert loaded.problems == []
    kinds = {case.kind for case in cases}
    assert {"protocol.session", "protocol.parse"} <= kinds
    assert any(_format(Path(case.file)) == "nats-conformance-vectors/2" for case in cases)
