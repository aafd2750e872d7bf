"""Processes the harness starts: each in its own process group, dying with the harness, recorded
in a pid file, and stopped as a group, so nothing it starts (a wrapper script's children
included) outlives it; what a killed run left is stopped by the next one."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import IO, Any

from . import cgroups

STOP_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
OUTPUT_LIMIT = 1 << 16  # bytes of a short command's output kept (a target controls it)
EXIT_DRAIN = 0.5  # seconds output is still read after a short command exited
TAIL_BYTES = 64 << 10  # bytes of a log's end read for an error message
TAIL_SHOWN = 4000  # characters of them shown
LINE_OVERLAP = (
    4096  # characters kept between pieces of a watched log (longer than any line looked for)
)


# --- identity ------------------------------------------------------------------------------------


def start_time(pid: int) -> int | None:
    """The start time (clock ticks since boot) of a running process; None when none has ``pid``.

    A zombie counts as gone: it runs nothing, and its parent may never reap it.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # fields from the 3rd (state) on
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])  # field 22, starttime


def alive(pid: int, start: int | None) -> bool:
    """Whether the process with ``pid`` that started at ``start`` still runs (pids get reused)."""
    return start is not None and start_time(pid) == start


def cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0")[:-1]]


def owner() -> tuple[int, int | None]:
    """This process's identity as recorded in pid files, run dirs and container labels."""
    pid = os.getpid()
    return pid, start_time(pid)


def run_dir_name() -> str:
    """A fresh directory name that says which run owns it (cleanup_leftovers reads it)."""
    owner_pid, owner_start = owner()
    return f"{owner_pid}-{owner_start}-{uuid.uuid4().hex[:8]}"


# --- stopping ------------------------------------------------------------------------------------


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def exit_status(proc: subprocess.Popen[Any]) -> int | None:
    """The exit status (negative: killed by that signal) without reaping; None while it runs.

    Not reaping keeps the pid, and so the process group id, reserved until the group has been
    stopped: a reaped pid may be reused, and its group with it.
    """
    if proc.returncode is not None:
        return proc.returncode
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return proc.poll()
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def wait_unreaped(proc: subprocess.Popen[Any], seconds: float) -> int | None:
    """Wait up to ``seconds`` for ``proc`` to end, without reaping it; its status, or None."""
    deadline = time.monotonic() + seconds
    while (status := exit_status(proc)) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return status


def stop_process(proc: subprocess.Popen[Any], grace: float = STOP_GRACE) -> int:
    """Stop ``proc`` and its process group: SIGTERM, SIGKILL after ``grace`` seconds, then
    SIGKILL whatever is left of the group (children of a wrapper that did not ``exec``) while
    the unreaped leader still reserves the group id, then reap it and kill what is left of its
    control group. A process started without a group of its own is signalled alone. Its exit
    status."""
    own_group = _own_group(proc.pid)
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if exit_status(proc) is not None:
                break
            if own_group:
                _kill_group(proc.pid, sig)
            else:
                proc.send_signal(sig)
            wait_unreaped(proc, grace)
        if own_group:
            _kill_group(proc.pid, signal.SIGKILL)
        return proc.wait()
    finally:
        release(proc.pid)


def release(pid: int) -> None:
    """Kill what is left in the control group of the child ``pid`` started as (descendants that
    left its process group), and remove the group. The child itself is gone or reaped."""
    with _GROUPS_LOCK:
        group = _GROUPS.pop(pid, None)
    if group is not None:
        cgroups.kill(group)


def control_group(pid: int) -> Path | None:
    """The control group the child ``pid`` was started in (None: none, or released)."""
    with _GROUPS_LOCK:
        return _GROUPS.get(pid)


def _own_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return True  # an unreaped leader: its group may still hold children


def _wait_gone(pid: int, start: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid, start):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def terminate(pid: int, start: int) -> None:
    """SIGTERM a process that is not our child (and its group, when it leads one), SIGKILL
    after the grace."""
    group = False
    with contextlib.suppress(ProcessLookupError):
        group = os.getpgid(pid) == pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        if group:
            _kill_group(pid, sig)
        if _wait_gone(pid, start, STOP_GRACE):
            break
    if group:
        _kill_group(pid, signal.SIGKILL)


