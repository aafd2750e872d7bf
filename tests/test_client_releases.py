"""The client release series: `client:<library>==*` names each release in the library registry,
and the report pipeline sees the releases as versions of one implementation."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_command import CLI

from nats_conformance.harness.clients.client_specs import expand_series
from nats_conformance.harness.clients.registry import LIBRARIES, ClientError, pinned_version
from nats_conformance.reports.analysis import implementation, version_order

SERIES_LIBRARIES = [name for name, library in LIBRARIES.items() if library.releases]


def test_series_specs_expand_to_each_release_in_order() -> None:
    releases = LIBRARIES["nats-py"].releases
    assert expand_series(["client:nats.go", "client:nats-py==*", "client:nats-py==2.1.0"]) == [
        "client:nats.go",
        *(f"client:nats-py=={release}" for release in releases),
        "client:nats-py==2.1.0",
    ]


def test_a_container_series_keeps_its_prefix() -> None:
    expanded = expand_series(["container:client:nats.go==*"])
    assert expanded == [f"container:client:nats.go=={r}" for r in LIBRARIES["nats.go"].releases]


@pytest.mark.parametrize("spec", ["client:jnats==*", "client:no-such-library==*"])
def test_a_library_without_a_series_is_refused(spec: str) -> None:
    with pytest.raises(ClientError, match="no release series"):
        expand_series([spec])


def test_the_series_covers_nats_py_nats_js_and_nats_go() -> None:
    assert {"nats-py", "nats.js", "nats.go"} <= set(SERIES_LIBRARIES)


@pytest.mark.parametrize("library", SERIES_LIBRARIES)
def test_a_series_rises_to_the_pinned_version(library: str) -> None:
    releases = LIBRARIES[library].releases
    assert len(releases) >= 4
    assert sorted(releases, key=version_order) == list(releases)
    assert len(set(releases)) == len(releases)
    assert releases[-1] == pinned_version(library)


@pytest.mark.parametrize("library", SERIES_LIBRARIES)
def test_the_releases_of_a_series_are_one_implementation(library: str) -> None:
    specs = expand_series([f"client:{library}==*", f"client:{library}"])
    assert {implementation(spec) for spec in specs} == {f"client:{library}"}


def _dry_run(spec: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [*CLI, "run", "--dry-run", "--no-report", "--client", spec]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_run_takes_a_series_as_one_target_per_release(tmp_path: Path) -> None:
    run = _dry_run("client:nats.go==*", tmp_path)
    assert run.returncode == 0, run.stderr
    # Each client's rows, the clients in order, then the pairs of the interop matrix.
    *rows, total = run.stdout.splitlines()
    targets = list(dict.fromkeys(line.split("\t")[0] for line in rows))
    listed = [target for target in targets if "->" not in target]
    assert listed == [f"client:nats.go=={r}" for r in LIBRARIES["nats.go"].releases]
    assert len(targets) == len(listed) + len(listed) ** 2  # every ordered pair
    assert total == f"{len(rows)} rows in {len(listed) + 1} suites"


def test_run_refuses_a_series_a_library_does_not_have(tmp_path: Path) -> None:
    run = _dry_run("client:jnats==*", tmp_path)
    assert run.returncode == 2
    assert "no release series for 'jnats'" in run.stderr
