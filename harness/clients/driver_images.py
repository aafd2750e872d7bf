"""Container images of built drivers (container:client:<library>): FROM-scratch images of a
driver's files at their host paths with what they link to and load, built locally once per
content, run with the host network. A library's library.json names its recipe (RECIPES)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..runtime import containers
from ..runtime.containers import ContainerError
from .registry import ClientError

IMAGE_REPOSITORY = "nats-conformance/client"
IMAGE_SOURCE_LABEL = "nats-conformance.client-build"  # on an image: the OUT_DIR it holds


@dataclass(frozen=True)
class ContainerRecipe:
    """A FROM-scratch image of a built driver: ``paths`` (files or directories, kept at their
    host paths, with what they link to and load), ``runtime`` (directories added less what no
    driver loads, see _unused) and the command it runs."""

    paths: tuple[Path, ...]
    entrypoint: tuple[str, ...]
    runtime: tuple[Path, ...] = ()


def _python_venv(out: Path) -> ContainerRecipe:
    # The venv (its python links to the host interpreter), the driver, the standard library.
    python = out / "venv" / "bin" / "python"
    return ContainerRecipe(
        (out / "venv", out / "driver.py"),
        (str(python), "-I", str(out / "driver.py")),
        runtime=(_python_stdlib(python),),
    )


def _static_binary(out: Path) -> ContainerRecipe:
    # A build.sh writing a static binary (nats.go's: CGO_ENABLED=0).
    return ContainerRecipe((out / "driver",), (str(out / "driver"),))


# By the name a library.json gives as "container" (its schema lists the same names).
RECIPES: dict[str, Callable[[Path], ContainerRecipe]] = {
    "python-venv": _python_venv,
    "static-binary": _static_binary,
}


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


def client_image(out: Path, recipe_name: str) -> str:
    """A local image of the driver built in ``out`` by the recipe ``recipe_name`` (RECIPES),
    built once per content; older images of the same OUT_DIR are removed."""
    recipe = RECIPES[recipe_name](out)
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


def remove_container(name: str) -> None:
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
