"""Client targets: resolve a client spec to a built driver (harness/drivers/<library>/) and run it.

A spec names a client library and where it runs (see ACCEPTED_FORMS). A ClientTarget builds the
library's driver once into the cache (DEFAULT_STATE_DIR/drivers/<library>-<version|pinned>/) by
running its build.sh, rebuilds it when the driver's sources change, and starts driver processes
(harness.driver.DriverProcess) from it: on the host, or in a locally built container image run
with the host network. Nothing it starts outlives the harness: processes get PR_SET_PDEATHSIG,
containers carry the owner labels harness.targets.cleanup_leftovers() looks for.
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
import signal
import socket
import subprocess
import tarfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness import targets
from harness.driver import DriverError, DriverProcess, capability_names

DRIVERS_DIR = Path(__file__).resolve().parent / "drivers"
BUILD_TIMEOUT = 1800.0  # seconds one build may take (a cold Rust or Java build takes minutes)
BUILD_LOG_TAIL = 30  # lines of a failed build's log in its ClientError
HELLO_TIMEOUT = 30.0  # seconds a freshly built driver has to answer hello (a JVM starts slowly)
MARKER = ".nats-conformance-build.json"  # in OUT_DIR, written after a build succeeded
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


def _log_tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").rstrip().splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-BUILD_LOG_TAIL:]) or "(empty log)"


def _run_build(library: Library, version_pin: str | None, out: Path, log: Path) -> float:
    """Run build.sh SOURCE_DIR OUT_DIR; the seconds it took. ClientError with the log's tail."""
    script = DRIVERS_DIR / library.name / "build.sh"
    if not script.is_file():
        raise ClientError(f"the {library.name} driver has no build.sh in {script.parent}")
    env = {k: v for k, v in os.environ.items() if k != "LIBRARY_VERSION"}
    if version_pin is not None:
        env["LIBRARY_VERSION"] = version_pin
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log.open("wb") as output:
        output.write(
            f"$ {script} {script.parent} {out}  (LIBRARY_VERSION={version_pin})\n".encode()
        )
        output.flush()
        try:
            proc = targets._SPAWNER.popen(
                ["bash", str(script), str(script.parent), str(out)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a timeout stops the whole build (compilers, npm, ...)
                close_fds=True,
            )
        except OSError as exc:
            raise ClientError(f"cannot run {script}: {exc}") from None
        try:
            status = proc.wait(BUILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise ClientError(
                f"building the {library.name} driver took more than {BUILD_TIMEOUT:g} s; "
                f"the end of its log ({log}):\n{_log_tail(log)}"
            ) from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever the build left running
    seconds = time.monotonic() - started
    if status != 0 or not os.access(out / "run", os.X_OK):
        problem = f"exit status {status}" if status != 0 else "it wrote no executable OUT_DIR/run"
        raise ClientError(
            f"building the {library.name} driver failed ({problem}) after {seconds:.0f} s; "
            f"the end of its log ({log}):\n{_log_tail(log)}"
        )
    return seconds


def build_driver(library: str, version_pin: str | None = None) -> Path:
    """The OUT_DIR of a built driver (its executable is OUT_DIR/run): built on first use, and
    again when the driver's sources (or the pin) change. Builds of one OUT_DIR are serialized
    across processes."""
    lib = LIBRARIES[library]
    drivers = targets.DEFAULT_STATE_DIR / "drivers"
    out = drivers / f"{library}-{version_pin or 'pinned'}"
    marker = out / MARKER
    with targets._locked(drivers / f".{out.name}.lock"):
        wanted = _source_hash(lib, version_pin)
        with contextlib.suppress(OSError, ValueError, KeyError):
            if json.loads(marker.read_text())["hash"] == wanted and (out / "run").is_file():
                return out
        marker.unlink(missing_ok=True)  # the old build no longer counts, even if this one fails
        seconds = _run_build(lib, version_pin, out, drivers / f"{out.name}.build.log")
        record = {"hash": wanted, "library": library, "pin": version_pin, "seconds": seconds}
        marker.write_text(json.dumps(record))
    return out


def build_seconds(out: Path) -> float | None:
    """How long the build in ``out`` took (None if unknown)."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        return float(json.loads((out / MARKER).read_text())["seconds"])
    return None


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
        for library in _shared_libraries(elves):
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


def _shared_libraries(elves: list[Path]) -> list[Path]:
    """What ELF files load: harness.targets' ldd reading, for many files in one ldd run."""
    found: list[Path] = []
    for start in range(0, len(elves), 200):  # a bounded command line
        batch = elves[start : start + 200]
        try:
            done = subprocess.run(
                ["ldd", *map(str, batch)], capture_output=True, text=True, timeout=60
            )
        except FileNotFoundError:
            return found  # no ldd: a dynamic binary fails at start, with the loader's words
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClientError(f"ldd: {exc}") from None
        for line in done.stdout.splitlines():
            name, _, rest = line.strip().partition(" => ")
            if "not found" in rest:
                raise ClientError(f"{name} is needed but not on this machine (ldd: {line})")
            path = (rest or name).split(" (")[0].strip()
            if line.startswith("\t") and path.startswith("/"):
                found.append(Path(path))
    return found


def _client_image(out: Path, recipe: ContainerRecipe) -> str:
    """A local image of the driver built in ``out``, built once per content; older images of
    the same OUT_DIR are removed."""
    rootfs = _RootFS()
    for path in recipe.paths:
        rootfs.add(path)
    for path in recipe.runtime:
        rootfs.add(path, skip=_unused)
    rootfs.add_libraries()
    tag = rootfs.digest()
    image = f"{IMAGE_REPOSITORY}:{tag}"
    try:
        client = targets._docker_client()
    except targets.TargetError as exc:
        raise ClientError(str(exc)) from None
    import docker

    try:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.get(image)
            return image
        client.api.import_image_from_data(
            rootfs.tar(),
            repository=IMAGE_REPOSITORY,
            tag=tag,
            changes=[
                f"ENTRYPOINT {json.dumps(list(recipe.entrypoint))}",
                f"LABEL {targets.LABEL}=1",
                f"LABEL {IMAGE_SOURCE_LABEL}={json.dumps(str(out))}",
            ],
        )
        for old in client.api.images(filters={"label": f"{IMAGE_SOURCE_LABEL}={out}"}):
            if image not in (old.get("RepoTags") or []):
                with contextlib.suppress(docker.errors.APIError):  # in use: kept
                    client.api.remove_image(old["Id"])
    except (docker.errors.DockerException, OSError) as exc:
        raise ClientError(f"cannot build an image of the driver in {out}: {exc}") from None
    finally:
        client.close()
    return image


def _remove_container(name: str) -> None:
    with contextlib.suppress(targets.TargetError):
        client = targets._docker_client()
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
        owner_pid, owner_start = targets._owner()
        name = f"nats-conformance-client-{uuid.uuid4().hex[:12]}"
        labels = {
            targets.LABEL: "1",
            targets.OWNER_LABEL: str(owner_pid),
            targets.OWNER_START_LABEL: str(owner_start),
            targets.HOST_LABEL: socket.gethostname(),
        }
        argv = ["docker", "run", "-i", "--rm", "--network", "host", "--log-driver", "none"]
        argv += ["--name", name]
        for key, value in labels.items():
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
                env["DOCKER_HOST"] = targets._docker_host()
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
        targets.cleanup_leftovers()  # containers of killed runs
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
    engine = False
    with contextlib.suppress(targets.TargetError):
        targets._docker_client(timeout=3).close()
        engine = shutil.which("docker") is not None
    if engine:
        found += [
            (f"container:{spec}", version)
            for spec, version in list(found)
            if "==" not in spec and LIBRARIES[spec.removeprefix("client:")].container
        ]
    return found
