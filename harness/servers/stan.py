"""The real NATS Streaming server as a target: nats-streaming-server built from the Go module
proxy into the cache, launched bound to 127.0.0.1 and stopped by its PID.

A spec is ``stan:nats-streaming-server`` (the pinned release) or
``stan:nats-streaming-server==X.Y.Z``. The build (``go install``) runs once per release into
DEFAULT_STATE_DIR/drivers/nats-streaming-server-X.Y.Z/ (harness.runtime.builds). A launched
server gets a pid file and a run directory named after its owner (harness.runtime.processes),
so cleanup_leftovers() stops and removes what a killed run left.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..runtime import builds, processes
from ..runtime.leftovers import cleanup_leftovers
from ..runtime.state import DEFAULT_STATE_DIR
from . import launch
from .specs import TargetError

PREFIX = "stan:"
NAME = "nats-streaming-server"
MODULE = "github.com/nats-io/nats-streaming-server"
PINNED = "0.25.6"
DEFAULT_SPEC = f"{PREFIX}{NAME}"
TARGET_KIND = "stan"  # the target_kind of its rows
BUILD_TIMEOUT = 900.0  # seconds a cold `go install` may take (about one minute here)
READY_TIMEOUT = 20.0  # seconds from launch to "Streaming Server is ready"
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


def build(version: str = PINNED, state_dir: Path | None = None) -> Path:
    """The server binary of ``version``: built with ``go install`` on first use, then reused."""
    try:
        return builds.go_install(MODULE, version, _out_dir(version, state_dir), NAME, BUILD_TIMEOUT)
    except builds.BuildError as exc:
        raise StanServerError(str(exc)) from None


def _out_dir(version: str, state_dir: Path | None) -> Path:
    return (state_dir or DEFAULT_STATE_DIR) / "drivers" / f"{NAME}-{version}"


def build_seconds(version: str = PINNED, state_dir: Path | None = None) -> float | None:
    """How long the cached build of ``version`` took (None if unknown)."""
    return builds.build_seconds(_out_dir(version, state_dir))


def binary_version(binary: Path) -> str:
    """The release a nats-streaming-server binary reports with --version."""
    try:
        done = processes.run_bounded([str(binary), "--version"], 10.0, 4096)
    except OSError as exc:
        raise StanServerError(f"cannot run {binary} --version: {exc}") from None
    found = _VERSION.search(done.text())
    if found is None:
        raise StanServerError(f"{binary} --version names no version: {done.text()!r}")
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
        self._state_dir = state_dir or DEFAULT_STATE_DIR
        self.binary = build(parse_spec(spec), self._state_dir)
        self._version = binary_version(self.binary)

    def version(self) -> str:
        return self._version

    def close(self) -> None:
        """Nothing to stop: each ``launch`` stops its own server."""

    def __enter__(self) -> StanServerTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def launch(self, cluster_id: str) -> Iterator[RunningStan]:
        """A fresh server (file store in its own run directory); stopped by PID on exit."""
        run_dir = self._state_dir / "runs" / processes.run_dir_name()
        run_dir.mkdir(parents=True)
        log = run_dir / "server.log"
        argv = [
            str(self.binary),
            *("-a", "127.0.0.1", "-p", "-1", "-cid", cluster_id),
            *("-st", "FILE", "--dir", str(run_dir / "store"), "-l", str(log)),
        ]
        try:
            launched = launch.run_server(
                argv, log, self._version, self._state_dir / "pids", _ready(), READY_TIMEOUT
            )
        except TargetError:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        try:
            assert launched.pid is not None
            running = launched.running
            yield RunningStan(
                running.url, running.host, running.port, cluster_id, launched.pid, log
            )
        finally:
            launched.stop()
            shutil.rmtree(run_dir, ignore_errors=True)


def _ready() -> launch.Ready:
    """The client port from the log's "Listening for client connections" line, once the log
    also says the streaming server is ready."""
    port: int | None = None
    ready = False

    def seen(watch: processes.LogWatch) -> int | None:
        nonlocal port, ready
        for piece in watch.pieces():
            if (found := _LISTENING.search(piece)) is not None:
                port = port or int(found.group(1))
            ready = ready or _READY in piece
        return port if ready else None

    return seen


def open_target(spec: str = DEFAULT_SPEC, *, state_dir: Path | None = None) -> StanServerTarget:
    """Resolve ``spec`` (building on first use); first stops what killed runs left behind."""
    cleanup_leftovers(state_dir)
    return StanServerTarget(spec, state_dir=state_dir)
