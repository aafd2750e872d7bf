"""The fake server against a raw socket client, and the client checks (the script vectors) against
real drivers."""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import protocol, vectors
from nats_conformance.harness.clients import fake_server
from nats_conformance.harness.clients import scripts as client_scripts
from nats_conformance.harness.clients.client_targets import ClientTarget, open_client
from nats_conformance.harness.clients.fake_server import (
    DEFAULT_INFO,
    PADDING_FIELD,
    FakeConnection,
    FakeServer,
    HeadersNotEnabled,
    encode,
    err_op,
    hmsg_op,
    msg_op,
    split,
)
from nats_conformance.harness.clients.registry import ClientError, available_clients
from nats_conformance.harness.clients.rows import write_result
from nats_conformance.harness.results import ResultRow, ResultsWriter, RunContext, read_rows

TIMEOUT = 2.0
READ_LIMITS = protocol.Limits(max_control_line=1 << 20, max_payload=1 << 20)


class RawClient:
    """A blocking socket client that parses what the fake server sends with the reference."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.parser = protocol.Parser(protocol.Direction.SERVER, limits=READ_LIMITS)
        self.chunks: list[bytes] = []
        self.closed = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self, count: int, *, timeout: float = TIMEOUT) -> list[protocol.Event]:
        """Events until ``count`` came, the server closed, or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        out: list[protocol.Event] = []
        while len(out) < count and not self.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                break
            if not data:
                self.closed = True
                break
            self.chunks.append(data)
            out.extend(self.parser.feed(data))
        return out

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def client(server: FakeServer) -> Iterator[RawClient]:
    raw = RawClient(server.port)
    yield raw
    raw.close()


def _connected(
    server: FakeServer, client: RawClient, options: str = '{"verbose":false}'
) -> FakeConnection:
    """Read the INFO, send CONNECT and PING, wait for the PONG."""
    assert isinstance(client.read(1)[0], protocol.Info)
    client.send(b"CONNECT " + options.encode() + b"\r\nPING\r\n")
    conn = server.accept(timeout=TIMEOUT)
    assert conn is not None
    ops = client.read(1)
    assert ops and isinstance(ops[-1], protocol.Pong), ops
    return conn


def _fake_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fake-nats")]


# --- INFO -------------------------------------------------------------------------------------


def test_info_comes_first_with_the_listening_port(server: FakeServer, client: RawClient) -> None:
    info = client.read(1)[0]
    assert isinstance(info, protocol.Info)
    assert info.options["port"] == server.port
    assert info.options["headers"] is True
    assert info.options["proto"] == 1
    assert info.options["max_payload"] == DEFAULT_INFO["max_payload"]
    assert server.url == f"nats://127.0.0.1:{server.port}"


def test_info_fields_merge_and_none_removes() -> None:
    with FakeServer(
        info={"max_payload": 16, "headers": None, "connect_urls": ["127.0.0.1:1"]}
    ) as s:
        raw = RawClient(s.port)
        info = raw.read(1)[0]
        raw.close()
    assert isinstance(info, protocol.Info)
    assert info.options["max_payload"] == 16
    assert "headers" not in info.options
    assert info.options["connect_urls"] == ["127.0.0.1:1"]


@pytest.mark.parametrize("size", [0, 2048, 200_000])
def test_info_size_pads_to_at_least_the_size(size: int) -> None:
    with FakeServer(info_size=size) as s:
        line = s.info_line()
        raw = RawClient(s.port)
        info = raw.read(1)[0]
        raw.close()
    assert len(line) >= size
    assert isinstance(info, protocol.Info)
    assert (PADDING_FIELD in info.options) == (size > len(encode(protocol.Info(s.info))))
    assert info.options["port"] == s.port


def test_info_bytes_replace_the_line() -> None:
    with FakeServer(info_bytes=b"INFO not json\r\n") as s:
        raw = RawClient(s.port)
        events = raw.read(1)
        raw.close()
    assert isinstance(events[0], protocol.ProtocolError)
    assert events[0].reason == "invalid_json"


