"""Containers on a local Docker engine: the engine's address, labels that name the owning run,
testcontainers set up for this machine, FROM-scratch images from host files, and the removal of
what a killed run left. Containers always use the host network (no bridge exists here)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import processes
from .state import LOCAL_HOSTS

# Where bin/docker-engine keeps its private engine (same variable, same default).
PRIVATE_DOCKER_DIR = Path(
    os.environ.get("NATS_CONFORMANCE_DOCKER_DIR", "/tmp/nats-conformance-docker")
)
LABEL = "nats-conformance"  # every container and image: LABEL=1, plus its owner's identity below
OWNER_LABEL = "nats-conformance.owner-pid"
OWNER_START_LABEL = "nats-conformance.owner-start"
HOST_LABEL = "nats-conformance.host"


class ContainerError(Exception):
    """No usable engine, or an image or container cannot be made; str(e) says why."""


def docker_host() -> str:
    if configured := os.environ.get("DOCKER_HOST"):
        return configured
    private = PRIVATE_DOCKER_DIR / "docker.sock"
    if private.exists():
        return f"unix://{private}"
    return "unix:///var/run/docker.sock"


def docker_client(timeout: float = 10) -> Any:
    """A docker SDK client for the engine that answers; ContainerError says why there is none."""
    host = docker_host()
    parts = urllib.parse.urlsplit(host)
    if parts.scheme != "unix" and not (parts.scheme == "tcp" and parts.hostname in LOCAL_HOSTS):
        # Servers in containers listen on the engine's 127.0.0.1: only a local engine will do.
        raise ContainerError(
            f"DOCKER_HOST={host} is not a local engine (unix:// or tcp://127.0.0.1)"
        )
    try:
        import docker  # the `containers` extra
    except ImportError:
        raise ContainerError(
            "container targets need testcontainers: pip install 'nats-conformance[containers]'"
        ) from None
    if host.startswith("unix://") and not Path(host.removeprefix("unix://")).exists():
        raise ContainerError(f"no Docker engine at {host}: start one with bin/docker-engine start")
    try:
        client = docker.DockerClient(base_url=host, timeout=timeout)  # asks the API version
    except (docker.errors.DockerException, OSError) as exc:
        raise ContainerError(f"the Docker engine at {host} does not answer: {exc}") from None
    return client


def engine_answers() -> bool:
    with contextlib.suppress(ContainerError):
        docker_client(timeout=3).close()
        return True
    return False


def owner_labels() -> dict[str, str]:
    """The labels that let cleanup tell whose container this is, and whether its run is gone."""
    owner_pid, owner_start = processes.owner()
    return {
        LABEL: "1",
        OWNER_LABEL: str(owner_pid),
        OWNER_START_LABEL: str(owner_start),
        HOST_LABEL: socket.gethostname(),
    }


def use_testcontainers() -> Any:
    """Configure testcontainers for this machine (never the user's job), then import it."""
    os.environ["DOCKER_HOST"] = docker_host()
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"  # the reaper image cannot be pulled
    os.environ["TESTCONTAINERS_HOST_OVERRIDE"] = "127.0.0.1"
    os.environ["TESTCONTAINERS_CONNECTION_MODE"] = "docker_host"  # /.dockerenv misleads it
    from testcontainers.core.config import ConnectionMode, testcontainers_config
    from testcontainers.core.container import DockerContainer

    # Imported earlier by someone else, its configuration read the environment then.
    testcontainers_config.ryuk_disabled = True
    testcontainers_config.tc_host_override = "127.0.0.1"
    testcontainers_config.connection_mode_override = ConnectionMode.docker_host
    return DockerContainer


def shared_libraries(binaries: Iterable[Path]) -> list[Path]:
    """What dynamically linked binaries load (ldd), so a FROM-scratch image can hold them."""
    elves = list(binaries)
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
            raise ContainerError(f"ldd: {exc}") from None
        for line in done.stdout.splitlines():
            name, _, rest = line.strip().partition(" => ")
            if "not found" in rest:
                raise ContainerError(f"{name} is needed but not on this machine (ldd: {line})")
            path = (rest or name).split(" (")[0].strip()
            # ldd indents what a file loads (and names each file of several, unindented).
            if line.startswith("\t") and path.startswith("/"):
                found.append(Path(path))
    return sorted(set(found))


def import_image(client: Any, rootfs: bytes, repository: str, tag: str, changes: list[str]) -> str:
    """The image ``repository:tag``, imported from a root filesystem tar unless it exists."""
    import docker

    image = f"{repository}:{tag}"
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.get(image)
        return image
    try:
        client.api.import_image_from_data(
            rootfs, repository=repository, tag=tag, changes=[*changes, f"LABEL {LABEL}=1"]
        )
    except (docker.errors.DockerException, OSError) as exc:
        raise ContainerError(f"cannot import the image {image}: {exc}") from None
    return image


def remove_leftover_containers() -> list[str]:
    """Remove this host's labelled containers whose owner is gone (when an engine answers)."""
    try:
        client = docker_client(timeout=10)
    except ContainerError:
        return []
    import docker

    removed = []
    try:
        # The low-level list: the high-level one inspects each container, and fails on one that
        # another process removes meanwhile.
        for container in client.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
            labels = container.get("Labels") or {}
            if labels.get(HOST_LABEL) != socket.gethostname():
                continue  # another machine's run, on a shared engine
            owner, owner_start = labels.get(OWNER_LABEL, ""), labels.get(OWNER_START_LABEL, "")
            if owner.isdigit() and processes.alive(int(owner), processes.int_or_none(owner_start)):
                continue
            try:
                client.api.stop(container["Id"], timeout=int(processes.STOP_GRACE))
                client.api.remove_container(container["Id"], force=True)
            except docker.errors.APIError:
                continue  # gone, or being removed by another process's cleanup
            removed.append(f"container {container['Id'][:12]} left by run {owner or '?'}")
    finally:
        client.close()
    return removed