# --- starting ------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGKILL when the thread that started it ends."""
    if _libc is None:
        return None
    prctl = _libc.prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _preexec(parent: int, group: Path | None) -> Callable[[], None]:
    """The child's first steps: into its control group, then tied to its parent's life."""
    join, tie = cgroups.joiner(group), _die_with_parent(parent)

    def preexec() -> None:
        join()
        if tie is not None:
            tie()

    return preexec


# Each child's control group (harness.runtime.cgroups), by the child's pid, until released.
_GROUPS: dict[int, Path] = {}
_GROUPS_LOCK = threading.Lock()


_SpawnJob = tuple[Future[subprocess.Popen[bytes]], list[str], dict[str, Any]]


class Spawner:
    """Starts every child from one long-lived thread.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so a child started
    from a short-lived worker thread would die with it; this thread lives as long as the process.
    """

    def __init__(self) -> None:
        self._jobs: SimpleQueue[_SpawnJob] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """``subprocess.Popen(argv, **kwargs)`` in its own process group, dying with us."""
        kwargs.setdefault("start_new_session", True)
        kwargs.setdefault("close_fds", True)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # also after a fork
                self._thread = threading.Thread(
                    target=self._serve, name="nats-conformance-spawner", daemon=True
                )
                self._thread.start()
        future: Future[subprocess.Popen[bytes]] = Future()
        self._jobs.put((future, argv, kwargs))
        return future.result()

    def _serve(self) -> None:
        while True:
            future, argv, kwargs = self._jobs.get()
            group = cgroups.create(run_dir_name())
            try:
                proc = subprocess.Popen(argv, preexec_fn=_preexec(os.getpid(), group), **kwargs)
            except BaseException as exc:
                if group is not None:
                    cgroups.kill(group)
                future.set_exception(exc)
            else:
                if group is not None:
                    with _GROUPS_LOCK:
                        _GROUPS[proc.pid] = group
                future.set_result(proc)


SPAWNER = Spawner()


