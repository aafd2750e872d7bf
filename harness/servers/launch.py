"""Launching a nats-server for one configuration: as a local process, or in a container of a
locally built FROM-scratch image on the host network; bound to 127.0.0.1 on a port it picks,
ready when its log says so."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import tarfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runtime import builds, containers, processes
from ..runtime.containers import ContainerError
from .specs import RunningServer, TargetError

READY_TIMEOUT = 5.0  # seconds from launch to "Server is ready"
EARLY_OUTPUT_LIMIT = 16 << 20  # log bytes a server may write before it is ready (a few kB is usual)
IMAGE_REPOSITORY = "nats-conformance/nats-server"
_READY = re.compile("Server is ready")


@dataclass(frozen=True)
class Launched:
    """A started server: where it listens, how to stop it, and why it is gone (None: runs)."""

    running: RunningServer
    stop: Callable[[], None]
    exited: Callable[[], str | None]
    pid: int | None = None  # a local process's (None: a container, or not ours)
    websocket_port: int | None = None  # its WebSocket listener's, when it has one


def ports_file_port(run_dir: Path, listener: str = "nats") -> int | None:
    """A listener's port (the client port by default, ``websocket`` for the WebSocket one) from
    nats-server's ports file (written for ``-p -1 --ports_file_dir``)."""
    for ports_file in run_dir.glob("*.ports"):
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError, TypeError):
            url = json.loads(ports_file.read_text())[listener][0]
            return urllib.parse.urlsplit(url).port
    return None


# Given the log read so far, the port once the server is ready (None: not yet).
Ready = Callable[[processes.LogWatch], int | None]


def when_logged(line: re.Pattern[str], port: Callable[[], int | None]) -> Ready:
    """Ready once the log has a match of ``line`` and ``port`` knows the port."""
    seen = False

    def ready(watch: processes.LogWatch) -> int | None:
        nonlocal seen
        seen = seen or any(line.search(piece) for piece in watch.pieces())
        return port() if seen else None

    return ready


def _nats_server_ready(run_dir: Path) -> Ready:
    return when_logged(_READY, lambda: ports_file_port(run_dir))


def _await_ready(
    log: Path,
    exited: Callable[[], str | None],
    what: str,
    extra: Callable[[], str],
    ready: Ready,
    timeout: float | None = None,
) -> int:
    """Wait until ``ready`` gives the port (at most ``timeout`` s, READY_TIMEOUT by default);
    return it. ``exited`` says why the server is gone (None while it runs); ``extra`` adds
    output that is not in the log file to an error.
    """
    timeout = READY_TIMEOUT if timeout is None else timeout
    deadline = time.monotonic() + timeout
    watch = processes.LogWatch(log)
    while True:
        port = ready(watch)
        if port is not None:
            return port
        gone = exited()
        if watch.size > EARLY_OUTPUT_LIMIT:
            gone = f"wrote {watch.size} bytes of log before it was ready"
        if gone is not None or time.monotonic() > deadline:
            problem = gone or f"was not ready within {timeout:g} s"
            raise TargetError(
                f"{what} {problem}; the end of its log:\n{processes.log_tail(log)}{extra()}"
            )
        time.sleep(0.01)


def _server_args(run_dir: Path, conf: Path, log: Path) -> list[str]:
    return [
        *("-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", str(run_dir)),
        *("-c", str(conf), "-l", str(log)),
    ]


def launch_process(binary: Path, run_dir: Path, version: str, pids_dir: Path) -> Launched:
    conf, log = run_dir / "server.conf", run_dir / "server.log"
    argv = [str(binary), *_server_args(run_dir, conf, log)]
    return run_server(argv, log, version, pids_dir, _nats_server_ready(run_dir))


def run_server(
    argv: list[str],
    log: Path,
    version: str,
    pids_dir: Path,
    ready: Ready,
    timeout: float | None = None,
) -> Launched:
    """Start ``argv`` (its output appended to ``log``) and wait until ``ready`` gives its port
    on 127.0.0.1; a TargetError with the end of its log when it exits or is not ready in time."""
    try:
        launched = processes.launch(argv, log, pids_dir)
    except OSError as exc:
        raise TargetError(f"cannot run {argv[0]}: {exc}") from None

    def exited() -> str | None:
        code = launched.proc.poll()
        if code is None and processes.start_time(launched.proc.pid) is None:
            return "is exiting"  # a zombie whose threads are still ending: gone all the same
        return None if code is None else f"exited with status {code}"

    try:
        what = f"{argv[0]} (pid {launched.proc.pid})"
        port = _await_ready(log, exited, what, lambda: "", ready, timeout)
    except BaseException:
        launched.stop()
        raise
    url = f"nats://127.0.0.1:{port}"
    running = RunningServer(url, "127.0.0.1", port, version, log)
    return Launched(running, launched.stop, exited, launched.proc.pid)


def image_for(binary: Path, client: Any) -> str:
    """A local FROM-scratch image of ``binary`` (plus its shared libraries), built once per hash."""
    try:
        files = {"nats-server": binary}
        files |= {str(lib).lstrip("/"): lib for lib in containers.shared_libraries([binary])}
        digest = hashlib.sha256()
        builds.add_files(digest, sorted(files.items()))
        rootfs = io.BytesIO()
        with tarfile.open(fileobj=rootfs, mode="w", dereference=True) as tar:
            for name, path in sorted(files.items()):
                tar.add(str(path), arcname=name)
        changes = ['ENTRYPOINT ["/nats-server"]']
        tag = digest.hexdigest()[:16]
        return containers.import_image(client, rootfs.getvalue(), IMAGE_REPOSITORY, tag, changes)
    except ContainerError as exc:
        raise TargetError(f"cannot build an image of {binary}: {exc}") from None


def launch_container(
    image: str, run_dir: Path, version: str, mounts: tuple[Path, ...] = ()
) -> Launched:
    docker_container = containers.use_testcontainers()
    conf, log = run_dir / "server.conf", run_dir / "server.log"
    # The host network (no bridge exists); the run dir at the same path inside and out.
    container = docker_container(
        image,
        command=_server_args(run_dir, conf, log),
        network_mode="host",
        labels=containers.owner_labels(),
    ).with_volume_mapping(str(run_dir), str(run_dir), "rw")
    for mount in mounts:  # read-only, at the same path (the run's certificates)
        container = container.with_volume_mapping(str(mount), str(mount), "ro")
    import docker

    try:
        container.start()
    except (docker.errors.DockerException, OSError) as exc:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            container.stop()
        raise TargetError(f"cannot start a container of {image}: {exc}") from None

    def stop() -> None:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            container.get_wrapped_container().stop(timeout=int(processes.STOP_GRACE))
        with contextlib.suppress(docker.errors.DockerException, OSError):
            container.stop()  # removes it (SIGKILL if it still runs)

    def exited() -> str | None:
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status in ("created", "running"):
            return None
        return f"exited with status {wrapped.attrs['State'].get('ExitCode')}"

    def container_output() -> str:
        out, err = container.get_logs()
        text = (out + err).decode(errors="replace").strip()
        return f"\ncontainer output:\n{text}" if text else ""

    what = f"container {container.get_wrapped_container().short_id} of {image}"
    try:
        port = _await_ready(log, exited, what, container_output, _nats_server_ready(run_dir))
    except BaseException:
        stop()
        raise
    url = f"nats://127.0.0.1:{port}"
    return Launched(RunningServer(url, "127.0.0.1", port, version, log), stop, exited)
