"""The bundled vectors, the format, and the checker's handling of bad vector files."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from cli_command import CLI

from nats_conformance.conformance import protocol, vector_kinds, vectors, wire_script

BUNDLED = vectors.load_all([vectors.BUNDLED_DIR])


def test_bundled_files_are_valid() -> None:
    assert BUNDLED.problems == []


def test_bundled_vectors_cover_every_rule_family() -> None:
    kinds = Counter(case.kind for case in BUNDLED.cases)
    assert len(BUNDLED.cases) >= 700
    assert set(kinds) == set(vector_kinds.KINDS)
    ops = {
        case.data["input"]["bytes"].split(" ")[0].split("\t")[0].upper()
        for case in BUNDLED.cases
        if case.kind == "protocol.parse" and isinstance(case.data["input"]["bytes"], str)
    }
    assert {"INFO", "CONNECT", "PUB", "HPUB", "SUB", "UNSUB", "MSG", "HMSG"} <= {
        o.split("\r")[0] for o in ops
    }


def test_every_case_cites_a_document_that_exists() -> None:
    spec = vectors.BUNDLED_DIR.parent.parent / "shared" / "spec"
    documents = {case.data["source"]["document"] for case in BUNDLED.cases}
    if spec.is_dir():
        assert all((spec / d).is_file() for d in documents)
    assert documents <= set(vectors.schema()["$defs"]["source"]["properties"]["document"]["enum"])


def test_wire_scripts_only_on_server_cases() -> None:
    # A server-role case reaches a server through its wire script, except name.validate: through
    # the JetStream API (harness/servers/jetstream_names.py), streaming.server: through a
    # streaming session with a stan: target (harness/servers/streaming_checks.py), and
    # frames.layout: through every protocol.parse case's wire script (harness/servers/runner.py).
    for case in BUNDLED.cases:
        other_way = case.kind in ("name.validate", "streaming.server", "frames.layout")
        through_wire = "server" in case.roles and not other_way
        assert ("wire" in case.data) == through_wire, case.id


@pytest.mark.parametrize("case", BUNDLED.cases, ids=lambda c: c.id)
def test_reference_passes_bundled_case(case: vectors.Case) -> None:
    problem = vectors.evaluate(case)
    assert problem is None, str(problem)


def test_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(vectors.schema())


def test_bytes_forms() -> None:
    assert vectors.decode_bytes("a\r\n") == b"a\r\n"
    assert vectors.decode_bytes({"base64": "/w=="}) == b"\xff"
    assert vectors.decode_bytes([{"repeat": "ab", "count": 3}, "c"]) == b"abababc"
    assert vectors.encode_bytes(b"\xff") == {"base64": "/w=="}
    with pytest.raises(vectors.BytesError) as info:
        vectors.decode_bytes(["x", {"base64": "%%"}], "input.bytes")
    assert info.value.path == "input.bytes[1].base64"


# --- bad vector files ---------------------------------------------------------------------------

GOOD_CASE = {
    "id": "t.ping",
    "description": "PING parses",
    "source": {"document": "client-protocol.txt", "section": "PING/PONG"},
    "requirements": ["client-protocol.ping-pong.5866ac60"],  # PING's syntax: must for both roles
    "level": "must",
    "roles": ["reference"],
    "kind": "protocol.parse",
    "input": {"direction": "client", "bytes": "PING\r\n"},
    "expect": {"events": [{"op": "PING"}]},
}


def _file(tmp_path: Path, name: str, cases: list[dict] | str) -> Path:
    path = tmp_path / name
    if isinstance(cases, str):
        path.write_text(cases)
    else:
        doc = {"format": vectors.FORMAT, "group": "t", "title": "t", "cases": cases}
        path.write_text(json.dumps(doc))
    return path


def _spec(directory: Path) -> Path:
    """A specification directory of one document, so the tests do not depend on ../shared."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "client-protocol.txt").write_text(
        "PING/PONG\n\nYou can also ping the server and will receive a pong reply.\n"
    )
    return directory


def _check(*paths: Path) -> subprocess.CompletedProcess[str]:
    spec = _spec(paths[0].parent / "spec")
    cmd = [*CLI, "vectors", "check", "--spec", str(spec),
           *map(str, paths)]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_check_passes_good_file_and_prints_counts(tmp_path: Path) -> None:
    result = _check(_file(tmp_path, "good.json", [GOOD_CASE]))
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[-1].startswith(
        "vectors check: 1 cases in 1 groups: 1 passed, 0 failed"
    )


@pytest.mark.parametrize(
    ("change", "case_id", "field", "words"),
    [
        ({"level": "required"}, "t.ping", "level", "is not one of"),
        ({"roles": []}, "t.ping", "roles", "should be non-empty"),
        (
            {"input": {"direction": "client", "bytes": {"base64": "%%"}}},
            "t.ping",
            "input.bytes",
            "",
        ),
        (
            {"input": {"direction": "up", "bytes": "PING\r\n"}},
            "t.ping",
            "input.direction",
            "is not one of",
        ),
        ({"expect": {"events": [{"op": "PONG"}]}}, "t.ping", "expect.events[0]", "expected"),
        ({"id": "Bad Id"}, "Bad Id", "id", "does not match"),
        (
            {
                "source": {
                    "document": "client-protocol.txt",
                    "section": "PING/PONG",
                    "quote": "A PING is never answered.",
                }
            },
            "t.other",
            "source.quote",
            "the quote is not in client-protocol.txt",
        ),
        (
            {"source": {"document": "rfc9999.txt", "section": "1"}},
            "t.other",
            "source.document",
            "is not one of",
        ),
    ],
)
def test_broken_case_is_named_by_file_case_and_field(
    tmp_path: Path, change: dict, case_id: str, field: str, words: str
) -> None:
    path = _file(tmp_path, "broken.json", [GOOD_CASE, {**GOOD_CASE, "id": "t.other", **change}])
    if "id" in change:
        path = _file(tmp_path, "broken.json", [{**GOOD_CASE, **change}])
    result = _check(path)
    assert result.returncode == 1
    fails = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    expected_case = case_id if "id" in change else "t.other"
    assert any(
        f"{path}" in f and f"case {expected_case}" in f and f"field {field}" in f and words in f
        for f in fails
    ), result.stdout