def log_tail(log: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file, for an error message (only its end is read)."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - TAIL_BYTES))
            text = handle.read(TAIL_BYTES).decode(errors="replace")
    except OSError:
        return "(no log)"
    tail = "\n".join(text.rstrip().splitlines()[-lines:])
    if len(tail) > TAIL_SHOWN:  # a line can be as long as a target likes
        tail = f"...[{len(tail) - TAIL_SHOWN} characters]{tail[-TAIL_SHOWN:]}"
    return tail or "(empty log)"


class LogWatch:
    """Reads a growing log from where it stopped, in bounded pieces, so finding a line in a log
    that a target floods costs bounded memory and each byte is read once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0  # bytes read so far
        self._overlap = ""  # the end of the last piece: a line may straddle two pieces

    def pieces(self) -> Iterator[str]:
        """The text written since the last call, as overlapping pieces of at most ~1 MiB."""
        try:
            handle = self.path.open("rb")
        except OSError:
            return
        with handle:
            handle.seek(self.size)
            while chunk := handle.read(1 << 20):
                self.size += len(chunk)
                text = self._overlap + chunk.decode(errors="replace")
                self._overlap = text[-LINE_OVERLAP:]
                yield text


def write_pid_file(pid_file: Path, pid: int, binary: Path, argv: list[str]) -> None:
    """Record a launched process, so cleanup_leftovers can stop it if this run is killed."""
    owner_pid, owner_start = owner()
    record = {
        "pid": pid,
        "start": start_time(pid),
        "binary": str(binary),
        "argv": argv,
        "owner_pid": owner_pid,
        "owner_start": owner_start,
        "started_at": time.time(),
    }
    partial = pid_file.with_name(f".{pid_file.name}.partial")
    partial.write_text(json.dumps(record))
    partial.replace(pid_file)  # atomic: a reader never sees half a record


@dataclass
class Launched:
    """A long-running child (a server): its process, and ``stop`` that ends it and its group."""

    proc: subprocess.Popen[bytes]
    stop: Callable[[], None]


def launch(argv: list[str], log: Path, pids_dir: Path) -> Launched:
    """Start ``argv`` with its output appended to ``log`` (what it prints before it opens a log
    of its own), recorded in a pid file until stopped. OSError when it cannot start."""
    pids_dir.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as early_output:
        proc = SPAWNER.popen(
            argv, stdin=subprocess.DEVNULL, stdout=early_output, stderr=subprocess.STDOUT
        )
    pid_file = pids_dir / f"{proc.pid}.json"
    stopped = threading.Event()

    def stop() -> None:
        if stopped.is_set():
            return  # once: a reaped pid may be reused, and its group with it
        stopped.set()
        stop_process(proc, STOP_GRACE)
        pid_file.unlink(missing_ok=True)

    try:
        write_pid_file(pid_file, proc.pid, Path(argv[0]), argv)
    except BaseException:
        stop()
        raise
    return Launched(proc, stop)


def run_logged(
    argv: list[str],
    log: IO[bytes],
    timeout: float,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> int | None:
    """Run a build step to completion with its output in ``log``; its exit status, or None when
    it outlived ``timeout``. Its whole group is killed at the end (what a build left running).
    OSError when it cannot start."""
    proc = SPAWNER.popen(
        argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd
    )
    try:
        status: int | None = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        status = None
    finally:
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        release(proc.pid)
    return status


@dataclass(frozen=True)
class Completed:
    """A short command's end: its status (None: stopped at its deadline), the first bytes of
    its output (stdout and stderr together) and how many it wrote in all."""

    status: int | None
    output: bytes
    size: int

    def text(self) -> str:
        shown = self.output.decode(errors="replace").strip()
        cut = f"... [{self.size} bytes in all]" if self.size > len(self.output) else ""
        return shown + cut


def run_bounded(argv: list[str], timeout: float, limit: int = OUTPUT_LIMIT) -> Completed:
    """Run a short command (``--version``, say) in its own group: at most ``timeout`` seconds,
    at most ``limit`` bytes of output kept however much it prints, and its whole group killed at
    the end, so a child still holding its output can neither stall nor outlive the run.
    OSError when it cannot start."""
    proc = SPAWNER.popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    kept, size, exited_at = bytearray(), 0, None
    try:
        while (now := time.monotonic()) < deadline:
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_DRAIN:
                break  # what still holds the pipe is a leftover child: it is killed below
            if not select.select([proc.stdout], [], [], 0.05)[0]:
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            size += len(chunk)
            kept += chunk[: max(0, limit - len(kept))]
        try:  # its output ended: so will it, unless it outlives the deadline
            status: int | None = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            status = None
    finally:
        _kill_group(proc.pid, signal.SIGKILL)
        proc.stdout.close()
        proc.wait()
        release(proc.pid)
    return Completed(status, bytes(kept), size)


# --- leftovers -----------------------------------------------------------------------------------


def stop_leftover_processes(state_dir: Path) -> list[str]:
    """Stop the processes of runs whose owner is gone and remove their run directories.

    A pid file's process is stopped only if its owner is gone and the pid still runs the recorded
    command line since the recorded start time (pids get reused).
    """
    removed: list[str] = []
    for pid_file in sorted((state_dir / "pids").glob("*.json")):
        try:
            record = json.loads(pid_file.read_text())
            pid, start, argv = int(record["pid"]), record["start"], record["argv"]
            owner_pid, owner_start = int(record["owner_pid"]), record["owner_start"]
        except (OSError, ValueError, KeyError, TypeError):
            pid_file.unlink(missing_ok=True)  # unreadable: it can protect nothing
            continue
        if alive(owner_pid, owner_start):
            continue
        if alive(pid, start) and cmdline(pid) == argv:
            terminate(pid, start)
            removed.append(f"process {pid} ({argv[0]}) left by run {owner_pid}")
        pid_file.unlink(missing_ok=True)
    for run_dir in (state_dir / "runs").glob("*-*-*"):
        if not owner_alive(run_dir.name):
            shutil.rmtree(run_dir, ignore_errors=True)
    return removed + cgroups.leftovers(owner_alive)


def owner_alive(name: str) -> bool:
    """Whether the run that named something ``<pid>-<start>-...`` (run_dir_name) still runs; a
    name of another shape is taken as alive (not ours to remove)."""
    owner_pid, _, rest = name.partition("-")
    owner_start = rest.partition("-")[0]
    return not owner_pid.isdigit() or alive(int(owner_pid), int_or_none(owner_start))


def int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None