# --- the reference model's answers ------------------------------------------------------------


def test_connect_is_parsed_and_ping_answered(server: FakeServer, client: RawClient) -> None:
    conn = _connected(server, client, '{"verbose":false,"name":"raw"}')
    connect = conn.wait_connect(timeout=0)
    assert connect is not None and connect.options["name"] == "raw"
    client.send(b"ping\r\n")  # operation names are case-insensitive
    assert client.read(1) == [protocol.Pong()]


def test_verbose_gets_ok_except_for_ping(server: FakeServer, client: RawClient) -> None:
    assert isinstance(client.read(1)[0], protocol.Info)
    client.send(b'CONNECT {"verbose":true}\r\nSUB foo 1\r\nPING\r\n')
    assert client.read(3) == [protocol.Ok(), protocol.Ok(), protocol.Pong()]


def test_own_subscription_gets_the_message(server: FakeServer, client: RawClient) -> None:
    conn = _connected(server, client)
    client.send(b"SUB foo.* 7\r\nPUB foo.bar 2\r\nhi\r\n")
    assert client.read(1) == [protocol.Msg("foo.bar", "7", None, b"hi")]
    assert conn.sid_for("foo.bar") == "7"
    assert conn.sid_for("other") is None


def test_protocol_error_gets_err_and_close(server: FakeServer, client: RawClient) -> None:
    conn = _connected(server, client)
    client.send(b"FOO bar\r\n")
    events = client.read(2)
    assert events == [protocol.Err("'Unknown Protocol Operation'")]
    assert client.closed
    assert conn.parse_error is not None and conn.parse_error.reason == "unknown_operation"
    assert conn.wait_for(protocol.Sub, timeout=TIMEOUT) is None  # returns at once: finished


def test_model_answers_off_sends_nothing_but_pongs() -> None:
    with FakeServer(model_answers=False) as s:
        raw = RawClient(s.port)
        _connected(s, raw, '{"verbose":true}')
        raw.send(b"SUB foo 1\r\nPUB foo 1\r\nx\r\nPING\r\n")
        answered = raw.read(5, timeout=0.3)
        raw.send(b"FOO\r\n")
        after_error = raw.read(1, timeout=0.3)
        raw.close()
    assert answered == [protocol.Pong()]  # no +OK, no MSG
    assert after_error == []  # no -ERR
    assert not raw.closed


def test_withheld_pong(server: FakeServer, client: RawClient) -> None:
    conn = _connected(server, client)
    conn.answer_pings = False
    client.send(b"PING\r\n")
    assert client.read(1, timeout=0.3) == []
    assert conn.wait_for(protocol.Ping, timeout=TIMEOUT, after=2) is not None


def test_delayed_pong(server: FakeServer, client: RawClient) -> None:
    conn = _connected(server, client)
    conn.pong_delay = 0.25
    sent = time.monotonic()
    client.send(b"PING\r\nPING\r\n")
    assert client.read(2) == [protocol.Pong(), protocol.Pong()]
    assert time.monotonic() - sent >= 0.25


# --- scripting ---------------------------------------------------------------------------------


def test_wait_for_matches_and_times_out(server: FakeServer, client: RawClient) -> None:
    conn = _connected(server, client)
    client.send(b"SUB a 1\r\nSUB b  q\t2\r\nUNSUB 2 5\r\n")
    sub = conn.wait_for(protocol.Sub, timeout=TIMEOUT, match=lambda op: op.subject == "b")
    assert sub == protocol.Sub("b", "q", "2")
    assert conn.wait_for(protocol.Unsub, timeout=TIMEOUT) == protocol.Unsub("2", 5)
    started = time.monotonic()
    assert conn.wait_for(protocol.Pub, timeout=0.2) is None
    assert 0.2 <= time.monotonic() - started < 0.2 + TIMEOUT
    after = conn.count()
    assert conn.wait_for(protocol.Sub, timeout=0.05, after=after) is None
    assert [op.sid for op in conn.ops(protocol.Sub)] == ["1", "2"]


