"""The index of the documents' normative statements and the cases' citations of it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
from cli_command import CLI

from nats_conformance.conformance import requirements, vectors

SPEC = requirements.DEFAULT_SPEC
DOC = (
    "PING/PONG\n\nThe server will send a PING.\nYou can also ping the server and will\n"
    "receive a pong reply.\n\nPING␍␊\n\n+OK/ERR\n\n• -ERR 'Parser Error': Cannot parse it\n"
)
needs_spec = pytest.mark.skipif(not SPEC.is_dir(), reason=f"no specification set at {SPEC}")


def test_statements_of_a_document() -> None:
    found = requirements.statements("client-protocol.txt", DOC)
    assert [(s.section, s.kind, s.words) for s in found] == [
        ("PING/PONG", "requirement", "The server will send a PING."),
        ("PING/PONG", "requirement", "You can also ping the server and will receive a pong reply."),
        ("PING/PONG", "syntax", "PING␍␊"),
        ("+OK/ERR", "error", "• -ERR 'Parser Error': Cannot parse it"),
    ]
    assert found[0].id == requirements.statement_id(
        "client-protocol.txt", "PING/PONG", found[0].words
    )
    assert found[0].id.startswith("client-protocol.ping-pong.")


def test_ids_are_stable_under_whitespace_changes() -> None:
    reflowed = DOC.replace(" ", "  \t").replace("\n", " \n")
    ids = [s.id for s in requirements.statements("client-protocol.txt", DOC)]
    assert [s.id for s in requirements.statements("client-protocol.txt", reflowed)] == ids
    changed = DOC.replace("will send", "must send")
    changed_ids = [s.id for s in requirements.statements("client-protocol.txt", changed)]
    assert changed_ids[0] != ids[0] and changed_ids[1:] == ids[1:]


def test_changes_name_moved_gone_and_new_statements() -> None:
    old = requirements.build_index({"client-protocol.txt": DOC})
    moved = DOC.replace("+OK/ERR", "Errors").replace("The server will send a PING.", "x will y.")
    lines = requirements.index_changes(
        old, requirements.build_index({"client-protocol.txt": moved})
    )
    assert [line.split()[0] for line in lines] == ["gone", "moved", "new"]
    assert "'Errors'" in lines[1]


@needs_spec
def test_bundled_index_is_the_generators_output_and_valid() -> None:
    quotes = requirements.bundled_quotes()
    index = requirements.build_index(requirements.read_documents(SPEC), quotes)
    assert index == requirements.build_index(requirements.read_documents(SPEC), quotes)
    assert index == json.loads(requirements.INDEX_PATH.read_text(encoding="utf-8"))
    schema = json.loads((vectors.SCHEMA_PATH.parent / "requirements.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(index)
    ids = [s["id"] for s in index["statements"]]
    assert len(ids) == len(set(ids))


def test_bundled_citations_are_the_derived_ones() -> None:
    index = requirements.bundled_index()
    for path in vectors.vector_files([vectors.BUNDLED_DIR]):
        text = path.read_text(encoding="utf-8")
        derived = [requirements.derive_citations(c, index) for c in json.loads(text)["cases"]]
        assert requirements.with_citations(text, derived) == text, path.name


def test_with_citations_sets_and_replaces() -> None:
    text = '{"cases": [\n  {"id": "a", "source": {"document": "d"}, "level": "must"}\n]}'
    once = requirements.with_citations(text, [["x.y.0000000a"]])
    assert json.loads(once)["cases"][0]["requirements"] == ["x.y.0000000a"]
    assert requirements.with_citations(once, [[]]) == requirements.with_citations(text, [[]])


def _check(tmp_path: Path, case: dict) -> subprocess.CompletedProcess[str]:
    doc = {"format": vectors.FORMAT, "group": "t", "title": "t", "cases": [case]}
    (tmp_path / "t.json").write_text(json.dumps(doc))
    cmd = [*CLI, "vectors", "check", str(tmp_path / "t.json")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


CASE = {
    "id": "t.ping",
    "description": "PING parses",
    "source": {
        "document": "client-protocol.txt",
        "section": "PING/PONG",
        "quote": "You can also ping the server and will receive a pong reply.",
    },
    "requirements": ["client-protocol.ping-pong.5b0e3b44"],
    "level": "must",
    "roles": ["reference"],
    "kind": "protocol.parse",
    "input": {"direction": "client", "bytes": "PING\r\n"},
    "expect": {"events": [{"op": "PING"}]},
}


def test_check_fails_a_citation_that_does_not_exist(tmp_path: Path) -> None:
    assert _check(tmp_path, CASE).returncode == 0
    bad = CASE | {"requirements": [*CASE["requirements"], "client-protocol.ping-pong.00000000"]}
    result = _check(tmp_path, bad)
    assert result.returncode == 1
    assert (
        f"FAIL {tmp_path / 't.json'}: case t.ping: field requirements[1]: "
        "no statement 'client-protocol.ping-pong.00000000' in the index"
    ) in result.stdout


def test_check_fails_a_case_that_cites_nothing_its_quote_cites(tmp_path: Path) -> None:
    result = _check(tmp_path, CASE | {"requirements": []})
    assert result.returncode == 1
    assert "case t.ping: field requirements: cites nothing, but its quote cites " in result.stdout


def test_a_case_naming_no_requirements_cites_what_its_quote_cites(tmp_path: Path) -> None:
    """A file written before cases cited statements: a note, not a failure."""
    result = _check(tmp_path, {k: v for k, v in CASE.items() if k != "requirements"})
    assert result.returncode == 0, result.stdout
    assert "field requirements: 1 case(s) name no requirements" in result.stdout
    (case,) = vectors.load_all([tmp_path / "t.json"]).cases
    assert case.data["requirements"] == CASE["requirements"]
