"""Drivers built for several releases of their library declare, per release, only what that
release has, decided from the release itself, and answer `unsupported` for an API the release
lacks without calling it: the hello of the oldest and the newest release of each series (and of
older nats.js releases whose API differs), built as the release series builds them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from nats_conformance.harness.clients import client_specs, client_targets
from nats_conformance.harness.clients.client_targets import ClientTarget
from nats_conformance.harness.clients.driver import DriverReply
from nats_conformance.harness.clients.registry import LIBRARIES, ClientError

NATS_GO = LIBRARIES["nats.go"].releases
NATS_JS = LIBRARIES["nats.js"].releases
# The series' oldest nats.go is Debian's package; without it, the next release (the builds
# install nothing from apt in a test).
OLDEST_NATS_GO = (
    NATS_GO[0] if dict(LIBRARIES["nats.go"].system_releases)[NATS_GO[0]].is_dir() else NATS_GO[1]
)

# What each release lacks of its series' newest release, from the library's history (the
# release where the API appeared). The newest nats.go and nats.js releases lack nothing.
LACKS: dict[str, set[str]] = {
    # validateSubject, linked for validate_subject (publish): nats.go 1.48.0; TLSHandshakeFirst
    # (tls_first): 1.31.0.
    f"client:nats.go=={OLDEST_NATS_GO}": {"validate_subject", "tls_first"},
    f"client:nats.go=={NATS_GO[-1]}": set(),
    # Match (headers_op): 2.1.0; js.views.kv: 2.3.0; the object store: 2.8.0; NodeTransport's
    # tlsFirst (tls_first): 2.22.0.
    "client:nats.js==2.0.0": {"headers_op", "kv", "object_store", "tls_first"},
    # kv's Bucket is there, but not js.views, through which the driver creates a bucket.
    "client:nats.js==2.2.0": {"kv", "object_store", "tls_first"},
    f"client:nats.js=={NATS_JS[0]}": {"tls_first"},
    f"client:nats.js=={NATS_JS[-1]}": set(),
}
NEWEST = {"nats.go": f"client:nats.go=={NATS_GO[-1]}", "nats.js": f"client:nats.js=={NATS_JS[-1]}"}
# A call that needs each capability a release may lack, made without a connection: a driver
# that calls a missing API answers something else than `unsupported` (the API's error, or
# `connection`, as the newest release does).
NEEDS: dict[str, tuple[str, dict[str, Any]]] = {
    "validate_subject": ("validate_subject", {"subject": "a b", "use": "publish"}),
    "headers_op": (
        "headers_op",
        {"headers": [], "case": "sensitive", "op": "get", "key": "A", "value": None},
    ),
    "kv": ("jetstream_create", {"kind": "kv", "name": "B", "stream": None, "subjects": None}),
    # Nothing listens on port 1: a release with the option fails to connect.
    "tls_first": (
        "connect",
        {"url": "tls://127.0.0.1:1", "options": {"tls_first": True, "timeout_ms": 500}},
    ),
    "object_store": (
        "jetstream_create",
        {"kind": "object_store", "name": "B", "stream": None, "subjects": None},
    ),
}


@pytest.fixture(scope="module")
def built() -> Iterator[dict[str, ClientTarget]]:
    """Each release's driver, built once (the build cache is shared with the other driver
    tests and with runs); a release that cannot be built here is absent, except in CI."""
    targets: dict[str, ClientTarget] = {}
    yield targets
    for target in targets.values():
        target.close()


def release(built: dict[str, ClientTarget], spec: str) -> ClientTarget:
    if spec not in built:
        target = client_targets.open_client(spec)
        try:
            target.driver().close()  # builds, starts, checks hello
        except ClientError as exc:
            target.close()
            if os.environ.get("CI"):  # CI installs every toolchain: a skip there would hide it
                pytest.fail(f"{spec} must build in CI: {exc}")
            pytest.skip(f"{spec} does not build or start here: {exc}")
        built[spec] = target
    return built[spec]


def call(target: ClientTarget, capability: str) -> DriverReply:
    command, args = NEEDS[capability]
    with target.driver() as process:
        return process.call(command, **args)


@pytest.mark.parametrize("spec", LACKS)
def test_a_release_declares_what_its_api_has(built: dict[str, ClientTarget], spec: str) -> None:
    target = release(built, spec)
    newest = release(built, NEWEST[_lib(spec)])
    assert target.capabilities is not None and newest.capabilities is not None
    assert target.capabilities <= newest.capabilities, target.capabilities - newest.capabilities
    assert newest.capabilities - target.capabilities == LACKS[spec]


@pytest.mark.parametrize(
    ("spec", "capability"),
    [(spec, capability) for spec, lacking in LACKS.items() for capability in sorted(lacking)],
)
def test_an_api_the_release_lacks_is_unsupported_not_called(
    built: dict[str, ClientTarget], spec: str, capability: str
) -> None:
    target = release(built, spec)
    assert target.lacks(capability) is not None
    reply = call(target, capability)
    assert (reply.ok, reply.error_type) == (False, "unsupported"), reply
    # The newest release has the API and uses it: no `unsupported` for the same call.
    newest = call(release(built, NEWEST[_lib(spec)]), capability)
    assert newest.error_type != "unsupported", newest


def test_nats_go_validates_publish_subjects_from_1_48(built: dict[str, ClientTarget]) -> None:
    """The newest nats.go answers validate_subject with its own publish check (no whitespace,
    not empty); it has no separate check for subscribe subjects."""
    with release(built, NEWEST["nats.go"]).driver() as process:
        valid = {
            subject: process.call("validate_subject", subject=subject, use="publish").result
            for subject in ("a.b", "a b", "a\tb", "")
        }
        subscribe = process.call("validate_subject", subject="a.b", use="subscribe")
    assert valid == {
        "a.b": {"valid": True},
        "a b": {"valid": False},
        "a\tb": {"valid": False},
        "": {"valid": False},
    }
    assert (subscribe.ok, subscribe.error_type) == (False, "unsupported"), subscribe


def test_nats_js_name_checks_are_the_releases_own(built: dict[str, ClientTarget]) -> None:
    """validate_name takes the productions the loaded release has a check for: the consumer
    name check (jsutil.minValidation) is exported by the newest release only."""
    answers = {}
    for spec in (f"client:nats.js=={NATS_JS[0]}", NEWEST["nats.js"]):
        with release(built, spec).driver() as process:
            answers[spec] = process.call("validate_name", production="consumer-name", name="c")
    assert answers[f"client:nats.js=={NATS_JS[0]}"].error_type == "unsupported"
    assert answers[NEWEST["nats.js"]].result == {"valid": True}


def _lib(spec: str) -> str:
    return client_specs.parse_client_spec(spec).library
