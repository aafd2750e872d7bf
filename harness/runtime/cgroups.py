"""Control groups for what the harness starts, where the machine lets it make them (the cgroup
v1 ``pids`` hierarchy, as root): every descendant of a child stays in the child's group, even
one that starts a session of its own and so leaves its process group; stopping the child kills
the whole group; ``pids.max`` bounds how many processes a hostile target can make. Without a
writable hierarchy the harness falls back to process groups alone."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

ROOT = Path(os.environ.get("NATS_CONFORMANCE_CGROUP_ROOT", "/sys/fs/cgroup/pids/nats-conformance"))
PIDS_MAX = 1024  # tasks (threads count) one child and its descendants may have at once
KILL_ROUNDS = 50  # a group still forking is read and killed again, this many times at most


@cache
def available() -> bool:
    """Whether groups can be made here (checked once per process)."""
    try:
        ROOT.mkdir(exist_ok=True)
        probe = ROOT / f".probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError:
        return False
    return True


def create(name: str) -> Path | None:
    """A new group named ``name`` (say whose run it is), limited to PIDS_MAX processes; None
    where groups are not available."""
    if not available():
        return None
    group = ROOT / name
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(PIDS_MAX))
    except OSError:
        return None
    return group


def joiner(group: Path | None) -> Callable[[], None]:
    """A step for a child's preexec_fn: move the child into ``group`` before it runs anything."""
    procs = None if group is None else str(group / "cgroup.procs")

    def join() -> None:
        if procs is not None:
            with contextlib.suppress(OSError), open(procs, "w") as handle:
                handle.write(str(os.getpid()))

    return join


def members(group: Path) -> list[int]:
    try:
        return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def kill(group: Path) -> None:
    """SIGKILL every process in ``group`` until none is left, then remove the group."""
    for _ in range(KILL_ROUNDS):
        pids = members(group)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    for _ in range(KILL_ROUNDS):  # a group is removable once its last zombie is reaped
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def leftovers(owner_alive: Callable[[str], bool]) -> list[str]:
    """Kill and remove the groups of runs that are gone (``owner_alive`` reads a group's name)."""
    if not available():
        return []
    removed = []
    for group in sorted(ROOT.iterdir()):
        if group.is_dir() and not owner_alive(group.name):
            count = len(members(group))
            kill(group)
            if count:
                removed.append(f"{count} process(es) in group {group.name} left by a killed run")
    return removed
