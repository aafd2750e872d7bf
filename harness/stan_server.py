"""The real NATS Streaming server as a target: nats-streaming-server built from the Go module
proxy into the cache, launched bound to 127.0.0.1 and stopped by its PID.

A spec is ``stan:nats-streaming-server`` (the pinned release) or
``stan:nats-streaming-server==X.Y.Z``. The build (``go install``) runs once per release into
DEFAULT_STATE_DIR/drivers/nats-streaming-server-X.Y.Z/, under a lock shared by every process
using the cache. A launched server gets a pid file and a run directory named after its owner, as
harness.targets' servers do, so cleanup_leftovers() stops and removes what a killed run left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness import targets
from harness.targets import STOP_GRACE, TargetError

PREFIX = "stan:"
NAME = "nats-streaming-server"
MODULE = "github.com/nats-io/nats-streaming-server"
PINNED = "0.25.6"
DEFAULT_SPEC = f"{PREFIX}{NAME}"
TARGET_KIND = "stan"  # the target_kind of its rows
BUILD_TIMEOUT = 900.0  # seconds a cold `go install` may take (about one minute here)
READY_TIMEOUT = 20.0  # seconds from launch to "Streaming Server is ready"
MARKER = ".nats-conformance-build.json"
_SPEC = re.compile(rf"{re.escape(PREFIX)}{NAME}(?:==([0-9]+\.[0-9]+\.[0-9]+))?")
_READY = "Streaming Server is ready"
_LISTENING = re.compile(r"Listening for client connections on 127\.0\.0\.1:([0-9]+)")
_VERSION = re.compile(r"nats-streaming-server version ([0-9][^\s,]*)")


class StanServerError(TargetError):
    """The streaming server cannot be built or started; str(e) says why."""


def is_spec(spec: str) -> bool:
    return spec.strip().startswith(PREFIX)


def parse_spec(spec: str) -> str:
    """The release a ``stan:`` spec names; StanServerError for any other form."""
    found = _SPEC.fullmatch(spec.strip())
    if found is None:
        raise StanServerError(
            f"bad target {spec!r}: use {DEFAULT_SPEC} or {DEFAULT_SPEC}==X.Y.Z (e.g. {PINNED})"
        )
    return found.group(1) or PINNED


def go_missing() -> str | None:
    """Why this machine cannot build the server (None when it can)."""
    if shutil.which("go") is None:
        return "Go is not installed (no `go` on PATH; /usr/local/go/bin is a usual place)"
    return None


def build(version: str = PINNED, state_dir: Path | None = None) -> Path:
    """The server binary of ``version``: built with ``go install`` on first use, then reused.
    Builds of one release are serialized across processes."""
    if problem := go_missing():
        raise StanServerError(f"{NAME} is built from the Go module proxy: {problem}")
    drivers = (state_dir or targets.DEFAULT_STATE_DIR) / "drivers"
    out = drivers / f"{NAME}-{version}"
    binary, marker = out / NAME, out / MARKER
    wanted = hashlib.sha256(f"{MODULE}@v{version}".encode()).hexdigest()
    with targets._locked(drivers / f".{out.name}.lock"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            if json.loads(marker.read_text())["hash"] == wanted and binary.is_file():
                return binary
        marker.unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        log = drivers / f"{out.name}.build.log"
        seconds = _go_install(version, out, log)
        if not os.access(binary, os.X_OK):
            raise StanServerError(
                f"go install wrote no {binary}; the end of {log}:\n{targets._log_tail(log)}"
            )
        marker.write_text(json.dumps({"hash": wanted, "version": version, "seconds": seconds}))
    return binary


def build_seconds(version: str = PINNED, state_dir: Path | None = None) -> float | None:
    """How long the cached build of ``version`` took (None if unknown)."""
    marker = (state_dir or targets.DEFAULT_STATE_DIR) / "drivers" / f"{NAME}-{version}" / MARKER
    with contextlib.suppress(OSError, ValueError, KeyError):
        return float(json.loads(marker.read_text())["seconds"])
    return None


def _go_install(version: str, out: Path, log: Path) -> float:
    """Run ``go install MODULE@vVERSION`` into ``out``; the seconds it took."""
    env = os.environ | {"GOBIN": str(out), "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    argv = ["go", "install", "-trimpath", f"{MODULE}@v{version}"]
    started = time.monotonic()
    with log.open("wb") as output:
        output.write(f"$ GOBIN={out} {' '.join(argv)}\n".encode())
        output.flush()
        try:
            proc = targets._SPAWNER.popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=out,
                start_new_session=True,  # a timeout stops the whole build
                close_fds=True,
            )
        except OSError as exc:
            raise StanServerError(f"cannot run go: {exc}") from None
        try:
            status = proc.wait(BUILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            status = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever the build left running
            proc.wait()
    seconds = time.monotonic() - started
    if status != 0:
        problem = f"exit status {status}" if status is not None else "it timed out"
        raise StanServerError(
            f"building {NAME} {version} failed ({problem}) after {seconds:.0f} s; "
            f"the end of its log ({log}):\n{targets._log_tail(log)}"
        )
    return seconds


def binary_version(binary: Path) -> str:
    """The release a nats-streaming-server binary reports with --version."""
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StanServerError(f"cannot run {binary} --version: {exc}") from None
    found = _VERSION.search(done.stdout + done.stderr)
    if found is None:
        raise StanServerError(f"{binary} --version names no version: {done.stdout!r}")
    return found.group(1)


@dataclass(frozen=True)
class RunningStan:
    """A launched streaming server: its embedded NATS server's URL and its cluster id."""

    url: str
    host: str
    port: int
    cluster_id: str
    pid: int
    log_path: Path


