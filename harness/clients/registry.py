"""The client library registry, read from data: each driver directory with a build.sh is a
library named after the directory and described by the library.json beside it
(schemas/library.schema.json). The suite's own directories (harness/drivers/) are read on import;
outside drivers directories (--drivers-dir, $NATS_CONFORMANCE_DRIVERS) add theirs in the same
format through extend_registry. A library's pinned version is the one its build.sh writes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import jsonschema

from ..runtime import containers

DRIVERS_DIR = Path(__file__).resolve().parents[1] / "drivers"
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "library.schema.json"
LIBRARY_FILE = "library.json"  # in a driver directory: the library's registry entry
DRIVERS_ENV = "NATS_CONFORMANCE_DRIVERS"  # drivers directories from outside, os.pathsep-separated
# The protocols a driver speaks (library.json "protocol"): a NATS client's, run with every
# client-role vector, and a NATS Streaming client's (harness.clients.streaming_clients).
DRIVER_PROTOCOL = "nats-conformance-driver"
STAN_DRIVER_PROTOCOL = "nats-conformance-stan-driver"
# How a build.sh writes its default version: PINNED_VERSION=X, PINNED="X", ${LIBRARY_VERSION:-X}.
_DEFAULT_PIN = (
    re.compile(r"\$\{LIBRARY_VERSION:-([^}\"'$\s]+)\}"),
    re.compile(r"^\s*[A-Z_]*PINNED[A-Z_]*=[\"']?([0-9][^\"'\s]*)", re.MULTILINE),
)
_ENTRY = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text("utf-8")))
_ENTRY_FORM = (
    'a library.json needs {"registry": TEXT} and optionally "tools", "files", "shares" (lists of '
    'text), "source" (true or false), "protocol", "releases", "system_releases", "container" '
    f"(schema: schemas/{SCHEMA_PATH.name})"
)


class ClientError(Exception):
    """A client spec is wrong, or its driver cannot be built or started; str(e) says why."""


@dataclass(frozen=True)
class Library:
    """A client library's registry entry: its library.json, named by its driver directory."""

    name: str
    root: Path  # the drivers directory holding its driver directory
    registry: str  # where its build.sh gets the library from
    protocol: str = DRIVER_PROTOCOL
    tools: tuple[str, ...] = ()  # commands the build needs on PATH
    files: tuple[str, ...] = ()  # files the build needs (system packages)
    shares: tuple[str, ...] = ()  # other driver directories its build.sh uses
    # Whether its build.sh builds against a local checkout given as LIBRARY_SOURCE.
    from_source: bool = False
    # The release series `client:<name>==*` runs, oldest first, ending with the pinned version:
    # releases years apart, each one its driver builds and runs against.
    releases: tuple[str, ...] = ()
    # Versions a system package provides, with the path it installs (listed where it exists).
    system_releases: tuple[tuple[str, Path], ...] = ()
    # Container clients: a recipe of harness.clients.driver_images; None: no containers.
    container: str | None = None

    def directory(self, name: str | None = None) -> Path:
        """Its driver directory (or that of ``name``, a directory it shares)."""
        return self.root / (name or self.name)

    def buildable_here(self) -> bool:
        """Whether the commands and files its build needs are on this machine."""
        return all(shutil.which(tool) for tool in self.tools) and all(
            Path(f).is_file() for f in self.files
        )


def read_library(folder: Path) -> Library:
    """The registry entry of the driver directory ``folder`` (from its library.json); ClientError
    for one that is missing or does not match the schema."""
    path = folder / LIBRARY_FILE
    try:
        entry = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ClientError(f"{path}: cannot read the library's registry entry: {exc}") from None
    error = jsonschema.exceptions.best_match(_ENTRY.iter_errors(entry))
    if error is not None:
        where = "".join(f"[{part!r}]" for part in error.absolute_path)
        raise ClientError(f"{path}{where}: {error.message}; {_ENTRY_FORM}")
    return Library(
        name=folder.name,
        root=folder.parent,
        registry=entry["registry"],
        protocol=entry.get("protocol", DRIVER_PROTOCOL),
        tools=tuple(entry.get("tools", ())),
        files=tuple(entry.get("files", ())),
        shares=tuple(entry.get("shares", ())),
        from_source=entry.get("source", False),
        releases=tuple(entry.get("releases", ())),
        system_releases=tuple(
            (version, Path(p)) for version, p in entry.get("system_releases", {}).items()
        ),
        container=entry.get("container"),
    )


