"""Client targets: resolve a client spec to a built driver (harness/drivers/<library>/) and run it.

A spec names a client library and where it runs (see ACCEPTED_FORMS). A ClientTarget builds the
library's driver once into the cache (DEFAULT_STATE_DIR/drivers/<library>-<version|pinned>/) by
running its build.sh, rebuilds it when the driver's sources change, and starts driver processes
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

from harness.clients.driver import DriverError, DriverProcess, capability_names
from harness.runtime import builds, containers, state
from harness.runtime.containers import ContainerError
from harness.runtime.leftovers import cleanup_leftovers

DRIVERS_DIR = Path(__file__).resolve().parents[1] / "drivers"
BUILD_TIMEOUT = 1800.0  # seconds one build may take (a cold Rust or Java build takes minutes)
BUILD_LOG_TAIL = 30  # lines of a failed build's log in its ClientError
# Hangs of a library's driver after which its remaining cases are errors without waiting (the
# first may be the library's answer to one input; a second says the driver is not answering).
HANGS_BEFORE_GIVING_UP = 2
HELLO_TIMEOUT = 30.0  # seconds a freshly built driver has to answer hello (a JVM starts slowly)
IMAGE_REPOSITORY = "nats-conformance/client"
IMAGE_SOURCE_LABEL = "nats-conformance.client-build"  # on an image: the OUT_DIR it holds
SKIPPED_SOURCES = {"__pycache__", "node_modules", "target", ".git"}  # build output, not sources
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
        ),
        # Before 2.9 (2.6.0 checked) the v2 line cannot connect on Node.js 20: its Buffer
        # handling recurses until the stack overflows.
        Library(
            "nats.js",
            "npm nats (v2)",
            ("node", "npm"),
            releases=("2.9.0", "2.13.0", "2.18.0", "2.22.0", "2.29.3"),
        ),
        Library(
            "nats.js-v3", "npm @nats-io/transport-node (v3)", ("node", "npm"), shares=("nats.js",)
        ),
        Library(
            "nats.go",
            "Go module proxy; ==1.22.1 is Debian's golang-github-nats-io-go-nats-dev",
            ("go",),
            container=_binary_recipe,
            releases=("1.22.1", "1.28.0", "1.37.0", "1.44.0", "1.55.0"),
        ),
        Library(
            "nats.c",
            "Debian libnats-dev",
            ("gcc", "pkg-config"),
            files=("/usr/include/nats/nats.h",),
        ),
        Library("async-nats", "crates.io async-nats", ("cargo",)),
        Library("jnats", "Maven Central io.nats:jnats", ("java", "mvn")),
    )
}
DEBIAN_NATS_GO = ("1.22.1", Path("/usr/share/gocode/src/github.com/nats-io/nats.go"))
SERIES = "*"  # the version of `client:<library>==*`: every release of the library's series
ACCEPTED_FORMS = (
    "client:<library>, client:<library>==<version>, container:client:<library>[==<version>], "
    f"client:<library>=={SERIES} (its release series) "
    f"(libraries: {', '.join(LIBRARIES)}; in containers: "
    f"{', '.join(name for name, lib in LIBRARIES.items() if lib.container)}; with a release "
    f"series: {', '.join(name for name, lib in LIBRARIES.items() if lib.releases)})"
)


@dataclass(frozen=True)
class ClientSpec:
    spec: str
    library: str
    version_pin: str | None = None
    container: bool = False

    @property
    def kind(self) -> Literal["client", "container-client"]:
        return "container-client" if self.container else "client"


def parse_client_spec(spec: str) -> ClientSpec:
    """Parse a client spec; ClientError names what is wrong, the accepted forms and libraries."""
    text = spec.strip()

    def bad(reason: str) -> ClientError:
        return ClientError(f"bad client {spec!r}: {reason} (accepted forms: {ACCEPTED_FORMS})")

    container = text.startswith("container:")
    rest = text.removeprefix("container:")
    if not rest.startswith("client:"):
        raise bad("unknown form" if text else "empty spec")
    library, sep, pin = rest.removeprefix("client:").partition("==")
    if library not in LIBRARIES:
        raise bad(f"unknown library {library!r}")
    if sep and not _PIN.fullmatch(pin):
        raise bad(f"{pin!r} is not a version such as 2.16.0")
    if container and LIBRARIES[library].container is None:
        raise bad(f"{library} does not run in a container")
    return ClientSpec(text, library, pin if sep else None, container)


def expand_series(specs: Iterable[str]) -> list[str]:
    """``specs`` with each ``[container:]client:<library>==*`` replaced by one spec per release
    of the library's series, oldest first; ClientError for a library without one."""
    expanded: list[str] = []
    for spec in specs:
        head, sep, version = spec.strip().rpartition("==")
        if not sep or version != SERIES:
            expanded.append(spec)
            continue
        library = head.removeprefix("container:").removeprefix("client:")
        releases = LIBRARIES[library].releases if library in LIBRARIES else ()
        if not releases:
            raise ClientError(f"bad client {spec!r}: no release series for {library!r} "
                              f"(accepted forms: {ACCEPTED_FORMS})")  # fmt: skip
        expanded += [f"{head}=={release}" for release in releases]
    return expanded


