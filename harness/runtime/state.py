"""The suite's state directory (pid files, run directories, caches of wheels and built drivers)
and the cross-process lock that serializes work on one of its entries."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

# The only hosts this machine may send traffic to.
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _default_state_dir() -> Path:
    if configured := os.environ.get("NATS_CONFORMANCE_STATE_DIR"):
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nats-conformance"


# Pid files (pids/), the wheel cache (wheels/, bin/X.Y.Z/), built drivers (drivers/) and the
# server files of open runs (runs/).
DEFAULT_STATE_DIR: Path = _default_state_dir()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (other processes sharing the state dir wait)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
