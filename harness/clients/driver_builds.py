"""Building a library's driver into the cache (DEFAULT_STATE_DIR/drivers/<library>-<version|pinned
|src…>-<drivers dir>/) by running its build.sh, again when what the build depends on changes: the
driver's sources (with the directories it shares), the version, a local checkout it builds
against. The cache, its locks and logs are harness.runtime.builds'."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..runtime import builds, state
from .registry import (
    LIBRARIES,
    LIBRARY_FILE,
    ClientError,
    Library,
)

BUILD_TIMEOUT = 1800.0  # seconds one build may take (a cold Rust or Java build takes minutes)
BUILD_LOG_TAIL = 30  # lines of a failed build's log in its ClientError
SKIPPED_SOURCES = {"__pycache__", "node_modules", "target", ".git"}  # build output, not sources
# In a library's checkout, also what its own builds and installs write (pip writes build/ and
# *.egg-info into the tree it installs, which must not count as a change of the checkout).
SKIPPED_CHECKOUT = SKIPPED_SOURCES | {"build", "dist", "venv"}
CHECKOUT_MAX_FILES = 20_000  # a checkout is one library, not a home directory
CHECKOUT_MAX_BYTES = 512 * 1024 * 1024


def _source_files(library: Library) -> Iterator[tuple[str, Path]]:
    """The files its build reads: its driver directory's and those of the directories it
    shares, less each one's library.json (the registry's data, which no build.sh reads)."""
    for name in (library.name, *library.shares):
        for relative, path in builds.tree_files(library.directory(name), SKIPPED_SOURCES):
            if relative != LIBRARY_FILE:
                yield f"{name}/{relative}", path


def _within_limits(source: Path, files: Iterable[tuple[str, Path]]) -> Iterator[tuple[str, Path]]:
    size = 0
    for count, (relative, path) in enumerate(files, 1):
        size += path.stat().st_size
        if count > CHECKOUT_MAX_FILES or size > CHECKOUT_MAX_BYTES:
            raise ClientError(
                f"{source} holds more than {CHECKOUT_MAX_FILES} files or "
                f"{CHECKOUT_MAX_BYTES >> 20} MiB: give the library's own checkout"
            )
        yield relative, path


def checkout_digest(source: Path) -> str:
    """A digest of the files of a library's checkout (not its VCS data, dependencies or build
    outputs), so a driver built against it is rebuilt when it changes; ClientError beyond
    CHECKOUT_MAX_FILES files or CHECKOUT_MAX_BYTES bytes (not a library's checkout)."""
    digest = hashlib.sha256()
    builds.add_files(digest, _within_limits(source, builds.tree_files(source, SKIPPED_CHECKOUT)))
    return digest.hexdigest()


def _source_hash(library: Library, version_pin: str | None, source: Path | None) -> str:
    """What a build depends on: the driver sources (with the directories it shares), the pin,
    the checkout it builds against."""
    digest = hashlib.sha256(f"{version_pin or ''}\0".encode())
    builds.add_files(digest, _source_files(library))
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
    ``library``: a name in LIBRARIES, or a Library (a NATS Streaming client's)."""
    lib = library if isinstance(library, Library) else LIBRARIES[library]
    script = lib.directory() / "build.sh"
    built = f"src{_short_hash(str(source))}" if source is not None else version_pin or "pinned"
    out = state.DEFAULT_STATE_DIR / "drivers" / f"{lib.name}-{built}-{_short_hash(str(lib.root))}"
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
