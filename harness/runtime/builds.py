"""Builds into the cache: run once per wanted input (a hash of sources and version), serialized
across processes, redone when the input changes, each with its log and a bounded time."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from . import processes
from .state import locked

MARKER = ".nats-conformance-build.json"  # in the output directory, written after a build succeeded


class BuildError(Exception):
    """A build step failed or timed out; str(e) ends with the tail of its log."""


@dataclass(frozen=True)
class Step:
    argv: list[str]
    env: dict[str, str] | None = None
    cwd: Path | None = None


def tree_files(root: Path, skipped: set[str]) -> Iterable[tuple[str, Path]]:
    """(relative name, path) of the files under ``root``, sorted, outside hidden directories,
    ``skipped`` names and *.egg-info (metadata an install writes into the tree)."""
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and not any(
            p in skipped or p.startswith(".") or p.endswith(".egg-info") for p in parts
        ):
            yield str(path.relative_to(root)), path


class Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


def add_files(digest: Digest, files: Iterable[tuple[str, Path]]) -> None:
    """Feed ``digest`` each (name, path)'s name and the hash of its content, in the order
    given: what a build's output depends on, so a change of any file asks for a new build."""
    for name, path in files:
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())


def run_step(step: Step, log: Path, timeout: float, what: str, tail: int = 30) -> float:
    """Run one build step with its output in ``log``; the seconds it took; BuildError when it
    cannot start, fails or outlives ``timeout`` (then its whole process group is killed)."""
    started = time.monotonic()
    with log.open("ab") as output:
        output.write(f"$ {' '.join(step.argv)}\n".encode())
        output.flush()
        try:
            status = processes.run_logged(step.argv, output, timeout, env=step.env, cwd=step.cwd)
        except OSError as exc:
            raise BuildError(f"cannot run {step.argv[0]} to build {what}: {exc}") from None
    seconds = time.monotonic() - started
    if status != 0:
        problem = f"exit status {status}" if status is not None else f"over {timeout:g} s"
        raise BuildError(
            f"building {what} failed ({problem}) after {seconds:.0f} s; "
            f"the end of its log ({log}):\n{processes.log_tail(log, tail)}"
        )
    return seconds


def cached_build(
    out: Path, wanted: str, built: Callable[[], bool], build: Callable[[Path], float]
) -> Path:
    """``out``, built by ``build(log)`` unless a build of ``wanted`` is there already and
    ``built()`` holds; the old build stops counting before a new one starts."""
    marker = out / MARKER
    with locked(out.parent / f".{out.name}.lock"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            if json.loads(marker.read_text())["hash"] == wanted and built():
                return out
        marker.unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        log = out.parent / f"{out.name}.build.log"
        log.write_bytes(b"")
        seconds = build(log)
        if not built():
            raise BuildError(f"the build wrote no result into {out}; see {log}")
        marker.write_text(json.dumps({"hash": wanted, "seconds": seconds}))
    return out


def build_seconds(out: Path) -> float | None:
    """How long the build in ``out`` took (None if unknown)."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        return float(json.loads((out / MARKER).read_text())["seconds"])
    return None


def go_missing() -> str | None:
    """Why this machine cannot build Go programs (None when it can)."""
    if shutil.which("go") is None:
        return "Go is not installed (no `go` on PATH; /usr/local/go/bin is a usual place)"
    return None


def go_install(module: str, version: str, out: Path, binary: str, timeout: float) -> Path:
    """``binary`` of ``module`` at release ``version`` (X.Y.Z), built with ``go install`` from
    the Go module proxy into ``out`` on first use, then reused; builds of one output are
    serialized across processes. BuildError when Go is missing or the build fails."""
    what = f"{module}@v{version}"
    if problem := go_missing():
        raise BuildError(f"{what} is built from the Go module proxy: {problem}")
    path = out / binary
    env = os.environ | {"GOBIN": str(out), "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    step = Step(["go", "install", "-trimpath", what], env=env, cwd=out)
    cached_build(
        out,
        hashlib.sha256(what.encode()).hexdigest(),
        lambda: os.access(path, os.X_OK),
        lambda log: run_step(step, log, timeout, what),
    )
    return path
