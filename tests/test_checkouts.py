"""client:LIB@PATH for every bundled library that takes a checkout: its driver builds against a
checkout made of the library's real sources (what the pinned build downloads from its registry:
the Go module cache, node_modules, the cargo registry, Maven Central's sources jar), reports the
checkout's version, and builds again when a file of the checkout changes. nats-py's is in
test_plug_in.py. A cold build takes from seconds (Go, npm) to minutes (Rust): each library is a
test of its own, `-k LIBRARY` picks one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from nats_conformance.harness.clients import client_targets, registry, streaming_clients
from nats_conformance.harness.clients.client_specs import parse_client_spec
from nats_conformance.harness.clients.driver_builds import build_driver
from nats_conformance.harness.clients.registry import ClientError
from nats_conformance.harness.runtime import builds, state


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "DEFAULT_STATE_DIR", tmp_path / "state")


def _go_module(module: str, version: str, into: Path) -> Path:
    done = subprocess.run(["go", "mod", "download", "-json", f"{module}@v{version}"],
                          capture_output=True, text=True, check=True, timeout=300)  # fmt: skip
    shutil.copytree(json.loads(done.stdout)["Dir"], into)
    for path in [into, *into.rglob("*")]:  # the module cache is read-only
        path.chmod(path.stat().st_mode | 0o200)
    return into


def _maven_sources(artifact: str, version: str, into: Path) -> Path:
    """A checkout's layout (src/main/java) of the library's sources jar from Maven Central."""
    subprocess.run(["mvn", "--batch-mode", "--quiet", "dependency:get",
                    f"-Dartifact=io.nats:{artifact}:{version}:jar:sources"],
                   check=True, timeout=300, capture_output=True)  # fmt: skip
    repository = Path.home() / ".m2" / "repository" / "io" / "nats" / artifact / version
    with zipfile.ZipFile(repository / f"{artifact}-{version}-sources.jar") as jar:
        java = [name for name in jar.namelist() if name.endswith(".java")]
        jar.extractall(into / "src" / "main" / "java", members=java)
    return into


def _npm_checkout(library: str, packages: dict[str, str], into: Path) -> Path:
    """A built checkout of npm ``packages`` ({directory in the checkout: package}) as `npm
    install` leaves it: every dependency in its node_modules, the packages themselves linked
    there as workspaces are (from the pinned driver's install)."""
    out = build_driver(_library(library))
    shutil.copytree(out / "node_modules", into / "node_modules", symlinks=True)
    for directory, package in packages.items():
        installed = into / "node_modules" / package
        if directory == ".":
            shutil.copytree(installed, into, dirs_exist_ok=True)
            shutil.rmtree(installed)
            continue
        installed.rename(into / directory)
        installed.symlink_to(os.path.relpath(into / directory, installed.parent))
    return into


def _crate(name: str, version: str, into: Path) -> Path:
    """The crate's sources from the cargo registry (downloaded by the pinned driver's build)."""
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found = sorted(home.glob(f"registry/src/*/{name}-{version}"))
    if not found:
        subprocess.run(["cargo", "fetch", "--manifest-path",
                        str(registry.DRIVERS_DIR / "async-nats" / "Cargo.toml")],
                       check=True, timeout=600, capture_output=True)  # fmt: skip
        found = sorted(home.glob(f"registry/src/*/{name}-{version}"))
    return Path(shutil.copytree(found[0], into))


V3 = {d: f"@nats-io/{p}" for d, p in
      (("core", "nats-core"), ("transport-node", "transport-node"), ("jetstream", "jetstream"),
       ("kv", "kv"), ("obj", "obj"))}  # fmt: skip
# library -> (how to make its checkout in a directory, the version its driver then reports)
CHECKOUTS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "nats.go": (lambda d: _go_module("github.com/nats-io/nats.go", "1.55.0", d), "1.55.0"),
    "nats.js": (lambda d: _npm_checkout("nats.js", {".": "nats"}, d), "2.29.3"),
    "nats.js-v3": (lambda d: _npm_checkout("nats.js-v3", V3, d), "3.4.0"),
    "jnats": (lambda d: _maven_sources("jnats", "2.26.2", d), "development"),
    "async-nats": (lambda d: _crate("async-nats", "0.51.0", d), "0.51.0"),
    "stan.go": (lambda d: _go_module("github.com/nats-io/stan.go", "0.10.4", d), "0.10.4"),
    "node-nats-streaming": (
        lambda d: _npm_checkout("node-nats-streaming", {".": "node-nats-streaming"}, d),
        "0.3.2",
    ),
    "java-nats-streaming": (lambda d: _maven_sources("java-nats-streaming", "2.2.3", d), "local"),
}


def _library(name: str) -> registry.Library:
    library = registry.registered(name)
    assert library is not None
    return library


def test_every_library_that_takes_a_checkout_has_a_test_here() -> None:
    assert set(CHECKOUTS) | {"nats-py"} == set(registry.from_source_names())


def _hello_version(name: str, checkout: Path) -> tuple[str, Path]:
    """The version the driver built against ``checkout`` reports, and its OUT_DIR."""
    if name in registry.STREAMING_LIBRARIES:
        client = streaming_clients.parse_spec(f"client:{name}@{checkout}")
        assert client is not None
        client.driver().close()
        return client.version, build_driver(_library(name), source=checkout)
    with client_targets.open_client(f"client:{name}@{checkout}") as target:
        target.driver()
        return target.version, target.build()


@pytest.mark.parametrize("name", CHECKOUTS)
def test_a_driver_builds_against_a_checkout_and_again_when_it_changes(
    name: str, tmp_path: Path
) -> None:
    lacking = [tool for tool in _library(name).tools if shutil.which(tool) is None]
    if lacking and not os.environ.get("CI"):
        pytest.skip(f"{name} needs {', '.join(lacking)}")
    make, version = CHECKOUTS[name]
    checkout = make(tmp_path / "checkout" / name)
    reported, out = _hello_version(name, checkout)
    assert reported == version
    built = json.loads((out / builds.MARKER).read_text())["hash"]
    (checkout / "CHANGES.md").write_text("a change of the checkout\n")
    assert _hello_version(name, checkout) == (version, out)  # the same OUT_DIR, built again
    assert json.loads((out / builds.MARKER).read_text())["hash"] != built


@pytest.mark.parametrize("name", ["nats.c"])
def test_a_library_that_cannot_take_a_checkout_is_refused_naming_those_that_can(
    name: str, tmp_path: Path
) -> None:
    with pytest.raises(ClientError) as raised:
        parse_client_spec(f"client:{name}@{tmp_path}")
    reason = str(raised.value)
    assert f"the {name} driver cannot build against a local checkout" in reason
    assert "async-nats, jnats" in reason and "stan.go" in reason and "\n" not in reason