class StanServerTarget:
    """One release of nats-streaming-server: built on open, servers launched on demand."""

    def __init__(self, spec: str = DEFAULT_SPEC, *, state_dir: Path | None = None) -> None:
        self.name = spec.strip()
        self.kind = TARGET_KIND
        self._state_dir = state_dir or targets.DEFAULT_STATE_DIR
        self.binary = build(parse_spec(spec), self._state_dir)
        self._version = binary_version(self.binary)

    def version(self) -> str:
        return self._version

    @contextlib.contextmanager
    def launch(self, cluster_id: str) -> Iterator[RunningStan]:
        """A fresh server (file store in its own run directory); stopped by PID on exit."""
        owner_pid, owner_start = targets._owner()
        run_dir = self._state_dir / "runs" / f"{owner_pid}-{owner_start}-{uuid.uuid4().hex[:8]}"
        run_dir.mkdir(parents=True)
        log = run_dir / "server.log"
        argv = [
            str(self.binary),
            *("-a", "127.0.0.1", "-p", "-1", "-cid", cluster_id),
            *("-st", "FILE", "--dir", str(run_dir / "store"), "-l", str(log)),
        ]
        pids = self._state_dir / "pids"
        pids.mkdir(parents=True, exist_ok=True)
        try:
            with log.open("ab") as early_output:
                proc = targets._SPAWNER.popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=early_output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as exc:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise StanServerError(f"cannot run {self.binary}: {exc}") from None
        pid_file = pids / f"{proc.pid}.json"
        try:
            targets._write_pid_file(pid_file, proc.pid, self.binary, argv)
            port = _await_ready(log, proc)
            yield RunningStan(
                f"nats://127.0.0.1:{port}", "127.0.0.1", port, cluster_id, proc.pid, log
            )
        finally:
            targets.stop_process(proc, STOP_GRACE)
            pid_file.unlink(missing_ok=True)
            shutil.rmtree(run_dir, ignore_errors=True)


def _await_ready(log: Path, proc: subprocess.Popen[bytes]) -> int:
    """The client port, once the log says the streaming server is ready."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        with contextlib.suppress(OSError):
            text = log.read_text(errors="replace")
            port = _LISTENING.search(text)
            if port is not None and _READY in text:
                return int(port.group(1))
        code = proc.poll()
        if code is not None or time.monotonic() > deadline:
            problem = f"exited with status {code}" if code is not None else "was not ready"
            raise StanServerError(
                f"{NAME} (pid {proc.pid}) {problem} within {READY_TIMEOUT:g} s; "
                f"the end of its log:\n{targets._log_tail(log)}"
            )
        time.sleep(0.02)


def open_target(spec: str = DEFAULT_SPEC, *, state_dir: Path | None = None) -> StanServerTarget:
    """Resolve ``spec`` (building on first use); first stops what killed runs left behind."""
    targets.cleanup_leftovers(state_dir)
    return StanServerTarget(spec, state_dir=state_dir)
