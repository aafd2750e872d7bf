"""Servers that are not nats-server, launched as a description the user writes says
(``launch:FILE``): no code in the suite per server.

The description is a TOML file; relative program paths are relative to its directory::

    command = ["./my-server", "--listen-port", "{port}", "--conf", "{config}"]
    config = "nats-server"   # {config} is a nats-server configuration file; "none": no file
    ready = {log = "listening on"}   # a regex its output matches once ready; or ready = "port"
    version = {command = ["./my-server", "--version"], regex = "v([0-9.]+)"}   # or "info"

``{port}`` is a free port on 127.0.0.1 the suite picks, ``{host}`` is 127.0.0.1, ``{dir}`` the
server's own directory. A server given no configuration ("none") is not configurable: cases that
need one are skipped with the reason, as for url: targets.

The two regexes are the user's, and Python's ``re`` backtracks: a pattern such as ``(a+)+$`` on a
long line runs for ever, holding the interpreter lock, so neither a thread nor a deadline checked
between searches can stop it, and no test on a pattern's text can tell every slow one. Each search
therefore runs in a child process (``bounded_search``) that is killed at the deadline the search
is under: the readiness deadline for ``ready.log``, the version command's for ``version.regex``.
A pattern keeps the meaning ``re`` gives it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..results import NAME_LIMIT, bounded
from ..runtime import processes
from . import launch
from .config import config_text
from .launch import Launched, Ready
from .specs import TargetError

HOST = "127.0.0.1"
VERSION_TIMEOUT = 10.0  # seconds the version command may take
VERSION_OUTPUT = 4096  # bytes of its output kept
REGEX_LIMIT = 4096  # characters of a regex (it is passed to the searching child on its argv)
_KEYS = {"command", "config", "ready", "version"}
_CONFIGS = ("nats-server", "none")
Bad = Callable[[str], TargetError]


@dataclass(frozen=True)
class Description:
    path: Path
    command: tuple[str, ...]
    configurable: bool  # it takes a nats-server configuration file as {config}
    ready_log: re.Pattern[str] | None  # None: ready when its port accepts connections
    version_command: tuple[str, ...] | None  # None: the version its INFO says
    version_regex: re.Pattern[str] | None


def load(path: Path) -> Description:
    """Read and check a launch description; TargetError names the file and what is wrong."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TargetError(f"cannot read the launch description {path}: {exc}") from None

    def bad(reason: str) -> TargetError:
        return TargetError(f"launch description {path}: {reason}")

    if unknown := sorted(set(data) - _KEYS):
        raise bad(f"unknown key(s) {', '.join(unknown)}; it takes {', '.join(sorted(_KEYS))}")
    command = _argv(data.get("command"), "command", path.parent, bad)
    config = data.get("config")
    if config not in _CONFIGS:
        raise bad(f'config must be "nats-server" or "none", not {config!r}')
    configurable = config == "nats-server"
    if not any("{port}" in arg for arg in command):
        raise bad("command must pass the port: put {port} in it")
    if configurable != any("{config}" in arg for arg in command):
        raise bad('{config} in command goes with config = "nats-server", and only with it')
    ready = data.get("ready")
    if ready != "port" and not (isinstance(ready, dict) and set(ready) == {"log"}):
        raise bad('ready must be "port" or {log = "REGEX"}')
    version = data.get("version")
    if version == "info":
        version_command, version_regex = None, None
    elif isinstance(version, dict) and set(version) == {"command", "regex"}:
        version_command = _argv(version["command"], "version.command", path.parent, bad)
        version_regex = _regex(version["regex"], "version.regex", bad)
    else:
        raise bad('version must be "info" or {command = [...], regex = "REGEX"}')
    ready_log = None if ready == "port" else _regex(ready["log"], "ready.log", bad)
    return Description(path, command, configurable, ready_log, version_command, version_regex)


def _argv(value: Any, key: str, base: Path, bad: Bad) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise bad(f"{key} must be a non-empty list of strings")
    program = value[0]
    if "/" in program:  # a path, relative to the description; a bare name is looked up in PATH
        program = str((base / program).absolute())
    return (program, *value[1:])


def _regex(value: Any, key: str, bad: Bad) -> re.Pattern[str]:
    if not isinstance(value, str):
        raise bad(f"{key} must be a regex string")
    if len(value) > REGEX_LIMIT or "\0" in value:
        raise bad(f"{key} must be at most {REGEX_LIMIT} characters, without NUL")
    try:
        return re.compile(value)
    except re.error as exc:
        raise bad(f"{key} is not a regex: {exc}") from None


