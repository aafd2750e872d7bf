"""Client targets: resolve a client spec to a built driver (harness/drivers/<library>/) and run it.

A spec names a client library and where it runs (see accepted_forms()). A ClientTarget builds the
library's driver once into the cache (DEFAULT_STATE_DIR/drivers/<library>-<version|pinned>/) by
running its build.sh, rebuilds it when the driver's sources (or a local checkout of the library it
builds against) change, and starts driver processes
(harness.driver.DriverProcess) from it: on the host, or in a locally built container image run
with the host network. Nothing it starts outlives the harness: processes get PR_SET_PDEATHSIG,
containers carry the owner labels harness.runtime.leftovers.cleanup_leftovers() looks for.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nats_conformance.harness.clients.driver import DriverError, DriverProcess, capability_names
from nats_conformance.harness.results import NAME_LIMIT, bounded
from nats_conformance.harness.runtime import builds, containers, state
from nats_conformance.harness.runtime.containers import ContainerError
from nats_conformance.harness.runtime.leftovers import cleanup_leftovers

DRIVERS_DIR = Path(__file__).resolve().parents[1] / "drivers"
BUILD_TIMEOUT = 1800.0  # seconds one build may take (a cold Rust or Java build takes minutes)
BUILD_LOG_TAIL = 30  # lines of a failed build's log in its ClientError
# Hangs of a library's driver after which its remaining cases are errors without waiting (the
# first may be the library's answer to one input; a second says the driver is not answering).
IMAGE_REPOSITORY = "nats-conformance/client"
IMAGE_SOURCE_LABEL = "nats-conformance.client-build"  # on an image: the OUT_DIR it holds
SKIPPED_SOURCES = {"__pycache__", "node_modules", "target", ".git"}  # build output, not sources
# In a library's checkout, also what its own builds and installs write (pip writes build/ and
# *.egg-info into the tree it installs, which must not count as a change of the checkout).
SKIPPED_CHECKOUT = SKIPPED_SOURCES | {"build", "dist", "venv"}
CHECKOUT_MAX_FILES = 20_000  # a checkout is one library, not a home directory
CHECKOUT_MAX_BYTES = 512 * 1024 * 1024
DRIVER_PREFIX = "driver:"  # driver:COMMAND, any program speaking the driver protocol
DRIVERS_ENV = "NATS_CONFORMANCE_DRIVERS"  # drivers directories from outside, os.pathsep-separated
LIBRARY_FILE = "library.json"  # in an outside drivers directory: a library's registry entry
_PIN = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+~:_-]*")
# How a build.sh writes its default version: PINNED_VERSION=X, PINNED="X", ${LIBRARY_VERSION:-X}.
_DEFAULT_PIN = (
    re.compile(r"\$\{LIBRARY_VERSION:-([^}\"'$\s]+)\}"),
    re.compile(r"^\s*[A-Z_]*PINNED[A-Z_]*=[\"']?([0-9][^\"'\s]*)", re.MULTILINE),
)


class ClientError(Exception):
    """A client spec is wrong, or its driver cannot be built or started; str(e) says why."""


@dataclass(frozen=True)
class Library:
    name: str
    registry: str  # where its build.sh gets the library from
    tools: tuple[str, ...]  # commands the build needs on PATH
    files: tuple[str, ...] = ()  # files the build needs (system packages)
    shares: tuple[str, ...] = ()  # other driver directories its build.sh uses
    # Container clients: from OUT_DIR, the image's files and command; None: no containers.
    container: Callable[[Path], ContainerRecipe] | None = None
    # The release series `client:<name>==*` runs, oldest first, ending with the pinned version:
    # releases years apart, each one its driver builds and runs against.
    releases: tuple[str, ...] = ()
    # Whether its build.sh builds against a local checkout given as LIBRARY_SOURCE.
    from_source: bool = False
    root: Path | None = None  # the drivers directory holding it; None: the bundled DRIVERS_DIR

    def directory(self, name: str | None = None) -> Path:
        """Its driver directory (or that of ``name``, a directory it shares)."""
        return (self.root or DRIVERS_DIR) / (name or self.name)


@dataclass(frozen=True)
class ContainerRecipe:
    """A FROM-scratch image of a built driver: ``paths`` (files or directories, kept at their
    host paths, with what they link to and load), ``runtime`` (directories added less what no
    driver loads, see _unused) and the command it runs."""

    paths: tuple[Path, ...]
    entrypoint: tuple[str, ...]
    runtime: tuple[Path, ...] = ()


def _python_recipe(out: Path) -> ContainerRecipe:
    # The venv (its python links to the host interpreter), the driver, the standard library.
    python = out / "venv" / "bin" / "python"
    return ContainerRecipe(
        (out / "venv", out / "driver.py"),
        (str(python), "-I", str(out / "driver.py")),
        runtime=(_python_stdlib(python),),
    )


def _binary_recipe(out: Path) -> ContainerRecipe:
    # nats.go's build.sh writes a static (CGO_ENABLED=0) binary.
    return ContainerRecipe((out / "driver",), (str(out / "driver"),))


def _python_stdlib(python: Path) -> Path:
    """The standard library directory of a venv's interpreter."""
    try:
        done = subprocess.run(
            [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClientError(f"cannot run {python}: {exc}") from None
    if done.returncode != 0:
        raise ClientError(f"{python} does not name its standard library: {done.stderr.strip()}")
    return Path(done.stdout.strip())


LIBRARIES: dict[str, Library] = {
    lib.name: lib
    for lib in (
        Library(
            "nats-py",
            "PyPI nats-py",
            ("python3",),
            container=_python_recipe,
            releases=("2.0.0", "2.4.0", "2.7.2", "2.10.0", "2.16.0"),
            from_source=True,
        ),
        # Before 2.9 (2.6.0 checked) the v2 line cannot connect on Node.js 20: its Buffer
        # handling recurses until the stack overflows.
        Library(
            "nats.js",
            "npm nats (v2)",
            ("node", "npm"),
            releases=("2.9.0", "2.13.0", "2.18.0", "2.22.0", "2.29.3"),
            from_source=True,
        ),
        Library(
            "nats.js-v3",
            "npm @nats-io/transport-node (v3)",
            ("node", "npm"),
            shares=("nats.js",),
            from_source=True,
        ),
        Library(
            "nats.go",
            "Go module proxy; ==1.22.1 is Debian's golang-github-nats-io-go-nats-dev",
            ("go",),
            container=_binary_recipe,
            releases=("1.22.1", "1.28.0", "1.37.0", "1.44.0", "1.55.0"),
            from_source=True,
        ),
        Library(
            "nats.c",
            "Debian libnats-dev",
            ("gcc", "pkg-config"),
            files=("/usr/include/nats/nats.h",),
        ),
        Library("async-nats", "crates.io async-nats", ("cargo",), from_source=True),
        Library("jnats", "Maven Central io.nats:jnats", ("java", "mvn"), from_source=True),
    )
}
DEBIAN_NATS_GO = ("1.22.1", Path("/usr/share/gocode/src/github.com/nats-io/nats.go"))
SERIES = "*"  # the version of `client:<library>==*`: every release of the library's series


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


def from_source_names() -> list[str]:
    """The libraries whose driver builds against a local checkout (client:<library>@<path>),
    the NATS Streaming clients' included."""
    from nats_conformance.harness.clients import streaming_clients  # it imports this module

    every = {**LIBRARIES, **streaming_clients.LIBRARIES}
    return [name for name, library in every.items() if library.from_source]


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


def check_driver_commands(specs: Iterable[str]) -> None:
    """Start each driver: spec's program once and ask it hello, so a program that is missing or
    does not speak the protocol stops a run before anything runs; ClientError says why."""
    for spec in specs:
        if spec.strip().startswith(DRIVER_PREFIX):
            with open_client(spec) as client:
                client.driver().close()


# --- drivers directories from outside the suite --------------------------------------------------


def extend_registry(dirs: Iterable[Path]) -> list[str]:
    """Add the libraries of outside drivers directories (``dirs``, then those in
    $NATS_CONFORMANCE_DRIVERS) to LIBRARIES: each subdirectory with a build.sh is a library of
    that name, described by its library.json. Their names, in order; ClientError for a
    directory that is missing, a library.json that is wrong, or a name already taken."""
    from_env = [Path(p) for p in os.environ.get(DRIVERS_ENV, "").split(os.pathsep) if p]
    added: list[str] = []
    for root in [*dirs, *from_env]:
        if not root.is_dir():
            raise ClientError(f"drivers directory {root} is not a directory")
        for folder in sorted(p for p in root.resolve().iterdir() if (p / "build.sh").is_file()):
            library = _outside_library(folder)
            known = LIBRARIES.get(library.name)
            if known is not None and known.root != library.root:
                where = known.root or "the suite"
                raise ClientError(
                    f"{folder}: library {library.name!r} is already registered (by {where})"
                )
            LIBRARIES[library.name] = library
            added.append(library.name)
    return added


def _outside_library(folder: Path) -> Library:
    """The registry entry of the driver directory ``folder`` from its library.json:
    ``registry`` (text), optional ``tools``, ``files``, ``shares`` (lists of text) and
    ``source`` (whether build.sh builds against LIBRARY_SOURCE)."""
    path = folder / LIBRARY_FILE
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ClientError(f"{path}: cannot read the library's registry entry: {exc}") from None
    lists = ("tools", "files", "shares")
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("registry"), str)
        or not all(_texts(entry.get(key, [])) for key in lists)
        or not isinstance(entry.get("source", False), bool)
    ):
        raise ClientError(
            f'{path}: needs {{"registry": TEXT}} and optionally "tools", "files", '
            '"shares" (lists of text) and "source" (true or false)'
        )
    return Library(
        folder.name,
        entry["registry"],
        *(tuple(entry.get(key, [])) for key in lists),
        from_source=entry.get("source", False),
        root=folder.parent,
    )


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def pinned_version(library: str) -> str | None:
    """The version a library's build.sh installs when LIBRARY_VERSION is not set."""
    registered = LIBRARIES.get(library)
    directory = registered.directory() if registered else DRIVERS_DIR / library
    try:
        text = (directory / "build.sh").read_text()
    except OSError:
        return None
    return next((found.group(1) for p in _DEFAULT_PIN if (found := p.search(text))), None)