def test_received_bytes_are_the_clients_bytes(server: FakeServer, client: RawClient) -> None:
    conn = _connected(server, client)
    client.send(b"PUB foo  3\r\nabc\r\n")
    assert conn.wait_for(protocol.Pub, timeout=TIMEOUT) == protocol.Pub("foo", None, b"abc")
    assert conn.received_bytes().endswith(b"PUB foo  3\r\nabc\r\n")


def test_send_split_into_pieces_with_pauses(server: FakeServer, client: RawClient) -> None:
    conn = _connected(server, client)
    data = msg_op("foo", "1", b"hello", "r")
    start = len(conn.transcript.events)
    assert conn.send(data, split_at=[3, 10, 3, 0, len(data)], pause=0.02)
    got = client.read(1)
    assert got == [protocol.Msg("foo", "1", "r", b"hello")]
    sent = [e for e in conn.transcript.events[start:] if e.direction == "send"]
    assert [e.data for e in sent] == [data[:3], data[3:10], data[10:]]
    assert all(b.at - a.at >= 0.015 for a, b in itertools.pairwise(sent))


@given(st.binary(max_size=40), st.lists(st.integers(-5, 50), max_size=10))
def test_split_pieces_join_to_the_data(data: bytes, offsets: list[int]) -> None:
    pieces = split(data, offsets)
    assert b"".join(pieces) == data
    assert all(pieces) or data == b""
    assert len(pieces) == len({o for o in offsets if 0 < o < len(data)}) + 1


def test_reactions_see_every_event_and_may_answer() -> None:
    seen: list[protocol.Event] = []

    def answer(conn: FakeConnection, event: protocol.Event) -> None:
        seen.append(event)
        if isinstance(event, protocol.Pub) and event.reply:
            sid = conn.sid_for(event.reply)
            if sid is not None:
                conn.send(hmsg_op(event.reply, sid, b"NATS/1.0 503\r\n\r\n", b""))

    with FakeServer(reactions=[answer]) as s:
        raw = RawClient(s.port)
        _connected(s, raw, '{"verbose":false,"headers":true}')
        raw.send(b"SUB _INBOX.x.* 9\r\nPUB svc _INBOX.x.1 0\r\n\r\n")
        got = raw.read(1)
        raw.close()
    assert got == [protocol.HMsg("_INBOX.x.1", "9", None, b"NATS/1.0 503\r\n\r\n", b"")]
    assert [type(e) for e in seen] == [protocol.Connect, protocol.Ping, protocol.Sub, protocol.Pub]


def test_a_failing_reaction_is_noted_and_the_connection_goes_on() -> None:
    def broken(conn: FakeConnection, event: protocol.Event) -> None:
        raise RuntimeError("script bug")

    with FakeServer(reactions=[broken]) as s:
        raw = RawClient(s.port)
        conn = _connected(s, raw)
        raw.send(b"PING\r\n")
        assert raw.read(1) == [protocol.Pong()]
        raw.close()
    assert "raised RuntimeError: script bug" in conn.transcript.text()


def test_server_operations_come_from_the_reference_encoder() -> None:
    data = (
        err_op("Invalid Subject")
        + msg_op("a", "1", b"x")
        + hmsg_op("a", "1", b"NATS/1.0\r\n\r\n", b"")
    )
    events, incomplete = protocol.parse(data, protocol.Direction.SERVER)
    assert events == [
        protocol.Err("'Invalid Subject'"),
        protocol.Msg("a", "1", None, b"x"),
        protocol.HMsg("a", "1", None, b"NATS/1.0\r\n\r\n", b""),
    ]
    assert not incomplete
    with pytest.raises(ValueError, match="cannot encode"):
        msg_op("a b", "1", b"")