def read_drivers_dir(root: Path) -> list[Library]:
    """The libraries of a drivers directory: each subdirectory with a build.sh, by name."""
    if not root.is_dir():
        raise ClientError(f"drivers directory {root} is not a directory")
    folders = sorted(p for p in root.resolve().iterdir() if (p / "build.sh").is_file())
    return [read_library(folder) for folder in folders]


def _tables(libraries: Iterable[Library]) -> tuple[dict[str, Library], dict[str, Library]]:
    tables: dict[str, dict[str, Library]] = {DRIVER_PROTOCOL: {}, STAN_DRIVER_PROTOCOL: {}}
    for library in libraries:
        tables[library.protocol][library.name] = library
    return tables[DRIVER_PROTOCOL], tables[STAN_DRIVER_PROTOCOL]


# The registry: the NATS clients and the NATS Streaming clients, each by name, the suite's first.
LIBRARIES, STREAMING_LIBRARIES = _tables(read_drivers_dir(DRIVERS_DIR))


def registered(name: str) -> Library | None:
    """The library of that name, of either protocol."""
    return LIBRARIES.get(name) or STREAMING_LIBRARIES.get(name)


def extend_registry(dirs: Iterable[Path]) -> list[str]:
    """Add the libraries of outside drivers directories (``dirs``, then those in
    $NATS_CONFORMANCE_DRIVERS) to the registry, each to the table of its protocol. Their names,
    in order; ClientError for a directory that is missing, a library.json that is wrong, or a
    name already taken."""
    from_env = [Path(p) for p in os.environ.get(DRIVERS_ENV, "").split(os.pathsep) if p]
    added: list[str] = []
    for root in [*dirs, *from_env]:
        for library in read_drivers_dir(root):
            known = registered(library.name)
            if known is not None and known.root != library.root:
                where = "the suite" if known.root == DRIVERS_DIR else known.root
                raise ClientError(
                    f"{library.directory()}: library {library.name!r} is already registered "
                    f"(by {where})"
                )
            table = LIBRARIES if library.protocol == DRIVER_PROTOCOL else STREAMING_LIBRARIES
            table[library.name] = library
            added.append(library.name)
    return added


def from_source_names() -> list[str]:
    """The libraries whose driver builds against a local checkout (client:<library>@<path>),
    the NATS Streaming clients' included."""
    every = {**LIBRARIES, **STREAMING_LIBRARIES}
    return [name for name, library in every.items() if library.from_source]


def pinned_version(library: str) -> str | None:
    """The version a library's build.sh installs when LIBRARY_VERSION is not set."""
    known = registered(library)
    directory = known.directory() if known else DRIVERS_DIR / library
    try:
        text = (directory / "build.sh").read_text()
    except OSError:
        return None
    return next((found.group(1) for p in _DEFAULT_PIN if (found := p.search(text))), None)


def available_clients() -> list[tuple[str, str]]:
    """The (spec, pinned version) pairs of the NATS clients whose driver and toolchain are on
    this machine: each library, the releases a system package installed, and in containers
    those with a container recipe when a container engine answers."""
    found: list[tuple[str, str]] = []
    for name, library in LIBRARIES.items():
        if not (library.directory() / "build.sh").is_file() or not library.buildable_here():
            continue
        found.append((f"client:{name}", pinned_version(name) or "unknown"))
        found += [
            (f"client:{name}=={version}", version)
            for version, path in library.system_releases
            if path.is_dir()
        ]
    if containers.engine_answers() and shutil.which("docker") is not None:
        found += [
            (f"container:{spec}", version)
            for spec, version in list(found)
            if "==" not in spec and LIBRARIES[spec.removeprefix("client:")].container
        ]
    return found
