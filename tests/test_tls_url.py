"""url:tls:// targets: the wire client upgrades to TLS after INFO, against a nats-server that
requires TLS, with a certificate made here for 127.0.0.1 (its key lives in a temp dir only)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all
from nats_conformance.harness.runtime.processes import stop_process
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.kinds import open_target, parse_spec
from nats_conformance.harness.servers.server_targets import _server_info
from nats_conformance.harness.servers.specs import TargetError, TlsOptions
from tests.test_wire import wait_for_ports_file

NATS_SERVER = Path(sys.executable).parent / "nats-server"
CASES = {case.id: case for case in load_all([BUNDLED_DIR]).cases}
# Open and closed endings, MSG and HMSG: each through the upgraded connection.
THROUGH_TLS = [
    "protocol.connect.parse.lower-case-name",
    "protocol.pub.parse.doc-example-hello",
    "protocol.hpub.parse.doc-example-one-header",
    "protocol.framing.parse.unknown.foo",
]


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for IP 127.0.0.1 (its own CA) and its key."""
    cert, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """A nats-server on 127.0.0.1 that requires TLS; yields its port and its CA file."""
    directory = tmp_path_factory.mktemp("tls-server")
    cert, key = self_signed(directory, "server")
    argv = [str(NATS_SERVER), "-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", str(directory)]
    argv += ["--tls", "--tlscert", str(cert), "--tlskey", str(key)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = wait_for_ports_file(directory, proc)
        yield int(url.rsplit(":", 1)[1]), cert
    finally:
        stop_process(proc, 5)


def test_tls_urls_say_how_the_server_is_verified(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    verified = parse_spec(f"url:tls://127.0.0.1:4443?ca={ca}")
    assert (verified.url, verified.tls) == ("tls://127.0.0.1:4443", TlsOptions(ca=str(ca)))
    unverified = parse_spec("url:tls://localhost?insecure")
    assert (unverified.url, unverified.tls) == ("tls://localhost:4222", TlsOptions(ca=None))
    assert parse_spec("url:nats://127.0.0.1:4222").tls is None


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("url:tls://127.0.0.1:4443", "takes ?ca=FILE"),
        ("url:tls://127.0.0.1:4443?verify=no", "takes ?ca=FILE"),
        ("url:tls://127.0.0.1:4443?ca=", "takes ?ca=FILE"),
        ("url:tls://127.0.0.1:4443?ca=/nonexistent/ca.pem", "does not exist"),
        ("url:nats://127.0.0.1:4222?insecure", "names a server only"),
        ("url:tls://nats.invalid:4443?insecure", "not on this machine"),
        ("deviant:info-not-sent:url:tls://127.0.0.1:4443?insecure", "cannot stand in front"),
    ],
)
def test_bad_tls_urls_are_refused_with_the_reason(spec: str, reason: str) -> None:
    with pytest.raises(TargetError, match=reason.replace("?", r"\?")):
        parse_spec(spec)


def test_the_server_requires_tls_in_its_info(tls_server: tuple[int, Path]) -> None:
    port, _ = tls_server
    assert _server_info("127.0.0.1", port)["tls_required"] is True


@pytest.mark.parametrize("verify", ["ca", "insecure"])
def test_wire_cases_run_through_the_upgraded_connection(
    tls_server: tuple[int, Path], verify: str, tmp_path: Path
) -> None:
    port, ca = tls_server
    query = f"ca={ca}" if verify == "ca" else "insecure"
    with open_target(f"url:tls://127.0.0.1:{port}?{query}", state_dir=tmp_path) as target:
        assert target.version() != "unknown"  # read from the plaintext INFO
        for case_id in THROUGH_TLS:
            result = check_case(CASES[case_id], target, transport="tls")
            assert (result.found.outcome, result.found.message) == ("pass", ""), case_id
            assert result.transcript is not None
            notes = [e.data.decode() for e in result.transcript.events if e.direction == "note"]
            assert any(note.startswith("TLS established: TLSv1.") for note in notes)


def test_without_tls_the_server_closes_the_plaintext_connection(
    tls_server: tuple[int, Path], tmp_path: Path
) -> None:
    port, _ = tls_server
    with open_target(f"url:nats://127.0.0.1:{port}", state_dir=tmp_path) as target:
        result = check_case(CASES[THROUGH_TLS[0]], target)
    assert result.found.outcome == "fail"


def test_a_certificate_the_ca_did_not_sign_is_an_error_row(
    tls_server: tuple[int, Path], tmp_path: Path
) -> None:
    port, _ = tls_server
    other_ca, _ = self_signed(tmp_path, "other")
    with open_target(f"url:tls://127.0.0.1:{port}?ca={other_ca}", state_dir=tmp_path) as target:
        result = check_case(CASES[THROUGH_TLS[0]], target, transport="tls")
    assert result.found.outcome == "error"
    assert "TLS handshake with tls://127.0.0.1:" in result.found.message
    assert "certificate verify failed" in result.found.message
