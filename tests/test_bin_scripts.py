"""The setup scripts' logic (bin/system-deps, bin/run, bin/test), each run for real on a copy of
itself whose neighbours (apt, the other scripts, the virtualenv's commands) are recording
stand-ins: what the scripts install, ask, start and remove is the behaviour under test, and none
of it may touch this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(__file__).resolve().parents[1] / "bin"
MAIN_JOB = [  # what bin/system-deps run lists when nothing is installed (nats-server aside)
    "python3", "python3-venv", "python3-pip", "docker.io", "libnats-dev", "libjansson-dev",
    "pkg-config", "golang-github-nats-io-go-nats-dev", "maven", "openjdk-17-jdk-headless", "npm",
]  # fmt: skip


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _bare_path(tmp_path: Path, uid: int) -> Path:
    """A PATH directory with none of the packages' commands: a failing dpkg, an id saying
    ``uid``, an apt-get that records its arguments, and only the shell tools the scripts use."""
    stubs = tmp_path / f"stubs-{uid}"
    if stubs.is_dir():
        return stubs
    _stub(stubs / "dpkg", "exit 1")
    _stub(stubs / "id", f"echo {uid}")
    _stub(stubs / "apt-get", f'echo "$*" >> "{tmp_path}/apt"')
    for tool in ("dirname", "grep", "head", "mkdir", "mktemp", "rm", "touch", "cat"):
        (stubs / tool).symlink_to(shutil.which(tool) or tool)
    return stubs


def _run(cmd: list[str], path: Path | str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", *cmd], env={"PATH": str(path), "HOME": "/nonexistent", **env},
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False,
    )  # fmt: skip


def _apt(tmp_path: Path) -> list[str]:
    log = tmp_path / "apt"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(not Path("/usr/sbin/nats-server").exists(), reason="lists nats-server too")
def test_system_deps_says_what_the_main_job_needs_and_why_then_installs_only_that(
    tmp_path: Path,
) -> None:
    run = _run([str(BIN / "system-deps"), "run"], _bare_path(tmp_path, 0))
    assert run.returncode == 0, run.stderr
    listed = [line.split(":")[0].strip() for line in run.stdout.splitlines() if line[:2] == "  "]
    assert listed == MAIN_JOB  # no browser: that is the tests'
    assert "  docker.io: a Docker engine for the container target" in run.stdout
    assert run.stdout.index("docker.io:") < run.stdout.index("apt-get install")  # said first
    assert _apt(tmp_path) == ["update -q", "install -y -q " + " ".join(MAIN_JOB)]


@pytest.mark.skipif(not Path("/usr/sbin/nats-server").exists(), reason="lists nats-server too")
def test_system_deps_for_the_tests_adds_the_browser_and_without_root_only_lists(
    tmp_path: Path,
) -> None:
    run = _run([str(BIN / "system-deps")], _bare_path(tmp_path, 1000))
    assert run.returncode == 0
    assert "  chromium: the report's browser check (tests only)" in run.stdout
    assert "not installed (that needs root and apt)" in run.stderr
    assert _apt(tmp_path) == []
    assert _run([str(BIN / "system-deps"), "--nope"], _bare_path(tmp_path, 0)).returncode == 2


@pytest.mark.skipif(not Path("/usr/sbin/nats-server").exists(), reason="lists nats-server too")
@pytest.mark.parametrize(("answer", "installs"), [("n", False), ("", True)])
def test_system_deps_asks_once_on_a_terminal(tmp_path: Path, answer: str, installs: bool) -> None:
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: the script on the terminal
        os.execve("/bin/bash", ["bash", str(BIN / "system-deps"), "run"],
                  {"PATH": str(_bare_path(tmp_path, 0))})  # fmt: skip
    os.write(fd, f"{answer}\n".encode())
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal closed: the script ended
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert out.decode().count("Install them with apt-get") == 1
    assert bool(_apt(tmp_path)) is installs


def _tree(tmp_path: Path, script: str, engine: str) -> Path:
    """A copy of bin/SCRIPT among recording stand-ins: the other scripts, the virtualenv's
    commands, and a docker-engine whose behaviour ``engine`` sets (answers, starts, fails)."""
    root = tmp_path / "clone"
    (root / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy2(BIN / script, root / "bin" / script)
    calls = tmp_path / "calls"
    for name in ("system-deps", "setup"):
        _stub(root / "bin" / name, f'echo "{name} $*" >> "{calls}"')
    said = 'echo "docker-engine $1 ${NATS_CONFORMANCE_DOCKER_DIR:-}"'
    _stub(root / "bin" / "docker-engine", f"""{said} >> "{calls}"
