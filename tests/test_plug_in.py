"""Plugging a client in without editing the suite: a driver: program, a library built against a
local checkout (client:LIB@PATH), and a drivers directory from outside the package."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nats_conformance.harness import cli
from nats_conformance.harness.clients import client_specs, driver_builds, registry
from nats_conformance.harness.clients.client_specs import parse_client_spec
from nats_conformance.harness.clients.client_targets import open_client
from nats_conformance.harness.clients.driver import PROTOCOL
from nats_conformance.harness.clients.registry import ClientError
from nats_conformance.harness.console import FLAKY_MEANS
from nats_conformance.harness.results import read_rows
from nats_conformance.harness.runtime import state

BUNDLED = Path(__file__).resolve().parents[1] / "vectors"
CASES = ("headers.parse.doc.adr4-one-header", "headers.parse.doc.adr4-multi-value")
# A protocol-2 driver of a library "acme-nats" 0.3.1 whose only capability is its header
# parser (a plain split, right for the CASES); every other command is unsupported. Given a file
# name that does not exist yet, its first decode creates the file and loses the headers (a
# flaky library: wrong once, right when asked again).
FAKE_DRIVER = f"""
import base64, json, os, sys
def out(obj):
    sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
    request = json.loads(line)
    rid, cmd = request["id"], request["cmd"]
    if cmd == "hello":
        out({{"id": rid, "ok": True, "result": {{"protocol": "{PROTOCOL}", "library": "acme-nats",
             "version": "0.3.1", "language": "Python", "capabilities": ["decode_headers"]}}}})
    elif cmd == "decode_headers":
        lines = base64.b64decode(request["block_b64"]).decode().split("\\r\\n")[1:-2]
        headers = [line.split(": ", 1) for line in lines]
        if sys.argv[1:] and not os.path.exists(sys.argv[1]):
            open(sys.argv[1], "w").close()
            headers = []
        out({{"id": rid, "ok": True,
             "result": {{"status": None, "description": None, "headers": headers}}}})
    elif cmd == "exit":
        out({{"id": rid, "ok": True, "result": {{}}}}); break
    else:
        out({{"id": rid, "ok": False, "error": {{"type": "unsupported", "message": cmd}}}})
"""


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A state dir of the test's own, a registry the test may extend (as it was after the
    test), no outside drivers."""
    monkeypatch.setattr(state, "DEFAULT_STATE_DIR", tmp_path / "state")
    monkeypatch.delenv(registry.DRIVERS_ENV, raising=False)
    tables = (registry.LIBRARIES, registry.STREAMING_LIBRARIES)
    saved = [dict(table) for table in tables]
    yield
    for table, entries in zip(tables, saved, strict=True):
        table.clear()
        table.update(entries)


@pytest.fixture
def fake_driver(tmp_path: Path) -> Path:
    path = tmp_path / "acme driver.py"  # a space: the spec quotes it as a shell would
    path.write_text(FAKE_DRIVER)
    return path


@pytest.fixture
def vectors_dir(tmp_path: Path) -> Path:
    """A directory with two client-role headers.parse vectors copied from the bundled ones."""
    group = json.loads((BUNDLED / "headers-parse.json").read_text())
    group["cases"] = [case for case in group["cases"] if case["id"] in CASES]
    assert len(group["cases"]) == len(CASES)
    directory = tmp_path / "vectors"
    directory.mkdir()
    (directory / "headers-parse.json").write_text(json.dumps(group))
    return directory


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def run(vectors: Path, results: Path, *options: str) -> int:
    return cli.main(
        ["run", "--vectors", str(vectors), "--results", str(results), "--no-report", *options]
    )


def decode_rows(results: Path) -> dict[str, tuple[str, str, str]]:
    """case id -> (target, version, outcome) of the decode rows in a results file."""
    return {
        row.case_id.removesuffix("@decode"): (row.target, row.target_version, row.outcome)
        for row in read_rows(results)
        if row.case_id.endswith("@decode")
    }


# --- driver:COMMAND ------------------------------------------------------------------------------


def test_a_driver_program_runs_the_vectors_like_a_bundled_library(
    fake_driver: Path, vectors_dir: Path, tmp_path: Path
) -> None:
    spec = f"driver:{sys.executable} '{fake_driver}'"
    results = tmp_path / "results.jsonl"
    assert run(vectors_dir, results, "--client", spec) == 0
    assert decode_rows(results) == {case: (spec, "0.3.1", "pass") for case in CASES}
    # The other path of these cases needs a capability the hello does not declare: skipped.
    skipped = [row for row in read_rows(results) if row.case_id.endswith("@hmsg")]
    assert skipped and all(row.outcome == "skip" for row in skipped)
    assert not (tmp_path / "state" / "drivers").exists()  # nothing was built


