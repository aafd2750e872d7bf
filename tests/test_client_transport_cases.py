"""Client-role cases of the transports themselves (vectors/client-transport.json): the fake server
speaks another transport than the library is asked for where a case says so, tells the case what
its handshakes saw (the reference's reading of the client's first bytes), and a client that sends
its CONNECT in clear under TLS first fails the must row, while one that starts the handshake
passes it; nats-py and nats.go through their drivers."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import client_script, protocol, vectors
from nats_conformance.conformance.transport_model import (
    OPENING_NOTE,
    OPENINGS,
    TLS_RECORD,
    opening,
    opening_note,
)
from nats_conformance.conformance.transports import TRANSPORTS
from nats_conformance.conformance.vector_values import Mismatch
from nats_conformance.conformance.verdicts import settle
from nats_conformance.harness.clients import scripts as client_scripts
from nats_conformance.harness.clients.client_specs import parse_client_spec
from nats_conformance.harness.clients.client_targets import ClientTarget, open_client
from nats_conformance.harness.clients.driver import TRANSPORT_CAPABILITIES, DriverReply
from nats_conformance.harness.clients.fake_server import HOST, FakeServer
from nats_conformance.harness.clients.registry import ClientError
from nats_conformance.harness.results import Checked
from nats_conformance.harness.runtime.certs import run_certificates
from nats_conformance.harness.runtime.streams import SocketStream, Stream, open_stream

CASES = [c for c in vectors.load_all([vectors.BUNDLED_DIR]).cases if c.group == "client.transport"]
BY_ID = {case.id: case for case in CASES}
TLS_FIRST_CASE = BY_ID["client.transport.tls-first-handshake-before-info"]
TLS_REQUIRED_CASE = BY_ID["client.transport.info-tls-required-client-starts-the-handshake"]
WAIT = 5.0
CONNECT = b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n'


# --- the reference's reading of a client's first bytes ------------------------------------------


@pytest.mark.parametrize(
    ("data", "read"),
    [(b"", "nothing"),
     (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "a TLS handshake record"),
     (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", "an HTTP request"),
     (CONNECT, "bytes in clear: CONNECT"),
     (b"\x17\x03\x03\x00\x10", "bytes in clear: b'\\x17\\x03\\x03\\x00\\x10'")],
)  # fmt: skip
def test_opening_reads_what_a_client_sent_first(data: bytes, read: str) -> None:
    assert opening(data) == read


OPS = [protocol.Ping(), protocol.Pong(), protocol.Connect({"verbose": False}),
       protocol.Sub("a.b", None, "1"), protocol.Pub("a", None, b"x")]  # fmt: skip


@given(st.sampled_from(OPS))
def test_nats_in_clear_is_read_as_its_operations_name(op: protocol.Op) -> None:
    data = protocol.encode(op)
    assert isinstance(data, bytes)
    assert opening(data) == f"bytes in clear: {data.split()[0].decode()}"


@given(st.binary(max_size=40))
def test_only_a_handshake_record_header_reads_as_tls(data: bytes) -> None:
    assert (opening(data) == "a TLS handshake record") == data.startswith(b"\x16\x03")


# --- the vectors --------------------------------------------------------------------------------


def test_every_case_is_pinned_and_a_server_transport_needs_the_pin() -> None:
    assert len(CASES) == 8 and all(c.data["input"]["transport"] in TRANSPORTS for c in CASES)
    pinned = {c.data["input"]["transport"] for c in CASES}
    assert pinned == {"tcp", "tls", "tls-first", "ws", "ws-deflate"}
    with pytest.raises(Mismatch, match="needs the case's own"):
        client_script.evaluate({"server": {"transport": "tcp"}, "steps": [{"open": True}]})
    with pytest.raises(Mismatch, match="needs the case's transport"):
        client_script.evaluate({"opening": "nothing", "steps": [{"open": True}]})
    for case in CASES:
        script = case.data["input"]
        assert client_script.runs_over(script, script["transport"])
        assert not any(client_script.runs_over(script, t) for t in TRANSPORTS
                       if t != script["transport"])  # fmt: skip
    assert client_script.runs_over({"steps": []}, "wss")  # unpinned: every transport


def test_the_schema_names_the_openings_the_reference_reads() -> None:
    schema = json.loads((vectors.BUNDLED_DIR.parent / "schemas" / "vector.schema.json").read_text())
    assert tuple(schema["$defs"]["script"]["properties"]["opening"]["enum"]) == OPENINGS


@pytest.mark.parametrize(
    ("seen", "problem"),
    [([opening_note(b"\x16\x03\x01"), "TLS established: TLSv1.3"], None),
     ([opening_note(CONNECT)],
      "the client's first bytes: bytes in clear: CONNECT, expected a TLS handshake record"),
     (["WebSocket upgrade: HTTP 101"],
      "the client's first bytes: not seen, expected a TLS handshake record")],
)  # fmt: skip
def test_an_opening_is_judged_on_the_first_reading_reported(
    seen: list[str], problem: str | None
) -> None:
    assert client_script.opening_problem(TLS_RECORD, seen) == problem


# --- the fake server speaking another transport, and what it reports -----------------------------


def _context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=run_certificates().ca)


def test_a_fake_server_can_serve_plain_tcp_at_a_tls_url_and_reports_the_first_bytes() -> None:
    seen: list[str] = []
    with FakeServer(transport="tls", serves="tcp", report=seen.append) as server:
        assert server.url.startswith("tls://")
        stream = open_stream("tcp", HOST, server.port, timeout=WAIT)
        info = stream.receive(1 << 16, timeout=WAIT)
        assert info.startswith(b"INFO ") and b"tls_required" not in info
        stream.send(CONNECT, timeout=WAIT)
        conn = server.accept(timeout=WAIT)
        assert conn is not None and conn.wait_connect(timeout=WAIT) is not None
        stream.close()
    assert seen == ["the client's first bytes: bytes in clear: CONNECT"]


@pytest.mark.parametrize(("serves", "offered"), [("ws", True), ("ws-deflate", False)])
def test_a_fake_websocket_server_declines_or_accepts_compression_as_the_case_says(
    serves: str, offered: bool
) -> None:
    seen: list[str] = []
    client = "ws-deflate" if offered else "ws"
    with FakeServer(transport=client, serves=serves, report=seen.append) as server:
        stream = open_stream(client, HOST, server.port, timeout=WAIT)
        assert stream.receive(1 << 16, timeout=WAIT).startswith(b"INFO ")
        assert server.accept(timeout=WAIT) is not None
        stream.close()
    offer = "permessage-deflate" if offered else "none"
    assert seen[0] == "the client's first bytes: an HTTP request"
    assert seen[1].startswith("WebSocket upgrade: HTTP 101, no extension (the client offered")
    assert offer in seen[1]


@pytest.mark.parametrize("upgrades", [False, True])
def test_a_fake_server_marked_tls_available_serves_clients_in_clear_and_over_tls(
    upgrades: bool,
) -> None:
    with FakeServer(transport="tcp", serves="tls", allow_non_tls=True) as server:
        assert server.url.startswith("nats://")
        stream = open_stream("tls", HOST, server.port, timeout=WAIT)
        info = stream.receive(1 << 16, timeout=WAIT)
        assert b'"tls_available":true' in info and b"tls_required" not in info
        if upgrades:
            assert isinstance(stream, SocketStream)
            stream.start_tls(_context(), HOST, timeout=WAIT)
        stream.send(CONNECT, timeout=WAIT)
        assert b"PONG" in stream.receive(1 << 16, timeout=WAIT)
        conn = server.accept(timeout=WAIT)
        assert conn is not None
        assert ("TLS established" in conn.transcript.text()) == upgrades
        stream.close()
    with pytest.raises(ValueError, match="marks a server of tls"):
        FakeServer(transport="tcp", allow_non_tls=True)
    with pytest.raises(Mismatch, match="marks a server of tls, not of ws"):
        client_script.evaluate(
            {"transport": "ws", "server": {"allow_non_tls": True}, "steps": [{"open": True}]}
        )


def test_without_report_the_fake_server_looks_at_nothing_first() -> None:
    """An ordinary script's server hands a plain connection out at once, before the client has
    said anything (no look at its first bytes)."""
    with FakeServer(transport="tcp") as server:
        sock = socket.create_connection((HOST, server.port), timeout=WAIT)
        try:
            assert server.accept(timeout=1.0) is not None
        finally:
            sock.close()


# --- negative and positive controls: driver stand-ins, in process --------------------------------


class _StandIn:
    """A driver stand-in for the unit layer: its library "connects" by dialling the fake server
    over ``dials`` (the suite's own client streams), sending CONNECT and PING and waiting for the
    PONG, whatever the connect options ask. Over plain TCP to a TLS-first server that is a client
    that sends its CONNECT in clear."""

    def __init__(self, dials: str) -> None:
        self.dials = dials
        self.stream: Stream | None = None

    def call(self, cmd: str, *, timeout: float | None = None, **args: Any) -> DriverReply:
        if cmd == "connect":
            port = int(args["url"].rpartition(":")[2])
            try:
                self.stream = open_stream(self.dials, HOST, port, timeout=2.0, context=_context())
                if isinstance(self.stream, SocketStream) and self.dials == "tls":
                    assert self.stream.receive(1 << 16, timeout=2.0).startswith(b"INFO ")
                    self.stream.start_tls(_context(), HOST, timeout=2.0)
                self.stream.send(CONNECT, timeout=2.0)
                got = b""
                deadline = time.monotonic() + 2.0
                while b"PONG" not in got:
                    data = self.stream.receive(1 << 16, timeout=deadline - time.monotonic())
                    if not data:
                        return DriverReply(False, {}, "connection", "closed by the server")
                    got += data
            except (OSError, ConnectionError) as exc:
                return DriverReply(False, {}, "connection", str(exc))
            return DriverReply(True, {}, None, None)
        if cmd == "flush":
            assert self.stream is not None
            self.stream.send(b"PING\r\n", timeout=2.0)
            return DriverReply(b"PONG" in self.stream.receive(1 << 16, timeout=2.0), {}, None, None)
        if cmd == "close":
            if self.stream is not None:
                self.stream.close()
            return DriverReply(True, {}, None, None)
        return DriverReply(False, {}, "unsupported", f"the stand-in has no {cmd}")

    def events(self, *, timeout: float, count: int | None = None) -> list[dict[str, Any]]:
        return []

    def check_alive(self) -> None:
        pass

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


def _stand_in_client(dials: str) -> ClientTarget:
    """A client target declaring TLS first whose driver is the in-process stand-in."""
    client = ClientTarget(parse_client_spec("client:nats-py"))
    client.hello = {"version": "0.0.0", "capabilities": ["tls", "tls_first"]}
    client.capabilities = frozenset(client.hello["capabilities"])
    client.version = "0.0.0"
    client.driver = lambda: _StandIn(dials)  # type: ignore[method-assign]
    return client


def _row(client: ClientTarget, case: vectors.Case, transport: str) -> Checked:
    [row] = client_scripts.run_scripts(client, [case], transport)
    return row


def test_a_client_that_sends_connect_in_clear_under_tls_first_fails_the_must_row() -> None:
    row = _row(_stand_in_client("tcp"), TLS_FIRST_CASE, "tls-first")
    assert row.case.case_id == f"{TLS_FIRST_CASE.id}@tls-first"
    assert TLS_FIRST_CASE.level == "must"
    assert settle(TLS_FIRST_CASE.level, row.found.outcome) == "fail", row.found.message
    assert row.found.message.startswith(
        "the client's first bytes: bytes in clear: CONNECT, expected a TLS handshake record; "
        "the library did not connect"
    )
    assert row.found.observed == json.dumps(
        ["the client's first bytes: bytes in clear: CONNECT",
         "ended: the client's first bytes: bytes in clear: CONNECT, expected a TLS handshake "
         "record; did not connect (connection)"], separators=(",", ":"), ensure_ascii=False
    )  # fmt: skip


def test_a_client_that_starts_tls_first_passes_the_must_row() -> None:
    row = _row(_stand_in_client("tls-first"), TLS_FIRST_CASE, "tls-first")
    assert row.found.outcome == "pass", row.found.message
    assert "a TLS handshake record" in row.found.observed


@pytest.mark.parametrize(("dials", "outcome"), [("tcp", "fail"), ("tls", "pass")])
def test_a_client_told_tls_required_must_start_the_handshake(dials: str, outcome: str) -> None:
    """Asked for plain TCP, it gets an INFO with tls_required: one that sends CONNECT in clear
    fails the must row, one that upgrades passes it."""
    row = _row(_stand_in_client(dials), TLS_REQUIRED_CASE, "tcp")
    assert TLS_REQUIRED_CASE.level == "must" and row.case.case_id == TLS_REQUIRED_CASE.id
    assert row.found.outcome == outcome, row.found.message
    upgraded = json.dumps(f"{OPENING_NOTE}{TLS_RECORD}") in row.found.observed
    assert upgraded == (outcome == "pass")


def test_a_library_lacking_a_cases_transport_gets_a_skip_naming_the_capability() -> None:
    client = _stand_in_client("tcp")
    client.capabilities = frozenset({"tls"})
    client.hello = {"version": "0.0.0", "capabilities": ["tls"]}
    row = _row(client, TLS_FIRST_CASE, "tls-first")
    assert row.found.outcome == "skip" and "lacks tls_first" in row.found.message
    # Over a transport the case is not pinned to, the case has no row at all.
    assert list(client_scripts.run_scripts(client, [TLS_FIRST_CASE], "tls")) == []


# --- real libraries -----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["client:nats-py", "client:nats.go"])
def library(request: pytest.FixtureRequest) -> Iterator[ClientTarget]:
    with open_client(request.param) as client:
        try:
            client.driver().close()  # built (cached across sessions), its hello read
        except ClientError as exc:
            pytest.skip(f"{request.param} does not build or start here: {exc}")
        yield client


def test_libraries_run_every_transport_case_they_declare_the_capabilities_for(
    library: ClientTarget,
) -> None:
    for case in CASES:
        transport = case.data["input"]["transport"]
        row = _row(library, case, transport)
        lacking = library.lacks_transport(transport)
        if lacking is not None:
            needed = TRANSPORT_CAPABILITIES[transport]
            assert row.found.outcome == "skip" and any(c in lacking for c in needed)
            continue
        # Both declare TLS first and pass its must row; the info rows record, failing nobody.
        assert settle(case.level, row.found.outcome) == "pass", (case.id, row.found.message)
        assert row.found.observed.startswith("[\"the client's first bytes: "), row.found.observed
