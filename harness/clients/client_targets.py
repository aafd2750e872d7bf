"""Client targets: a client spec (harness.clients.client_specs) resolved to its library's driver,
built once (harness.clients.driver_builds) and run as any number of driver processes
(harness.clients.driver.DriverProcess): on the host, or in a locally built container image
(harness.clients.driver_images) run with the host network. Nothing it starts outlives the
harness: processes get PR_SET_PDEATHSIG, containers carry the owner labels
harness.runtime.leftovers.cleanup_leftovers() looks for.
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..results import NAME_LIMIT, bounded
from ..runtime import containers
from ..runtime.leftovers import cleanup_leftovers
from .client_specs import (
    DRIVER_PREFIX,
    ClientSpec,
    parse_client_spec,
)
from .driver import TRANSPORT_CAPABILITIES, DriverError, DriverProcess, capability_names
from .driver_builds import build_driver
from .driver_images import client_image, remove_container
from .registry import LIBRARIES, ClientError, pinned_version

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
            self._image = client_image(out, recipe)
        name = f"nats-conformance-client-{uuid.uuid4().hex[:12]}"
        argv = ["docker", "run", "-i", "--rm", "--network", "host", "--log-driver", "none"]
        argv += ["--name", name]
        for key, value in containers.owner_labels().items():
            argv += ["--label", f"{key}={value}"]
        return [*argv, self._image], lambda: remove_container(name)

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

    def lacks_transport(self, transport: str) -> str | None:
        """Why a case over ``transport`` is skipped: the first capability the transport needs
        that the library lacks (``lacks``), or None."""
        needed = TRANSPORT_CAPABILITIES[transport]
        return next(filter(None, (self.lacks(capability) for capability in needed)), None)

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


def check_driver_commands(specs: Iterable[str]) -> None:
    """Start each driver: spec's program once and ask it hello, so a program that is missing or
    does not speak the protocol stops a run before anything runs; ClientError says why."""
    for spec in specs:
        if spec.strip().startswith(DRIVER_PREFIX):
            with open_client(spec) as client:
                client.driver().close()