def test_a_client_case_failing_once_is_run_again_and_reported_flaky(
    fake_driver: Path, vectors_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    marker, summary = tmp_path / "decoded-once", tmp_path / "summary.md"
    spec = f"driver:{sys.executable} '{fake_driver}' '{marker}'"
    one = ("--client", spec, "--case", CASES[0])
    # Not run again (the default runs a gating failure once more): the first answer gates.
    assert run(vectors_dir, tmp_path / "once.jsonl", *one, "--rerun-failures", "0") == 1
    assert decode_rows(tmp_path / "once.jsonl")[CASES[0]][2] == "fail"
    marker.unlink()
    again = ("--rerun-failures", "1", "--summary-md", str(summary))
    assert run(vectors_dir, tmp_path / "again.jsonl", *one, *again) == 0
    [row] = [r for r in read_rows(tmp_path / "again.jsonl") if r.case_id == f"{CASES[0]}@decode"]
    assert row.outcome == "pass" and row.message.startswith("flaky: passed on attempt 2 after ")
    out = capsys.readouterr().out
    assert f"1 {FLAKY_MEANS}:" in out
    assert "beyond the baseline ran up to 1 more time(s): 1 passed on a rerun (flaky)" in out
    [line] = [line for line in summary.read_text().splitlines() if line.startswith("| driver:")]
    # pass, fail, error, skip, baselined, flaky: the case's hmsg row over each transport skips
    # (the driver declares neither headers nor any transport's capability).
    assert line.endswith("| 0.3.1 | 0 | 0 | 0 | 6 | 0 | 1 |")


def test_a_driver_program_takes_its_library_from_hello(fake_driver: Path) -> None:
    with open_client(f"driver:{sys.executable} '{fake_driver}'") as client:
        assert client.version == "unknown"
        process = client.driver()
        assert (client.library, client.version) == ("acme-nats", "0.3.1")
        reason = client.lacks("headers")
        assert reason == "acme-nats 0.3.1 lacks headers (its driver's hello says so)"
        with pytest.raises(ClientError, match="no build"):
            client.build()
    assert gone(process.pid)


def test_an_executable_path_with_spaces_is_one_program(fake_driver: Path) -> None:
    fake_driver.write_text(f"#!{sys.executable}\n{FAKE_DRIVER}")
    fake_driver.chmod(0o755)
    parsed = parse_client_spec(f"driver:{fake_driver}")
    assert parsed.command == (str(fake_driver),)
    with open_client(f"driver:{fake_driver}") as client:
        client.driver()
        assert client.library == "acme-nats"


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("/no/such/driver --flag", "no program '/no/such/driver'"),
        ("no-such-driver-program", "no program 'no-such-driver-program'"),
        ("", "no command after driver:"),
        ("python3 'unclosed", "cannot split the command"),
    ],
)
def test_a_missing_driver_program_stops_the_run_before_it_starts(
    command: str, reason: str, vectors_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    results = tmp_path / "results.jsonl"
    assert run(vectors_dir, results, "--client", f"driver:{command}") == 2
    assert reason in capsys.readouterr().err
    assert not results.exists()


def test_a_driver_program_that_does_not_answer_hello_stops_the_run(
    vectors_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    results = tmp_path / "results.jsonl"
    assert run(vectors_dir, results, "--client", "driver:true", "--dry-run") == 2
    assert "does not answer hello" in capsys.readouterr().err


# --- client:LIB@PATH -----------------------------------------------------------------------------


def nats_py_checkout(root: Path, version: str) -> Path:
    """A checkout of nats-py: the installed package's sources and a minimal pyproject."""
    import nats

    checkout = root / "nats.py"
    shutil.copytree(
        Path(nats.__file__).parent, checkout / "nats", ignore=shutil.ignore_patterns("__pycache__")
    )
    write_pyproject(checkout, version)
    (checkout / ".git").mkdir()  # VCS data: not part of the checkout's digest
    return checkout


def write_pyproject(checkout: Path, version: str) -> None:
    (checkout / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "nats-py"\nversion = "{version}"\n'
        '[tool.setuptools.packages.find]\ninclude = ["nats*"]\n'
    )


def test_nats_py_builds_against_a_checkout_and_again_when_it_changes(tmp_path: Path) -> None:
    checkout = nats_py_checkout(tmp_path, "2.16.0+local.1")
    spec = f"client:nats-py@{checkout}"
    with open_client(spec) as client:
        assert client.version == "unknown"  # a checkout's version is what its driver loads
        client.driver()
        assert client.version == "2.16.0+local.1"
        out = client.build()
    built = (out / "run").stat().st_mtime_ns
    (checkout / ".git" / "HEAD").write_text("ref: refs/heads/main\n")  # not a change
    (checkout / "nats" / "__pycache__").mkdir(exist_ok=True)
    with open_client(spec) as client:
        client.driver()
        assert client.build() == out and (out / "run").stat().st_mtime_ns == built
    write_pyproject(checkout, "2.16.0+local.2")
    with open_client(spec) as client:
        client.driver()
        assert client.version == "2.16.0+local.2"
        assert client.build() == out  # the same OUT_DIR, rebuilt


def test_a_checkout_digest_skips_vcs_and_build_outputs(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("a")
    before = driver_builds.checkout_digest(tmp_path)
    for skipped in (".git", "node_modules", "build", "x.egg-info", "__pycache__"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "f").write_text("output")
    assert driver_builds.checkout_digest(tmp_path) == before
    (tmp_path / "src" / "a.py").write_text("b")
    assert driver_builds.checkout_digest(tmp_path) != before


def test_a_checkout_too_large_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_builds, "CHECKOUT_MAX_FILES", 2)
    for name in "abc":
        (tmp_path / name).write_text(name)
    with pytest.raises(ClientError, match="more than 2 files"):
        driver_builds.checkout_digest(tmp_path)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("client:nats.c@{tmp}", "the nats.c driver cannot build against a local checkout"),
        ("client:nats-py==2.16.0@{tmp}", "without ==<version>"),
        ("container:client:nats-py@{tmp}", "on the host only"),
        ("client:nats-py@{tmp}/missing", "is not a directory"),
    ],
)
def test_bad_checkout_specs_say_why(spec: str, reason: str, tmp_path: Path) -> None:
    with pytest.raises(ClientError) as raised:
        parse_client_spec(spec.format(tmp=tmp_path))
    assert reason in str(raised.value)
    # Those that can, by name (the registry reads the driver directories in order).
    assert "async-nats, jnats, nats-py, nats.go, nats.js, nats.js-v3" in str(raised.value)