def test_send_to_a_client_that_does_not_read_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake_server, "SEND_TIMEOUT", 0.2)
    with FakeServer() as s:
        raw = RawClient(s.port)  # never reads
        conn = s.accept(timeout=TIMEOUT)
        assert conn is not None
        started = time.monotonic()
        assert not conn.send(b"x" * (64 << 20))
        assert time.monotonic() - started < TIMEOUT
        assert "send failed" in conn.transcript.text()
        raw.close()
    assert not _fake_threads()


# --- closing ------------------------------------------------------------------------------------


def test_client_close_is_seen(server: FakeServer, client: RawClient) -> None:
    conn = _connected(server, client)
    client.send(b"PUB foo 5\r\nab")
    client.close()
    assert conn.wait_closed(timeout=TIMEOUT)
    assert conn.closed_by_client
    notes = [e.data for e in conn.transcript.events if e.direction == "note"]
    assert b"the connection ended inside an operation" in notes


def test_server_close_ends_the_connection_and_every_thread() -> None:
    before = set(_fake_threads())
    fake = FakeServer()
    raws = [RawClient(fake.port) for _ in range(3)]
    conns = [fake.accept(timeout=TIMEOUT) for _ in raws]
    assert all(conns)
    assert fake.accept(timeout=0.05) is None  # no fourth connection
    fake.close()
    fake.close()  # idempotent
    for raw in raws:
        raw.read(10)  # the INFO, then the close
        assert raw.closed
        raw.close()
    assert set(_fake_threads()) <= before
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", fake.port), timeout=0.5).close()


def test_connection_close_by_script_then_wait_closed_returns(server: FakeServer) -> None:
    raw = RawClient(server.port)
    conn = server.accept(timeout=TIMEOUT)
    assert conn is not None
    conn.send(err_op("Stale Connection"))
    conn.close()
    events = raw.read(3)
    raw.close()
    assert events[-1] == protocol.Err("'Stale Connection'") and raw.closed
    assert not conn.wait_closed(timeout=0.1)  # the script closed it, not the client
    assert "closed by the fake server" in conn.transcript.text()


# --- the client scripts: their rows ---------------------------------------------------------

LEVELS = {"must", "should", "may", "info"}


# The scripts of a run over plain TCP (a case of another transport itself runs over that one).
SCRIPTS = client_scripts.script_cases(vectors.load_all([vectors.BUNDLED_DIR]).cases, "tcp")


def _row_ids() -> list[str]:
    """Every row a client run of the bundled scripts gives, in order."""
    return [c.id for c in SCRIPTS]


def test_rows_are_unique_and_well_formed() -> None:
    ids = _row_ids()
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"client\.[a-z0-9-]+\.[a-z0-9._-]+", i) for i in ids)
    assert {c.level for c in SCRIPTS} <= LEVELS


# --- the client checks against real drivers ---------------------------------------------------

REFERENCE_CLIENT = "client:nats-py"
HOST_CLIENTS = [spec for spec, _ in available_clients() if spec.startswith("client:")]
# Behaviour every library shows; a failure here means the checks or the fake server broke.
BASIC_PASSES = (
    "client.connect.sent",
    "client.ping.pong",
    "client.pub.framing",
    "client.sub.framing",
    "client.msg.delivery",
    "client.msg.segmented",
    "client.info.initial-connect-urls",
)


Run = tuple[ClientTarget, list[ResultRow], Path]


@pytest.fixture(scope="module")
def client_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Run]]:
    """Runs every check on a client (once per module), writing its rows to a file."""
    done: dict[str, Run] = {}

    def run(spec: str) -> Run:
        if spec not in done:
            client = open_client(spec)
            try:
                client.driver().close()  # builds the driver (cached) and reads its hello
            except ClientError as exc:
                client.close()
                if spec == REFERENCE_CLIENT:
                    raise
                pytest.skip(f"the {spec} driver does not build here: {exc}")
            path = tmp_path_factory.mktemp("client-rows") / "rows.jsonl"
            with ResultsWriter(path) as writer:
                ctx = RunContext.for_vectors([vectors.BUNDLED_DIR])
                rows = [
                    write_result(client, writer, ctx, result)
                    for result in client_scripts.run_scripts(client, SCRIPTS)
                ]
                done[spec] = (client, rows, path)
        return done[spec]

    yield run
    for client, _, _ in done.values():
        client.close()


