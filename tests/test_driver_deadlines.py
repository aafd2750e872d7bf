"""Every driver command has a documented deadline; a command past it is an ``error`` row (or a
robustness failure) of the case in flight, naming the case, the command and the last lines
exchanged; the driver is restarted and every other row is there, judged as without the hang.

The driver is a real process speaking nats-conformance-driver/2 (or /1): a small Python program
of this test, run as ``driver:COMMAND``, with a tiny NATS client of its own. Its plan says which
command it hangs on (the first request of that command, once: a file marks it done), which it
answers ``unsupported``, and which protocol it says in ``hello``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nats_conformance.conformance import vectors
from nats_conformance.conformance.vector_kinds import status_line_limit
from nats_conformance.harness.clients import client_vectors
from nats_conformance.harness.clients import driver as driver_module
from nats_conformance.harness.clients.client_targets import ClientTarget, open_client
from nats_conformance.harness.clients.driver import DEFAULT_DEADLINE, commands, deadline
from nats_conformance.harness.clients.patience import HANG_AFTER
from nats_conformance.harness.clients.registry import DRIVERS_DIR
from nats_conformance.harness.results import Checked

FAKE_DRIVER = r"""
import base64, json, os, socket, sys, threading, time

plan = json.load(open(sys.argv[1]))
lock = threading.Lock()
state = {"sids": 0, "pongs": threading.Semaphore(0), "replies": {}}