# --- drivers directories from outside ------------------------------------------------------------


def outside_drivers(root: Path, fake_driver: Path, entry: object) -> Path:
    """A drivers directory with one library, acme-nats, whose build.sh writes a run script
    starting the fake driver."""
    folder = root / "team-drivers" / "acme-nats"
    folder.mkdir(parents=True)
    (folder / "library.json").write_text(json.dumps(entry))
    (folder / "build.sh").write_text(
        "set -eu\nPINNED_VERSION=0.3.1\n"
        f'printf \'#!/bin/sh\\nexec {sys.executable} "%s"\\n\' "{fake_driver}" > "$2/run"\n'
        'chmod +x "$2/run"\n'
    )
    return folder.parent


@pytest.fixture
def team_drivers(tmp_path: Path, fake_driver: Path) -> Path:
    return outside_drivers(tmp_path, fake_driver, {"registry": "acme's own", "tools": ["sh"]})


def test_an_outside_drivers_dir_extends_the_registry(team_drivers: Path) -> None:
    assert registry.extend_registry([team_drivers]) == ["acme-nats"]
    assert "acme-nats" in client_specs.accepted_forms()
    assert ("client:acme-nats", "0.3.1") in registry.available_clients()
    with open_client("client:acme-nats") as client:
        assert client.version == "0.3.1"  # the pin in its build.sh
        client.driver()
        assert client.capabilities == {"decode_headers"}
        assert client.build().parent == state.DEFAULT_STATE_DIR / "drivers"
    assert registry.extend_registry([team_drivers]) == ["acme-nats"]  # again: the same entry


def test_the_run_takes_drivers_dirs_from_the_environment(
    team_drivers: Path,
    vectors_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(registry.DRIVERS_ENV, str(team_drivers))
    results = tmp_path / "results.jsonl"
    assert run(vectors_dir, results, "--client", "client:acme-nats") == 0
    assert decode_rows(results) == {case: ("client:acme-nats", "0.3.1", "pass") for case in CASES}


def test_the_run_takes_a_drivers_dir_option(
    team_drivers: Path, vectors_dir: Path, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    options = ("--client", "client:acme-nats", "--drivers-dir", str(team_drivers))
    assert run(vectors_dir, results, *options) == 0
    assert set(decode_rows(results)) == set(CASES)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"tools": ["sh"]}, 'needs {"registry": TEXT}'),
        ({"registry": "x", "tools": "sh"}, "lists of text"),
        ("not an object", 'needs {"registry": TEXT}'),
    ],
)
def test_a_wrong_library_json_is_a_usage_error(
    entry: object,
    reason: str,
    fake_driver: Path,
    vectors_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    drivers = outside_drivers(tmp_path, fake_driver, entry)
    results = tmp_path / "results.jsonl"
    options = ("--client", "client:acme-nats", "--drivers-dir", str(drivers))
    assert run(vectors_dir, results, *options) == 2
    assert reason in capsys.readouterr().err


def test_an_outside_library_cannot_take_a_bundled_name(team_drivers: Path) -> None:
    (team_drivers / "acme-nats").rename(team_drivers / "nats-py")
    with pytest.raises(ClientError, match="'nats-py' is already registered"):
        registry.extend_registry([team_drivers])


def test_a_missing_drivers_dir_is_a_client_error(tmp_path: Path) -> None:
    with pytest.raises(ClientError, match="is not a directory"):
        registry.extend_registry([tmp_path / "nowhere"])