case "$1" in
env) [ -f "{tmp_path}/up" ] || exit 1; echo "export DOCKER_HOST=unix:///engine.sock" ;;
start) [ "{engine}" = fails ] && {{ echo "docker-engine: dockerd did not answer" >&2; exit 1; }}
       touch "{tmp_path}/up" ;;
stop) rm -f "{tmp_path}/up" ;;
esac""")  # fmt: skip
    if engine == "answers":
        (tmp_path / "up").touch()
    for name in ("nats-conformance", "ruff"):
        _stub(root / ".venv" / "bin" / name, f'echo "{name} $* $DOCKER_HOST" >> "{calls}"')
    made = 'mkdir "$TMPDIR/made"; exit $PYTEST_RC'
    _stub(root / ".venv" / "bin" / "python", f'echo "python $* $TMPDIR" >> "{calls}"; {made}')
    return root


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


@pytest.mark.parametrize("engine", ["starts", "answers"])
def test_run_gives_the_container_target_an_engine_and_stops_the_one_it_started(
    tmp_path: Path, engine: str
) -> None:
    root = _tree(tmp_path, "run", engine)
    stubs = _bare_path(tmp_path, 0)
    _stub(stubs / "dockerd", "exit 0")
    path = os.pathsep.join([str(stubs), "/usr/bin", "/bin"])
    run = _run([str(root / "bin" / "run"), "--yes", "-v", "--case", "x"], path)
    assert run.returncode == 0, run.stderr
    calls = _calls(tmp_path)
    assert calls[:2] == ["system-deps run --yes", "setup run -v"]
    assert "nats-conformance run --case x unix:///engine.sock" in calls
    stopped = "docker-engine stop " in calls
    assert stopped is (engine == "starts")  # an engine someone else runs is left alone
    assert calls[-1].startswith("docker-engine stop" if stopped else "nats-conformance run")


@pytest.mark.parametrize("why", ["fails", "not installed"])
def test_run_says_in_one_line_why_the_container_target_is_left_out(
    tmp_path: Path, why: str
) -> None:
    root = _tree(tmp_path, "run", why)
    path = _bare_path(tmp_path, 0)
    if why == "fails":
        _stub(path / "dockerd", "exit 0")
    run = _run([str(root / "bin" / "run")], path)
    assert run.returncode == 0, run.stderr
    [line] = run.stderr.splitlines()
    assert line.startswith("bin/run: the container target is left out: ")
    assert ("did not answer" if why == "fails" else "docker.io is not installed") in line
    assert _calls(tmp_path)[-1] == "nats-conformance run "


@pytest.mark.parametrize("inside", [True, False])
def test_bin_test_removes_what_it_made_in_the_temporary_directory(
    tmp_path: Path, inside: bool
) -> None:
    root = _tree(tmp_path, "test", "starts")
    temp = root / "tmp" if inside else tmp_path / "tmp"
    temp.mkdir()
    stubs = _bare_path(tmp_path, 0)
    _stub(stubs / "docker", "exit 0")  # no container left behind
    path = os.pathsep.join([str(stubs), str(Path(sys.executable).parent), "/bin"])
    run = _run([str(root / "bin" / "test"), "-k", "x"], path, TMPDIR=str(temp), PYTEST_RC="0")
    assert run.returncode == 0, run.stderr
    calls = _calls(tmp_path)
    assert calls[:2] == ["system-deps test", "setup test"]
    [pytest_call] = [c for c in calls if c.startswith("python -m pytest")]
    tests_tmp = Path(pytest_call.split()[-1])
    assert tests_tmp.is_relative_to(temp) and "--basetemp=" + str(tests_tmp.parent / "pytest") in (
        pytest_call
    )
    engine_dir = next(c for c in calls if c.startswith("docker-engine start")).split()[-1]
    assert calls[-1] == f"docker-engine stop {engine_dir}"
    assert list(temp.iterdir()) == [] and not Path(engine_dir).exists()
    # pytest's "collected nothing" is a failure, and the directory goes all the same
    run = _run([str(root / "bin" / "test")], path, TMPDIR=str(temp), PYTEST_RC="5")
    assert run.returncode == 1 and "collected no tests" in run.stderr
    assert list(temp.iterdir()) == []