def test_reference_client_is_available() -> None:
    assert REFERENCE_CLIENT in HOST_CLIENTS


@pytest.mark.parametrize("spec", HOST_CLIENTS)
def test_checks_give_one_written_row_per_definition(
    client_runs: Callable[[str], Run], spec: str
) -> None:
    client, rows, path = client_runs(spec)
    assert [r.case_id for r in rows] == _row_ids()
    assert list(read_rows(path)) == rows
    levels = {c.id: c.level for c in SCRIPTS}
    for row in rows:
        assert row.target == client.name == spec and row.target_kind == "client"
        assert row.target_version == client.version != "unknown"
        assert row.group == ".".join(row.case_id.split(".")[:2])
        assert row.level == levels[row.case_id]
        assert row.outcome in ("pass", "fail", "skip", "error")
    outcomes = {r.case_id: r for r in rows}
    for case_id in BASIC_PASSES:
        assert outcomes[case_id].outcome == "pass", outcomes[case_id].message
    assert not _fake_threads()


def test_nats_py_known_behaviour(client_runs: Callable[[str], Run]) -> None:
    _, rows, _ = client_runs(REFERENCE_CLIENT)
    by_id = {r.case_id: r for r in rows}
    assert not [r for r in rows if r.outcome == "error"], "the checks broke on nats-py"
    # nats-py 2.16.0 sends headers and no_responders in CONNECT when INFO has headers.
    no_responders = by_id["client.connect.no-responders"]
    assert no_responders.outcome == "pass"
    assert "'headers': True" in no_responders.message
    assert "'no_responders': True" in no_responders.message
    assert by_id["client.connect.headers"].outcome == "pass"
    # Its parser matches upper-case operation names only (protocol/parser.py regexes): a
    # lower-case MSG is lost, against the case-insensitive operation names (must) ...
    assert by_id["client.msg.lower-case"].outcome == "fail"
    # ... and a lower-case ping gets no PONG: recorded, failing nobody (info: no statement makes
    # a client answer a PING).
    ping = by_id["client.ping.lower-case"]
    assert (ping.level, ping.outcome) == ("info", "pass")
    assert ping.message.startswith("no PONG from the client"), ping.message


@pytest.mark.parametrize("headers", [True, False])
def test_a_header_bearing_message_goes_only_to_a_client_that_enabled_headers(
    headers: bool,
) -> None:
    """As a server does: an HMSG (alone, or after a MSG, split or not) reaches a connection
    whose CONNECT said headers: true, and no other (HeadersNotEnabled, nothing sent)."""
    hmsg = hmsg_op("foo", "1", b"NATS/1.0\r\n\r\n", b"x")
    with FakeServer() as s:
        raw = RawClient(s.port)
        conn = _connected(s, raw, json.dumps({"verbose": False, "headers": headers}))
        start = len(conn.transcript.events)
        for data in (hmsg, msg_op("foo", "1", b"x") + hmsg):
            if headers:
                assert conn.send(data, split_at=[5])
            else:
                with pytest.raises(HeadersNotEnabled):
                    conn.send(data, split_at=[5])
        sent = [e for e in conn.transcript.events[start:] if e.direction == "send"]
        assert bool(sent) == headers
        assert conn.send(msg_op("foo", "1", b"plain"))  # a MSG goes either way
        got = raw.read(4 if headers else 1)
        raw.close()
    assert got[-1] == protocol.Msg("foo", "1", None, b"plain")