def command_version(description: Description) -> str:
    """The version the description's version command prints (its regex's first group, or the
    whole match)."""
    assert description.version_command is not None and description.version_regex is not None
    argv = list(description.version_command)
    try:
        done = processes.run_bounded(argv, VERSION_TIMEOUT, VERSION_OUTPUT)
    except OSError as exc:
        raise TargetError(f"cannot run {argv[0]}: {exc}") from None
    output = done.text()
    if done.status is None:
        raise TargetError(f"{' '.join(argv)} did not end within {VERSION_TIMEOUT:g} s")
    pattern = description.version_regex
    found = None if done.status != 0 else bounded_search(pattern, output, VERSION_TIMEOUT)
    if found is None:
        raise TargetError(
            f"{' '.join(argv)} (exit {done.status}) printed nothing matching "
            f"{pattern.pattern!r}: {output!r}"
        )
    return bounded(found, NAME_LIMIT)  # stored in every row: a name, not a message


class SearchTimeout(TargetError):
    """A regex search that did not end within its deadline."""


# The child of bounded_search: the pattern on its argv, the text on stdin; it prints JSON: null
# (no match), or the match's first group (its whole match when it has no group; "" for a group
# that took no part).
_SEARCH = """\
import json, re, sys
found = re.compile(sys.argv[1]).search(sys.stdin.buffer.read().decode())
print(json.dumps(None if found is None else (found.group(1) if found.groups() else found[0]) or ""))
"""


def bounded_search(pattern: re.Pattern[str], text: str, seconds: float) -> str | None:
    """``pattern.search(text)`` run in a child process killed after ``seconds``: its first group
    (the whole match when it has none), or None when it does not match. SearchTimeout when the
    search outlives ``seconds`` (a pattern that backtracks without end, say)."""
    argv = [sys.executable, "-I", "-S", "-c", _SEARCH, pattern.pattern]
    try:
        child = processes.SPAWNER.popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
    except OSError as exc:
        raise TargetError(f"cannot search with {pattern.pattern!r}: {exc}") from None
    try:
        out, _ = child.communicate(text.encode(), timeout=max(seconds, 0.0))
    except BaseException as exc:
        processes.stop_process(child, grace=0.0)  # not reaped yet: its group is still its own
        if isinstance(exc, subprocess.TimeoutExpired):
            raise SearchTimeout(
                f"the regex {bounded(pattern.pattern, 200)!r} did not finish searching "
                f"{len(text)} characters within {seconds:.3g} s: a pattern that backtracks?"
            ) from None
        raise
    processes.release(child.pid)  # reaped by communicate; only its control group is left
    if child.returncode != 0:
        raise TargetError(f"searching with {pattern.pattern!r} failed (exit {child.returncode})")
    found: str | None = json.loads(out)
    return found


def _free_port() -> int:
    # The server binds it a moment later; another process taking it first fails the launch
    # with the server's own message, which is rare and says what happened.
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _logged(pattern: re.Pattern[str], port: int, seconds: float) -> Ready:
    """Ready once the log has a match of ``pattern``; each search bounded by what is left of
    ``seconds`` from now (the readiness deadline), so it cannot outlive the deadline."""
    deadline = time.monotonic() + seconds

    def ready(watch: processes.LogWatch) -> int | None:
        for piece in watch.pieces():
            try:
                seen = bounded_search(pattern, piece, deadline - time.monotonic()) is not None
            except SearchTimeout as exc:
                raise TargetError(f"ready.log: {exc} (the readiness deadline)") from None
            if seen:
                return port
        return None

    return ready


def _accepting(port: int) -> Ready:
    def ready(_watch: processes.LogWatch) -> int | None:
        try:
            socket.create_connection((HOST, port), timeout=0.2).close()
        except OSError:
            return None
        return port

    return ready


def launch_described(
    description: Description,
    config: Mapping[str, Any],
    run_dir: Path,
    version: str,
    pids_dir: Path,
) -> Launched:
    """Start the described server for ``config`` in ``run_dir`` and wait until it is ready."""
    conf, log = run_dir / "server.conf", run_dir / "server.log"
    if description.configurable:
        conf.write_text(config_text(config, run_dir))
    elif config:
        raise TargetError(f"{description.path} takes no configuration: {', '.join(config)}")
    port = _free_port()
    values = {"{port}": str(port), "{host}": HOST, "{config}": str(conf), "{dir}": str(run_dir)}
    argv = [_filled(arg, values) for arg in description.command]
    if os.sep not in argv[0]:
        argv[0] = _on_path(argv[0])
    ready = (
        _accepting(port)
        if description.ready_log is None
        else _logged(description.ready_log, port, launch.READY_TIMEOUT)
    )
    return launch.run_server(argv, log, version, pids_dir, ready, launch.READY_TIMEOUT)


def _filled(arg: str, values: Mapping[str, str]) -> str:
    for placeholder, value in values.items():
        arg = arg.replace(placeholder, value)
    return arg


def _on_path(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise TargetError(f"{name} is not on PATH")
    return found