def out(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def pairs(block):
    return [line.split(": ", 1) for line in block.split("\r\n")[1:] if ": " in line]


def read_server(sock, stream):
    while line := stream.readline():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == b"PING":
            sock.sendall(b"PONG\r\n")
        elif parts[0] == b"PONG":
            state["pongs"].release()
        elif parts[0] in (b"MSG", b"HMSG"):
            size = int(parts[-1])
            header_size = int(parts[-2]) if parts[0] == b"HMSG" else 0
            data = stream.read(size + 2)[:size]
            block, payload = data[:header_size].decode(errors="replace"), data[header_size:]
            sid = parts[2].decode()
            if sid in state["replies"]:
                state["replies"][sid].append(payload)
                continue
            out({"event": "message", "sub": sid, "subject": parts[1].decode(),
                 "reply": parts[3].decode() if len(parts) == (6 if header_size else 5) else None,
                 "headers": pairs(block) if header_size else None, "status": None,
                 "description": None, "payload_b64": base64.b64encode(payload).decode()})
        elif parts[0] == b"-ERR":
            out({"event": "error", "type": "protocol", "message": line.decode().strip()})
    out({"event": "closed"})


def send(data):
    if "sock" not in state:
        raise LookupError("connection")
    state["sock"].sendall(data)


def pub_line(subject, reply, headers, payload):
    if headers is None:
        return f"PUB {subject} {reply or ''} {len(payload)}\r\n".encode() + payload + b"\r\n"
    block = ("NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode()
    total = len(block) + len(payload)
    line = f"HPUB {subject} {reply or ''} {len(block)} {total}\r\n".encode()
    return line + block + payload + b"\r\n"


def flush(timeout_ms):
    send(b"PING\r\n")
    if not state["pongs"].acquire(timeout=timeout_ms / 1000):
        raise LookupError("timeout")


def request(subject, headers, payload, timeout_ms):
    state["sids"] += 1
    sid, inbox = str(state["sids"]), f"_INBOX.fake.{state['sids']}"
    state["replies"][sid] = got = []
    send(f"SUB {inbox} {sid}\r\n".encode() + pub_line(subject, inbox, headers, payload))
    deadline = time.monotonic() + timeout_ms / 1000
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    send(f"UNSUB {sid}\r\n".encode())
    if not got:
        raise LookupError("timeout")
    return got[0]


def answer(request_):
    cmd = request_["cmd"]
    if cmd == plan.get("hang") and not os.path.exists(plan["hung_mark"]):
        open(plan["hung_mark"], "w").close()
        time.sleep(60)
    if cmd in plan.get("unsupported", []):
        raise LookupError("unsupported")
    if cmd == "hello":
        return {"protocol": plan["protocol"], "library": "fake", "version": "1",
                "language": "Python", **({"capabilities": plan["capabilities"]}
                                         if plan["protocol"].endswith("/2") else {})}
    if cmd == "connect":
        host, port = request_["url"].removeprefix("nats://").rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        stream = sock.makefile("rb")
        stream.readline()  # INFO
        options = {"verbose": False, "pedantic": False, "protocol": 1,
                   "headers": plan.get("headers", True)}
        sock.sendall(f"CONNECT {json.dumps(options)}\r\nPING\r\n".encode())
        while stream.readline().strip() != b"PONG":
            pass
        reader = threading.Thread(target=read_server, args=(sock, stream), daemon=True)
        state.update(sock=sock, reader=reader, sids=0)
        reader.start()
        return {}
    if cmd == "subscribe":
        state["sids"] += 1
        queue = request_["queue"] or ""
        send(f"SUB {request_['subject']} {queue} {state['sids']}\r\n".encode())
        return {"sub": str(state["sids"])}
    if cmd == "unsubscribe":
        send(f"UNSUB {request_['sub']} {request_['max'] or ''}\r\n".encode())
        return {}
    if cmd == "publish":
        payload = base64.b64decode(request_["payload_b64"])
        send(pub_line(request_["subject"], request_["reply"], request_["headers"], payload))
        return {}
    if cmd == "request":
        payload = base64.b64decode(request_["payload_b64"])
        got = request(request_["subject"], request_["headers"], payload, request_["timeout_ms"])
        return {"message": {"subject": request_["subject"], "reply": None, "headers": None,
                            "status": None, "description": None,
                            "payload_b64": base64.b64encode(got).decode()}}
    if cmd == "flush":
        flush(request_["timeout_ms"])
        return {}
    if cmd == "close":  # its closed event before its answer, as a library's
        if "sock" in state:
            state.pop("sock").shutdown(socket.SHUT_RDWR)
            state["reader"].join()
        return {}
    if cmd == "decode_headers":
        block = base64.b64decode(request_["block_b64"]).decode(errors="replace")
        if not block.startswith("NATS/1.0\r\n"):
            raise LookupError("refused")
        return {"status": None, "description": None, "headers": pairs(block)}
    if cmd == "encode_headers":
        block = "NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in request_["headers"])
        return {"block_b64": base64.b64encode((block + "\r\n").encode()).decode()}
    if cmd in ("validate_subject", "validate_name"):
        text = request_.get("subject", request_.get("name"))
        return {"valid": bool(text) and not any(c in text for c in " \t\r\n")}
    if cmd == "headers_op" and request_["op"] in ("get", "values"):
        values = [v for k, v in request_["headers"] if k == request_["key"]]
        if request_["op"] == "values":
            return {"values": values}
        return {"value": values[0] if values else None}
    if cmd == "jetstream_create" and request_["kind"] == "kv":  # a bucket is a stream
        name = request_["name"]
        config = {"name": f"KV_{name}", "subjects": [f"$KV.{name}.>"]}
        got = json.loads(request(f"$JS.API.STREAM.CREATE.KV_{name}", None,
                                 json.dumps(config).encode(), 5000))
        if "error" in got:
            raise LookupError("protocol")
        return {"created": name}
    if cmd == "jetstream_delete" and request_["kind"] == "kv":
        request(f"$JS.API.STREAM.DELETE.KV_{request_['name']}", None, b"", 5000)
        return {}
    raise LookupError("unsupported")


for line in sys.stdin:
    request_ = json.loads(line)
    if request_["cmd"] == "exit":
        out({"id": request_["id"], "ok": True, "result": {}})
        break
    try:
        out({"id": request_["id"], "ok": True, "result": answer(request_)})
    except LookupError as exc:
        out({"id": request_["id"], "ok": False,
             "error": {"type": exc.args[0], "message": f"the fake says {exc.args[0]}"}})
    except OSError as exc:
        out({"id": request_["id"], "ok": False,
             "error": {"type": "connection", "message": str(exc)}})
"""

CAPABILITIES = [
    "headers", "request", "unsubscribe_max", "flush_roundtrip", "validate_subject",
    "validate_name", "decode_headers", "encode_headers", "headers_op", "kv",
]  # fmt: skip
# The commands the suite asks during cases (hello is asked once, at the start: a driver that
# does not answer it does not start; exit only stops a driver, nobody waits on its answer).
ASKED_IN_CASES = sorted(set(commands()) - {"hello", "exit"})
SCALE = 4  # deadlines here are the documented ones divided by this: the test waits less


def first_case(kind: str, test: Callable[[vectors.Case], bool] = lambda case: True) -> vectors.Case:
    return next(
        case
        for case in vectors.bundled_cases()
        if case.kind == kind and "client" in case.roles and test(case)
    )


def _valid_block(case: vectors.Case) -> bool:
    expect = case.data["expect"]
    return "error" not in expect and expect.get("status") is None


def cases() -> list[vectors.Case]:
    """A case reaching each command the suite asks in cases, by the paths a run takes: a client
    script first (its connection is the case's own, so its close is the case's)."""
    by_id = {case.id: case for case in vectors.bundled_cases()}
    return [
        by_id["client.connect.sent"],
        *[case for case in vectors.bundled_cases() if case.kind == "headers.parse"
          and "client" in case.roles and _valid_block(case)][:2],
        first_case("headers.encode", lambda c: status_line_limit(c.data["input"]) is None),
        first_case("headers.op", lambda c: c.data["input"]["op"] == "get"),
        first_case("subject.validate", lambda c: c.data["input"]["use"] == "publish"),
        by_id["protocol.unsub.encode.doc-example-max"],
        by_id["protocol.ping-pong.encode.ping"],
        by_id["names.kv-bucket-name.valid.simple"],
    ]  # fmt: skip


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``fake(**plan)``: a client target whose driver is the fake, following the plan; every
    deadline the documented one divided by SCALE."""
    tmp = tmp_path_factory.mktemp("fake-driver")
    (tmp / "fake.py").write_text(FAKE_DRIVER)
    opened: list[ClientTarget] = []

    def make(**given: Any) -> ClientTarget:
        plan = {"protocol": "nats-conformance-driver/2", "capabilities": CAPABILITIES,
                "hung_mark": str(tmp / f"hung-{len(opened)}"), **given}  # fmt: skip
        path = tmp / f"plan-{len(opened)}.json"
        path.write_text(json.dumps(plan))
        client = open_client(f"driver:{sys.executable} {tmp / 'fake.py'} {path}")
        opened.append(client)
        return client

    real = driver_module.deadline
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(driver_module, "deadline", lambda *args: real(*args) / SCALE)
        yield make
        for client in opened:
            client.close()


def rows(client: ClientTarget) -> list[Checked]:
    return list(client_vectors.run_client_vectors(client, cases()))


def test_every_command_has_a_documented_deadline() -> None:
    schema = driver_module.protocol_schema()["$defs"]["commands"]
    assert all("deadline" in schema[cmd] for cmd in commands())
    # A command that only asks the library's own code is given what a hang is given elsewhere.
    for cmd in ("publish", "subscribe", "decode_headers", "validate_name", "close"):
        assert deadline(cmd, {}) == HANG_AFTER
    # One with a timeout of its own: that timeout, plus as much again as any command.
    assert deadline("flush", {"timeout_ms": 2000}) == 2 + HANG_AFTER
    assert deadline("request", {"timeout_ms": 500}) == 0.5 + HANG_AFTER
    assert deadline("connect", {"options": {"timeout_ms": 1000}}) == 1 + HANG_AFTER
    assert deadline("connect", {"options": {}}) == 5 + HANG_AFTER  # the default it documents
    assert deadline("no-such-command", {}) == DEFAULT_DEADLINE
    assert deadline("exit", {}) == driver_module.EXIT_GRACE  # what close() gives it


def test_the_guide_names_every_deadline_the_schema_gives() -> None:
    guide = (DRIVERS_DIR / "README.md").read_text()
    schema = driver_module.protocol_schema()["$defs"]["commands"]
    for cmd in commands():
        spec = schema[cmd]["deadline"]
        said = f"{spec['seconds']} s" + (" + `timeout_ms`" if "plus_ms" in spec else "")
        assert f"| `{cmd}` | {said} |" in guide, cmd


@pytest.fixture(scope="module")
def unhung(fake: Any) -> dict[str, tuple[str, str]]:
    """The rows of a run whose driver hangs nowhere: id -> (outcome, category)."""
    found = {r.case.case_id: (r.found.outcome, r.found.category) for r in rows(fake(hang=None))}
    assert not any(outcome == "error" for outcome, _ in found.values()), found
    return found


@pytest.mark.parametrize("command", ASKED_IN_CASES)
def test_a_hang_on_any_command_costs_its_case_only_and_says_where(
    fake: Any, unhung: dict[str, tuple[str, str]], command: str
) -> None:
    got = rows(fake(hang=command))
    assert [r.case.case_id for r in got] == list(unhung)  # no row lost, none added
    hung = [r for r in got if f"'{command}' (id" in r.found.message and "hung" in r.found.message]
    assert hung, f"no row names the hang on {command}"
    for row in hung:
        case_id = row.case.case_id.partition("@")[0]
        assert row.found.outcome in ("error", "fail"), row.found.message
        assert f"case {case_id}" in row.found.message, row.found.message
        assert "the last lines exchanged" in row.found.message, row.found.message
        assert f'"cmd":"{command}"' in row.found.message, row.found.message  # the request, as sent
    hung_cases = {row.case.case_id.partition("@")[0] for row in hung}
    for row in got:  # every other case: judged as in a run without the hang
        if row.case.case_id.partition("@")[0] not in hung_cases:
            assert (row.found.outcome, row.found.category) == unhung[row.case.case_id], (
                row.case.case_id,
                row.found.message,
            )


@pytest.mark.parametrize("protocol", ["nats-conformance-driver/1", "nats-conformance-driver/2"])
def test_unsupported_is_a_skip_in_every_protocol_version_setup_steps_too(
    fake: Any, protocol: str
) -> None:
    """A driver that answers ``unsupported`` (a protocol-1 driver says it only then, having no
    capabilities in its hello): every case that needs the command is a skip, whether the
    command is the case's question or a step setting it up (a JetStream bucket, a request's
    subscription), never an error."""
    refused = [
        "decode_headers",
        "encode_headers",
        "headers_op",
        "validate_subject",
        "validate_name",
        "request",
        "jetstream_create",
        "jetstream_delete",
        "unsubscribe",
    ]
    got = {r.case.case_id: r for r in rows(fake(hang=None, protocol=protocol, unsupported=refused))}
    asked_only_what_answers = (
        "client.connect.sent", "subjects.validate.doc.foo.publish@publish",
        "protocol.ping-pong.encode.ping@send",
        *[f"{case.id}@hmsg" for case in cases()[1:3]],
        f"{cases()[3].id}@hpub",  # published: the library's publish, which answers
    )  # fmt: skip
    for case_id, row in got.items():
        wanted = "pass" if case_id in asked_only_what_answers else "skip"
        assert row.found.outcome == wanted, (case_id, row.found.message)
        if wanted == "skip":
            assert "unsupported: the fake says unsupported" in row.found.message, (
                case_id,
                row.found.message,
            )


def test_a_client_without_headers_is_sent_no_header_bearing_message(fake: Any) -> None:
    """A protocol-1 driver does not say its library lacks headers; its CONNECT does. The fake
    server then sends it no HMSG, as a server does not: the cases that would need one skip."""
    by_id = {case.id: case for case in vectors.bundled_cases()}
    chosen = [by_id[i] for i in ("client.hmsg.delivery", "client.msg.delivery",
                                 "protocol.hmsg.parse.headers-not-enabled",
                                 "protocol.hmsg.parse.headers-not-enabled-msg")]  # fmt: skip
    client = fake(hang=None, protocol="nats-conformance-driver/1", headers=False)
    got = {
        r.case.case_id: r for r in client_vectors.run_client_vectors(client, chosen + cases()[1:3])
    }
    skipped = [
        "client.hmsg.delivery",
        "protocol.hmsg.parse.headers-not-enabled@receive",
        *[f"{case.id}@hmsg" for case in cases()[1:3]],
    ]
    for case_id in skipped:
        assert got[case_id].found.outcome == "skip", (case_id, got[case_id].found.message)
        assert "did not enable headers" in got[case_id].found.message
    for case_id in ("client.msg.delivery", "protocol.hmsg.parse.headers-not-enabled-msg@receive"):
        assert got[case_id].found.outcome == "pass", (case_id, got[case_id].found.message)


def test_the_guide_and_the_schema_name_every_production_the_suite_asks() -> None:
    asked = {
        case.data["input"]["production"]
        for case in client_vectors.client_cases(vectors.bundled_cases())
        if case.kind == "name.validate"
    }
    request = driver_module.protocol_schema()["$defs"]["commands"]["validate_name"]["request"]
    assert set(request["properties"]["production"]["examples"]) == asked
    guide = (DRIVERS_DIR / "README.md").read_text()
    for production in asked:
        assert f"| `{production}` |" in guide, production