def pinned_version(library: str) -> str | None:
    """The version a library's build.sh installs when LIBRARY_VERSION is not set."""
    try:
        text = (DRIVERS_DIR / library / "build.sh").read_text()
    except OSError:
        return None
    return next((found.group(1) for p in _DEFAULT_PIN if (found := p.search(text))), None)


# --- building ------------------------------------------------------------------------------------


def _source_files(library: Library) -> Iterable[tuple[str, Path]]:
    for name in (library.name, *library.shares):
        root = DRIVERS_DIR / name
        for path in sorted(root.rglob("*")):
            parts = path.relative_to(root).parts
            if path.is_file() and not any(p in SKIPPED_SOURCES or p.startswith(".") for p in parts):
                yield f"{name}/{path.relative_to(root)}", path


def _source_hash(library: Library, version_pin: str | None) -> str:
    """What a build depends on: the driver sources (with the directories it shares), the pin."""
    digest = hashlib.sha256(f"{version_pin or ''}\0".encode())
    for name, path in _source_files(library):
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def build_driver(library: str | Library, version_pin: str | None = None) -> Path:
    """The OUT_DIR of a built driver (its executable is OUT_DIR/run): built on first use, and
    again when the driver's sources (or the pin) change. Builds of one OUT_DIR are serialized
    across processes. Each checkout of the drivers builds into its own OUT_DIR, so two
    checkouts sharing the cache never rebuild under each other's running drivers. ``library``: a
    name in LIBRARIES, or a Library of another registry (harness.clients.streaming_clients)."""
    lib = library if isinstance(library, Library) else LIBRARIES[library]
    checkout = hashlib.sha256(str(DRIVERS_DIR).encode()).hexdigest()[:8]
    out = state.DEFAULT_STATE_DIR / "drivers" / f"{lib.name}-{version_pin or 'pinned'}-{checkout}"
    script = DRIVERS_DIR / lib.name / "build.sh"
    if not script.is_file():
        raise ClientError(f"the {lib.name} driver has no build.sh in {script.parent}")
    env = {k: v for k, v in os.environ.items() if k != "LIBRARY_VERSION"}
    if version_pin is not None:
        env["LIBRARY_VERSION"] = version_pin
    step = builds.Step(["bash", str(script), str(script.parent), str(out)], env=env)
    what = f"the {lib.name} driver (LIBRARY_VERSION={version_pin})"
    try:
        return builds.cached_build(
            out,
            _source_hash(lib, version_pin),
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
    """A client library's driver: built on first use, then any number of driver processes."""

    def __init__(self, spec: ClientSpec) -> None:
        self.spec = spec
        self.name = spec.spec
        self.library = spec.library
        self.kind = spec.kind
        # The version asked for, or the pin in build.sh; after the first start, what the driver
        # reports it loaded.
        self.version = spec.version_pin or pinned_version(spec.library) or "unknown"
        self.hello: dict[str, Any] | None = None
        # From a protocol-2 hello: what the library supports through the driver. None: a
        # protocol-1 driver (unknown), or not started yet.
        self.capabilities: frozenset[str] | None = None
        self._lock = threading.Lock()
        self._out: Path | None = None
        self._image: str | None = None
        self._drivers: list[DriverProcess] = []
        self._closed = False
        self._hangs: list[str] = []  # the commands the driver hung on
        _OPEN_CLIENTS.add(self)

    def build(self) -> Path:
        """Build the driver (once; cached across runs); its OUT_DIR."""
        if self._out is None:
            self._out = build_driver(self.library, self.spec.version_pin)
        return self._out

    def _command(self) -> tuple[list[str], Callable[[], None] | None]:
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
            reply = driver.call("hello", timeout=HELLO_TIMEOUT)
        except DriverError as exc:
            raise ClientError(f"the {self.name} driver does not answer hello: {exc}") from None
        if not reply.ok:
            raise ClientError(f"the {self.name} driver refused hello: {reply.error_message}")
        self.hello = reply.result
        declared = reply.result.get("capabilities")
        self.capabilities = frozenset(declared) if declared is not None else None
        if self.spec.version_pin and not _same_version(
            self.spec.version_pin, reply.result["version"]
        ):
            raise ClientError(
                f"the {self.name} driver loaded {self.library} {reply.result['version']}, "
                f"not {self.spec.version_pin}"
            )
        self.version = reply.result["version"]

    def note_hang(self, command: str) -> None:
        """The driver did not answer ``command`` within its deadline."""
        self._hangs.append(command)

    def given_up(self) -> str | None:
        """Why the library's remaining cases are not run (None while they are): its driver hung
        HANGS_BEFORE_GIVING_UP times, so each further case would only wait out a deadline."""
        if len(self._hangs) < HANGS_BEFORE_GIVING_UP:
            return None
        return (
            f"not run: the {self.name} driver hung {len(self._hangs)} times (on "
            f"{', '.join(self._hangs[:HANGS_BEFORE_GIVING_UP])}); its remaining cases are not "
            "waited for"
        )

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
        if not (DRIVERS_DIR / name / "build.sh").is_file() or not _has_tools(library):
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
