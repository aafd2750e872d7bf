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
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nats_conformance.harness.runtime import processes
from nats_conformance.harness.servers import launch
from nats_conformance.harness.servers.config import config_text
from nats_conformance.harness.servers.launch import Launched, Ready
from nats_conformance.harness.servers.specs import TargetError

HOST = "127.0.0.1"
VERSION_TIMEOUT = 10.0  # seconds the version command may take
VERSION_OUTPUT = 4096  # bytes of its output kept
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
    found = description.version_regex.search(output)
    if done.status != 0 or found is None:
        pattern = description.version_regex.pattern
        raise TargetError(
            f"{' '.join(argv)} (exit {done.status}) printed nothing matching {pattern!r}: "
            f"{output!r}"
        )
    return found.group(1) if found.groups() else found.group(0)


def _free_port() -> int:
    # The server binds it a moment later; another process taking it first fails the launch
    # with the server's own message, which is rare and says what happened.
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


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
        else launch.when_logged(description.ready_log, lambda: port)
    )
    return launch.run_server(argv, log, version, pids_dir, ready)


def _filled(arg: str, values: Mapping[str, str]) -> str:
    for placeholder, value in values.items():
        arg = arg.replace(placeholder, value)
    return arg


def _on_path(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise TargetError(f"{name} is not on PATH")
    return found
