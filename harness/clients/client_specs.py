"""The client spec grammar: which library a spec names and where its driver runs (see
accepted_forms()), and the release series a `==*` spec stands for. Parsing only: building and
starting the driver is harness.clients.client_targets'."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .registry import (
    LIBRARIES,
    ClientError,
    Library,
    from_source_names,
)

DRIVER_PREFIX = "driver:"  # driver:COMMAND, any program speaking the driver protocol
SERIES = "*"  # the version of `client:<library>==*`: every release of the library's series
_PIN = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+~:_-]*")


def accepted_forms() -> str:
    """The client spec forms and the libraries registered now (outside drivers directories add
    to them)."""
    with_source = ", ".join(from_source_names())
    return (
        "client:<library>, client:<library>==<version>, container:client:<library>[==<version>], "
        f"client:<library>=={SERIES} (its release series), client:<library>@<path> (built against "
        f"a local checkout), {DRIVER_PREFIX}<command> (any program speaking the driver protocol) "
        f"(libraries: {', '.join(LIBRARIES)}; in containers: "
        f"{', '.join(name for name, lib in LIBRARIES.items() if lib.container)}; with a release "
        f"series: {', '.join(name for name, lib in LIBRARIES.items() if lib.releases)}; from a "
        f"checkout: {with_source})"
    )


@dataclass(frozen=True)
class ClientSpec:
    spec: str
    library: str  # for a driver: spec, the program's name until its hello names the library
    version_pin: str | None = None
    container: bool = False
    source: Path | None = None  # client:<library>@<path>: the checkout its driver builds against
    command: tuple[str, ...] = ()  # driver:<command>: the program and its arguments

    @property
    def kind(self) -> Literal["client", "container-client"]:
        return "container-client" if self.container else "client"


def parse_client_spec(spec: str) -> ClientSpec:
    """Parse a client spec; ClientError names what is wrong, the accepted forms and libraries.
    A driver: spec's program must exist; a client:<library>@<path> checkout must be a
    directory."""
    text = spec.strip()

    def bad(reason: str) -> ClientError:
        return ClientError(f"bad client {spec!r}: {reason} (accepted forms: {accepted_forms()})")

    if text.startswith(DRIVER_PREFIX):
        command = _driver_command(text.removeprefix(DRIVER_PREFIX))
        if isinstance(command, str):
            raise bad(command)
        return ClientSpec(text, Path(command[0]).name, command=command)
    container = text.startswith("container:")
    rest = text.removeprefix("container:")
    if not rest.startswith("client:"):
        raise bad("unknown form" if text else "empty spec")
    named, at, source = rest.removeprefix("client:").partition("@")
    library, sep, pin = named.partition("==")
    if library not in LIBRARIES:
        raise bad(f"unknown library {library!r}")
    if sep and not _PIN.fullmatch(pin):
        raise bad(f"{pin!r} is not a version such as 2.16.0")
    if container and LIBRARIES[library].container is None:
        raise bad(f"{library} does not run in a container")
    if not at:
        return ClientSpec(text, library, pin if sep else None, container)
    problem = source_problem(LIBRARIES[library], Path(source).expanduser(), bool(sep), container)
    if problem:
        raise bad(problem)
    return ClientSpec(text, library, source=Path(source).expanduser().resolve())


def _driver_command(command: str) -> tuple[str, ...] | str:
    """The argv of a driver: command (an executable's path as it is, else a shell-style command
    line with its program resolved on PATH), or what is wrong with it."""
    if os.path.isfile(command) and os.access(command, os.X_OK):
        return (os.path.abspath(command),)
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"cannot split the command: {exc}"
    if not argv:
        return "no command after driver:"
    program = shutil.which(argv[0])
    if program is None:
        return f"no program {argv[0]!r} (not an executable file, nor a command on PATH)"
    # Absolute, so the driver starts the same from any working directory.
    return (os.path.abspath(program), *argv[1:])


def source_problem(library: Library, source: Path, pinned: bool, container: bool) -> str | None:
    """What keeps ``library``'s driver from building against the checkout ``source``."""
    if not library.from_source:
        return (
            f"the {library.name} driver cannot build against a local checkout: it takes the "
            f"library from {library.registry} (those that can: {', '.join(from_source_names())})"
        )
    if pinned:
        return "a checkout is the version it holds: give @<path> without ==<version>"
    if container:
        return "a driver built against a checkout runs on the host only"
    if not source.is_dir():
        return f"{source} is not a directory"
    return None


def expand_series(specs: Iterable[str]) -> list[str]:
    """``specs`` with each ``[container:]client:<library>==*`` replaced by one spec per release
    of the library's series, oldest first; ClientError for a library without one."""
    expanded: list[str] = []
    for spec in specs:
        head, sep, version = spec.strip().rpartition("==")
        if not sep or version != SERIES or spec.strip().startswith(DRIVER_PREFIX):
            expanded.append(spec)
            continue
        library = head.removeprefix("container:").removeprefix("client:")
        releases = LIBRARIES[library].releases if library in LIBRARIES else ()
        if not releases:
            raise ClientError(f"bad client {spec!r}: no release series for {library!r} "
                              f"(accepted forms: {accepted_forms()})")  # fmt: skip
        expanded += [f"{head}=={release}" for release in releases]
    return expanded