# --- building ------------------------------------------------------------------------------------


def _tree_files(root: Path, skipped: set[str]) -> Iterable[tuple[str, Path]]:
    """(relative name, path) of the files under ``root``, sorted, outside hidden directories,
    ``skipped`` names and *.egg-info (metadata an install writes into the tree)."""
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and not any(
            p in skipped or p.startswith(".") or p.endswith(".egg-info") for p in parts
        ):
            yield str(path.relative_to(root)), path


def _source_files(library: Library) -> Iterable[tuple[str, Path]]:
    for name in (library.name, *library.shares):
        for relative, path in _tree_files(library.directory(name), SKIPPED_SOURCES):
            yield f"{name}/{relative}", path


def checkout_digest(source: Path) -> str:
    """A digest of the files of a library's checkout (not its VCS data, dependencies or build
    outputs), so a driver built against it is rebuilt when it changes; ClientError beyond
    CHECKOUT_MAX_FILES files or CHECKOUT_MAX_BYTES bytes (not a library's checkout)."""
    digest = hashlib.sha256()
    size = 0
    for count, (relative, path) in enumerate(_tree_files(source, SKIPPED_CHECKOUT), 1):
        size += path.stat().st_size
        if count > CHECKOUT_MAX_FILES or size > CHECKOUT_MAX_BYTES:
            raise ClientError(
                f"{source} holds more than {CHECKOUT_MAX_FILES} files or "
                f"{CHECKOUT_MAX_BYTES >> 20} MiB: give the library's own checkout"
            )
        digest.update(relative.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _source_hash(library: Library, version_pin: str | None, source: Path | None) -> str:
    """What a build depends on: the driver sources (with the directories it shares), the pin,
    the checkout it builds against."""
    digest = hashlib.sha256(f"{version_pin or ''}\0".encode())
    for name, path in _source_files(library):
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    if source is not None:
        digest.update(f"{source}\0{checkout_digest(source)}".encode())
    return digest.hexdigest()


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def build_driver(
    library: str | Library, version_pin: str | None = None, source: Path | None = None
) -> Path:
    """The OUT_DIR of a built driver (its executable is OUT_DIR/run): built on first use, and
    again when the driver's sources (or the pin, or the files of the checkout ``source`` it
    builds against, given to build.sh as LIBRARY_SOURCE) change. Builds of one OUT_DIR are
    serialized across processes. Each checkout of the drivers builds into its own OUT_DIR, so
    two checkouts sharing the cache never rebuild under each other's running drivers.
    ``library``: a name in LIBRARIES, or a Library of another registry
    (harness.clients.streaming_clients)."""
    lib = library if isinstance(library, Library) else LIBRARIES[library]
    script = lib.directory() / "build.sh"
    built = f"src{_short_hash(str(source))}" if source is not None else version_pin or "pinned"
    drivers = _short_hash(str(lib.root or DRIVERS_DIR))
    out = state.DEFAULT_STATE_DIR / "drivers" / f"{lib.name}-{built}-{drivers}"
    if not script.is_file():
        raise ClientError(f"the {lib.name} driver has no build.sh in {script.parent}")
    env = {k: v for k, v in os.environ.items() if k not in ("LIBRARY_VERSION", "LIBRARY_SOURCE")}
    if version_pin is not None:
        env["LIBRARY_VERSION"] = version_pin
    if source is not None:
        env["LIBRARY_SOURCE"] = str(source)
    step = builds.Step(["bash", str(script), str(script.parent), str(out)], env=env)
    what = f"the {lib.name} driver (" + (
        f"LIBRARY_SOURCE={source})" if source is not None else f"LIBRARY_VERSION={version_pin})"
    )
    try:
        return builds.cached_build(
            out,
            _source_hash(lib, version_pin, source),
            lambda: os.access(out / "run", os.X_OK),
            lambda log: builds.run_step(step, log, BUILD_TIMEOUT, what, BUILD_LOG_TAIL),
        )
    except builds.BuildError as exc:
        raise ClientError(str(exc)) from None


# --- container images ----------------------------------------------------------------------------


def _elf(path: Path) -> bool:
    with contextlib.suppress(OSError), path.open("rb") as handle:
        return handle.read(4) == b"\x7fELF"
    return False


# What no driver in an image loads from a language runtime: Python's tests, GUI, build and
# packaging parts, optimized bytecode (drivers run without -O), the interpreter's own packages.
_UNUSED_NAMES = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data"}
_UNUSED_NAMES |= {"site-packages", "dist-packages"}


def _unused(path: Path) -> bool:
    name = path.name
    return (
        name in _UNUSED_NAMES
        or name.startswith(("config-3", "_tkinter"))
        or name.endswith((".opt-1.pyc", ".opt-2.pyc"))
    )


class _RootFS:
    """The files of a FROM-scratch image, each at its host path: symlinks kept and followed,
    and the shared libraries (ldd) of every ELF file added."""

    def __init__(self) -> None:
        self.files: dict[str, Path] = {}  # name in the image -> host path
        self._elves: list[Path] = []

    def add(self, path: Path, skip: Callable[[Path], bool] = lambda path: False) -> None:
        """Add ``path`` (a directory with its contents, except what ``skip`` says)."""
        path = Path(os.path.abspath(path))
        name = str(path).lstrip("/")
        if name in self.files or skip(path):
            return
        if path.is_symlink():
            self.files[name] = path
            self.add(path.parent / os.readlink(path), skip)
        elif path.is_dir():
            for child in sorted(path.iterdir()):
                self.add(child, skip)
        elif path.is_file():
            self.files[name] = path
            if _elf(path):
                self._elves.append(path)

    def add_libraries(self) -> None:
        """Add what the ELF files added so far load (one ldd for all: it lists them all)."""
        elves, self._elves = self._elves, []
        try:
            loaded = containers.shared_libraries(elves)
        except ContainerError as exc:
            raise ClientError(str(exc)) from None
        for library in loaded:
            self.add(library)

    def digest(self) -> str:
        digest = hashlib.sha256()
        for name, path in sorted(self.files.items()):
            digest.update(name.encode() + b"\0")
            if path.is_symlink():
                digest.update(b"->" + os.readlink(path).encode())
            else:
                stat = path.stat()
                digest.update(f"{stat.st_size}:{stat.st_mtime_ns}:{stat.st_mode}".encode())
        return digest.hexdigest()[:16]

    def tar(self) -> bytes:
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as tar:
            for name, path in sorted(self.files.items()):
                tar.add(str(path), arcname=name, recursive=False)
        return data.getvalue()


def _client_image(out: Path, recipe: ContainerRecipe) -> str:
    """A local image of the driver built in ``out``, built once per content; older images of
    the same OUT_DIR are removed."""
    rootfs = _RootFS()
    for path in recipe.paths:
        rootfs.add(path)
    for path in recipe.runtime:
        rootfs.add(path, skip=_unused)
    rootfs.add_libraries()
    try:
        client = containers.docker_client()
    except ContainerError as exc:
        raise ClientError(str(exc)) from None
    import docker

    changes = [
        f"ENTRYPOINT {json.dumps(list(recipe.entrypoint))}",
        f"LABEL {IMAGE_SOURCE_LABEL}={json.dumps(str(out))}",
    ]
    try:
        image = containers.import_image(
            client, rootfs.tar(), IMAGE_REPOSITORY, rootfs.digest(), changes
        )
        for old in client.api.images(filters={"label": f"{IMAGE_SOURCE_LABEL}={out}"}):
            if image not in (old.get("RepoTags") or []):
                with contextlib.suppress(docker.errors.APIError):  # in use: kept
                    client.api.remove_image(old["Id"])
    except (ContainerError, docker.errors.DockerException, OSError) as exc:
        raise ClientError(f"cannot build an image of the driver in {out}: {exc}") from None
    finally:
        client.close()
    return image


def _remove_container(name: str) -> None:
    with contextlib.suppress(ContainerError):
        client = containers.docker_client()
        import docker

        try:
            client.api.remove_container(name, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: already being removed (--rm)
                raise
        finally:
            client.close()


# --- targets -------------------------------------------------------------------------------------

_OPEN_CLIENTS: weakref.WeakSet[ClientTarget] = weakref.WeakSet()


class ClientTarget:
    """A client library's driver: built on first use (a driver: spec's program is run as it
    is), then any number of driver processes."""

    def __init__(self, spec: ClientSpec) -> None:
        self.spec = spec
        self.name = spec.spec
        self.library = spec.library
        self.kind = spec.kind
        # The version asked for, or the pin in build.sh; after the first start, what the driver
        # reports it loaded (a checkout's or a driver: program's is known only then).
        pinned = None if spec.source or spec.command else pinned_version(spec.library)
        self.version = spec.version_pin or pinned or "unknown"
        self.hello: dict[str, Any] | None = None
        # From a protocol-2 hello: what the library supports through the driver. None: a
        # protocol-1 driver (unknown), or not started yet.
        self.capabilities: frozenset[str] | None = None
        self._lock = threading.Lock()
        self._out: Path | None = None
        self._image: str | None = None
        self._drivers: list[DriverProcess] = []
        self._closed = False
        _OPEN_CLIENTS.add(self)

    def build(self) -> Path:
        """Build the driver (once; cached across runs); its OUT_DIR."""
        if self.spec.command:
            raise ClientError(f"{self.name} is a program of its own: it has no build")
        if self._out is None:
            self._out = build_driver(self.library, self.spec.version_pin, self.spec.source)
        return self._out

    def _command(self) -> tuple[list[str], Callable[[], None] | None]:
        if self.spec.command:
            return list(self.spec.command), None
        out = self.build()
        recipe = LIBRARIES[self.library].container
        if not self.spec.container or recipe is None:
            return [str(out / "run")], None
        if self._image is None:
            self._image = _client_image(out, recipe(out))
        name = f"nats-conformance-client-{uuid.uuid4().hex[:12]}"
        argv = ["docker", "run", "-i", "--rm", "--network", "host", "--log-driver", "none"]
        argv += ["--name", name]
        for key, value in containers.owner_labels().items():
            argv += ["--label", f"{key}={value}"]
        return [*argv, self._image], lambda: _remove_container(name)

    def driver(self) -> DriverProcess:
        """Start a new driver process (building the driver first if needed); the first one
        is asked hello, which must name the protocol and gives the version loaded."""
        with self._lock:
            if self._closed:
                raise ClientError(f"client {self.name} is closed")
            command, cleanup = self._command()
            env = dict(os.environ)
            if self.spec.container:
                env["DOCKER_HOST"] = containers.docker_host()
                if shutil.which("docker") is None:
                    raise ClientError(
                        "container clients need the docker CLI (apt-get install docker.io)"
                    )
            driver = DriverProcess.start(command, env=env, name=self.name, cleanup=cleanup)
            self._drivers = [d for d in self._drivers if not d.closed] + [driver]
            if self.hello is None:
                self._check_hello(driver)
            return driver

    def _check_hello(self, driver: DriverProcess) -> None:
        try:
            reply = driver.call("hello")  # its deadline allows for a JVM's slow start
        except DriverError as exc:
            raise ClientError(f"the {self.name} driver does not answer hello: {exc}") from None
        if not reply.ok:
            raise ClientError(f"the {self.name} driver refused hello: {reply.error_message}")
        # Its names are stored bounded: every row repeats them (capabilities are the schema's
        # words).
        self.hello = {
            key: bounded(value, NAME_LIMIT) if isinstance(value, str) else value
            for key, value in reply.result.items()
        }
        if self.spec.command:  # the program says which library it drives
            self.library = self.hello["library"]
        declared = reply.result.get("capabilities")
        self.capabilities = frozenset(declared) if declared is not None else None
        if self.spec.version_pin and not _same_version(
            self.spec.version_pin, reply.result["version"]
        ):
            raise ClientError(
                f"the {self.name} driver loaded {self.library} {self.hello['version']}, "
                f"not {self.spec.version_pin}"
            )
        self.version = self.hello["version"]

    def lacks(self, capability: str) -> str | None:
        """Why a case needing ``capability`` is skipped (the library lacks it), without a call
        to the driver beyond the first hello; None when it has it or the driver does not say
        (a protocol-1 driver: the case runs and an ``unsupported`` answer skips it then)."""
        if capability not in capability_names():
            raise ValueError(f"unknown capability {capability!r}")
        if self.hello is None:
            self.driver().close()  # started only for its hello
        if self.capabilities is None or capability in self.capabilities:
            return None
        return f"{self.library} {self.version} lacks {capability} (its driver's hello says so)"

    def close(self) -> None:
        """Stop every driver process this target started."""
        with self._lock:
            self._closed = True
            drivers, self._drivers = self._drivers, []
        for driver in drivers:
            driver.close()
        _OPEN_CLIENTS.discard(self)

    def __enter__(self) -> ClientTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ClientTarget({self.name!r}, version={self.version!r})"


def _same_version(pin: str, loaded: str) -> bool:
    """Whether a driver that reports ``loaded`` has the version pinned (a Debian pin such as
    3.4.1-1+b1 names upstream 3.4.1)."""
    return loaded.removeprefix("v") in (pin, pin.split("-")[0].split(":")[-1])


@atexit.register
def _close_open_clients() -> None:
    for client in list(_OPEN_CLIENTS):
        client.close()


def open_client(spec: str) -> ClientTarget:
    """Resolve ``spec``; the driver is built when the first driver process is asked for."""
    parsed = parse_client_spec(spec)
    if parsed.container:
        cleanup_leftovers()  # containers of killed runs
    return ClientTarget(parsed)


def _has_tools(library: Library) -> bool:
    return all(shutil.which(tool) for tool in library.tools) and all(
        Path(f).is_file() for f in library.files
    )


def available_clients() -> list[tuple[str, str]]:
    """The (spec, pinned version) pairs whose driver and toolchain are on this machine."""
    found: list[tuple[str, str]] = []
    for name, library in LIBRARIES.items():
        if not (library.directory() / "build.sh").is_file() or not _has_tools(library):
            continue
        found.append((f"client:{name}", pinned_version(name) or "unknown"))
        if name == "nats.go" and DEBIAN_NATS_GO[1].is_dir():
            found.append((f"client:{name}=={DEBIAN_NATS_GO[0]}", DEBIAN_NATS_GO[0]))
    if containers.engine_answers() and shutil.which("docker") is not None:
        found += [
            (f"container:{spec}", version)
            for spec, version in list(found)
            if "==" not in spec and LIBRARIES[spec.removeprefix("client:")].container
        ]
    return found