def test_a_quote_matches_its_document_whatever_its_whitespace(tmp_path: Path) -> None:
    quote = "You can also\n   ping the server and will receive a pong reply."
    source = {"document": "client-protocol.txt", "section": "PING/PONG", "quote": quote}
    cited = ["client-protocol.ping-pong.5b0e3b44"]  # the statement the quote is, once cited
    case = {**GOOD_CASE, "source": source, "requirements": cited}
    result = _check(_file(tmp_path, "good.json", [case]))
    assert result.returncode == 0, result.stdout


def test_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "bad.json", '{"format": "nats-conformance-vectors/1",\n "cases": [}')
    result = _check(path)
    assert result.returncode == 1
    assert f"FAIL {path}: invalid JSON at line 2" in result.stdout


def test_duplicate_ids_across_files_are_reported(tmp_path: Path) -> None:
    _file(tmp_path, "a.json", [GOOD_CASE])
    _file(tmp_path, "b.json", [GOOD_CASE])
    result = _check(tmp_path)
    assert result.returncode == 1
    assert "case t.ping: field id: duplicate case id" in result.stdout


def test_wire_script_is_checked_against_the_server_model(tmp_path: Path) -> None:
    case = {
        **GOOD_CASE,
        "roles": ["reference", "server"],
        "wire": {"exchanges": [{"send": "PING\r\n", "expect": [{"op": "PING"}], "then": "open"}]},
    }
    result = _check(_file(tmp_path, "wire.json", [case]))
    assert result.returncode == 1
    assert "case t.ping: field wire.exchanges[0].expect[0]" in result.stdout


def test_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    assert _check(tmp_path / "nope").returncode == 2


def test_a_broken_case_loses_only_itself(tmp_path: Path) -> None:
    tampered = {**GOOD_CASE, "id": "t.tampered", "expect": {"events": [{"op": "PONG"}]}}
    invalid = {**GOOD_CASE, "id": "t.invalid", "level": "required"}
    result = _check(_file(tmp_path, "mixed.json", [GOOD_CASE, invalid, tampered]))
    assert result.returncode == 1
    assert "case t.invalid: field level" in result.stdout
    assert "case t.tampered: field expect.events[0]" in result.stdout
    closing = result.stdout.splitlines()[-1]
    assert "2 cases in 1 groups: 1 passed, 1 failed, 1 file problems" in closing


def test_broken_file_structure_yields_no_cases(tmp_path: Path) -> None:
    path = tmp_path / "nogroup.json"
    path.write_text(json.dumps({"format": vectors.FORMAT, "title": "t", "cases": [GOOD_CASE]}))
    loaded = vectors.load_all([path])
    assert loaded.cases == []
    assert [(p.case, p.field) for p in loaded.problems] == [(None, None)]
    assert "'group' is a required property" in loaded.problems[0].message


def test_a_mismatch_quotes_a_bounded_excerpt_of_what_came() -> None:
    """A target answering with a 1 MB message cannot make a 1 MB failure message."""
    exchange = {"send": "PING\r\n", "expect": [{"op": "PONG"}], "then": "open"}
    huge = protocol.Msg("foo", "1", None, b"x" * (1 << 20))
    mismatch = wire_script.compare_exchange(exchange, 0, [huge, huge], False, "the server")
    assert mismatch is not None and len(str(mismatch)) < 4 * vectors.SHOWN
    assert "characters)" in str(mismatch)


def test_row_messages_are_bounded_with_size_and_digest() -> None:
    from nats_conformance.harness.results import MESSAGE_LIMIT, bounded

    text = "y" * (MESSAGE_LIMIT * 10)
    cut = bounded(text)
    assert len(cut) < MESSAGE_LIMIT + 100
    assert f"[{len(text)} characters, sha256 " in cut
    assert bounded("short") == "short"


def test_every_bundled_quote_is_its_documents_words() -> None:
    from nats_conformance.harness.commands.check import DEFAULT_SPEC, documents

    texts = documents(DEFAULT_SPEC)
    if texts is None:
        pytest.skip(f"no specification documents at {DEFAULT_SPEC}")
    cases = vectors.load_all([vectors.BUNDLED_DIR]).cases
    problems = [p for c in cases if (p := vectors.citation_problem(c, texts))]
    assert not problems, [str(p) for p in problems[:5]]


def test_schema_refuses_pattern_keys_outside_wire_expectations(tmp_path: Path) -> None:
    """``optional`` and ``matches`` belong to wire patterns; in a parse expectation they are
    schema problems naming the field, not silently ignored."""
    case = next(
        c for c in BUNDLED.cases if c.kind == "protocol.parse" and c.data["expect"]["events"]
    )
    data = json.loads(json.dumps(case.data))
    data["expect"]["events"][0]["optional"] = True
    doc = {"format": vectors.FORMAT, "group": case.group, "title": "t", "cases": [data]}
    path = _file(tmp_path, "bad.json", json.dumps(doc))
    problems = vectors.load_all([path]).problems
    assert problems and "optional" in problems[0].message
