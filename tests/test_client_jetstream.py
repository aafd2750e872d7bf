"""The jetstream path of name.validate: the judging (pure), and every driver's jetstream_create
and jetstream_delete against a real JetStream-enabled nats-server (a valid and an invalid name
for each kind the driver declares; skipped when its toolchain is missing)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from nats_conformance.conformance import vectors
from nats_conformance.harness.clients import jetstream as client_jetstream
from nats_conformance.harness.clients import registry
from nats_conformance.harness.clients.client_targets import open_client
from nats_conformance.harness.clients.driver import DriverReply
from nats_conformance.harness.clients.driver_session import Session, Verdict
from nats_conformance.harness.clients.jetstream import JetStreamRun, judge_create, limit
from nats_conformance.harness.clients.registry import LIBRARIES, ClientError
from nats_conformance.harness.servers.jetstream_names import NameSession
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.specs import RunningServer

# --- judging -----------------------------------------------------------------------------------


def ok(created: str) -> DriverReply:
    return DriverReply(True, {"created": created}, None, None)


def error(kind: str, message: str = "nope") -> DriverReply:
    return DriverReply(False, {}, kind, message)


@pytest.mark.parametrize(
    ("valid", "answer", "outcome", "said"),
    [
        (True, ok("ORDERS"), "pass", "accepted a valid stream-name"),
        (False, ok("ORDERS"), "fail", "accepted an invalid stream-name"),
        (True, ok("orders"), "fail", "the library created 'orders'"),
        (False, ok("orders"), "fail", "the library created 'orders'"),
        (False, error("refused"), "pass", "refused it locally"),
        (True, error("refused"), "fail", "refused it locally"),
        (False, error("protocol", "400 10042 bad"), "pass", "server refused it (400 10042 bad)"),
        (True, error("protocol"), "fail", "the server refused it"),
        (False, error("no_responders"), "pass", "no JetStream API answered"),
        (True, error("no_responders"), "fail", "no JetStream API answered"),
        (False, error("connection"), "pass", "the connection was closed"),
        (True, error("connection"), "fail", "the connection was closed"),
    ],
)
def test_judge_create(valid: bool, answer: DriverReply, outcome: str, said: str) -> None:
    judged = judge_create("stream-name", "ORDERS", valid, answer)
    assert (judged.outcome, said in judged.message) == (outcome, True), judged.message


@pytest.mark.parametrize(
    ("valid", "held", "outcome", "said"),
    [
        (False, False, "pass", "the server holds no such thing"),
        (True, False, "fail", "the server holds no such thing"),
        (False, True, "fail", "but the server holds stream 'ORDERS'"),
        (True, True, "pass", "but the server holds stream 'ORDERS'"),
    ],
)
def test_judge_create_settled_by_the_server(
    valid: bool, held: bool, outcome: str, said: str
) -> None:
    judged = judge_create("stream-name", "ORDERS", valid, error("timeout"), held)
    assert (judged.outcome, said in judged.message) == (outcome, True), judged.message


def test_the_server_does_not_overrule_a_decided_answer() -> None:
    judged = judge_create("stream-name", "a.b", False, error("refused"), True)
    assert judged.outcome == "pass" and "refused it locally" in judged.message


@pytest.mark.parametrize(("kind", "outcome"), [("timeout", "error"), ("other", "error")])
def test_judge_create_cannot_tell(kind: str, outcome: str) -> None:
    with pytest.raises(Verdict) as raised:
        judge_create("kv-bucket-name", "b", False, error(kind))
    assert raised.value.outcome == outcome


def case(production: str, name: str, platform: str = "unix") -> vectors.Case:
    inp = {"production": production, "name": name, "platform": platform}
    return vectors.Case("t.json", "t", {"input": inp, "expect": {"valid": False}})


@pytest.mark.parametrize(
    ("production", "name", "platform", "skipped"),
    [
        ("consumer-name", "", "unix", "empty name means no name"),
        ("durable-name", "", "unix", "empty name means no name"),
        ("stream-name", "", "unix", None),
        ("kv-bucket-name", "", "unix", None),
        ("stream-name", "a:b", "windows", "Windows"),
    ],
)
def test_limit(production: str, name: str, platform: str, skipped: str | None) -> None:
    why = limit(case(production, name, platform))
    assert (why is None) if skipped is None else (why is not None and skipped in why), why


def test_every_production_with_a_kind_is_in_the_vectors() -> None:
    productions = {
        c.data["input"]["production"]
        for c in vectors.load_all((vectors.BUNDLED_DIR,)).cases
        if c.kind == "name.validate" and client_jetstream.applies(c)
    }
    assert productions == set(client_jetstream.KINDS)


# --- drivers against a real server ------------------------------------------------------------

VALID = {"stream": "ORDERS", "consumer": "worker-1", "durable": "processor", "kv": "config",
         "object_store": "config"}  # fmt: skip
INVALID = {"stream": "a b", "consumer": "a b", "durable": "a*", "kv": "my.bucket",
           "object_store": "my bucket"}  # fmt: skip
NOT_CREATED = {"refused", "protocol", "no_responders", "connection"}
# Every client library's driver (node-nats-streaming's is a NATS Streaming scenario, not one).
SPECS = [
    f"client:{name}"
    for name in LIBRARIES
    if (registry.DRIVERS_DIR / name / "build.sh").is_file() and name != "node-nats-streaming"
]


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    target = open_target(client_jetstream.SERVER)
    try:
        yield target.server(client_jetstream.SERVER_CONFIG)
    finally:
        target.close()


@pytest.mark.parametrize("spec", SPECS)
def test_driver_creates_and_deletes(spec: str, server: RunningServer) -> None:
    library = LIBRARIES[spec.removeprefix("client:")]
    if not all(shutil.which(tool) for tool in library.tools):
        pytest.skip(f"{library.name}: toolchain missing ({', '.join(library.tools)})")
    with open_client(spec) as client:
        try:
            driver = client.driver()
        except ClientError as exc:
            pytest.skip(f"the {library.name} driver does not build here: {exc}")
        assert driver.call("connect", url=server.url, options={}).ok
        kinds = [k for k, cap in client_jetstream.CAPABILITIES.items() if not client.lacks(cap)]
        if not kinds:
            pytest.skip(f"{library.name} declares no JetStream capability")
        host = f"HOST_{library.name.replace('.', '_').replace('-', '_')}"
        made = driver.call("jetstream_create", kind="stream", name=host, stream=None,
                           subjects=[f"host.{host}"], timeout=15)  # fmt: skip
        assert made.ok and made.result == {"created": host}, made
        try:
            for kind in kinds:
                stream = host if kind in ("consumer", "durable") else None
                subjects = [f"t.{host}.{kind}"] if kind == "stream" else None
                args = {"kind": kind, "stream": stream, "timeout": 15}
                good = driver.call("jetstream_create", name=VALID[kind], subjects=subjects, **args)
                assert good.ok and good.result == {"created": VALID[kind]}, (kind, good)
                gone = driver.call("jetstream_delete", name=VALID[kind], **args)
                assert gone.ok, (kind, gone)
                bad = driver.call("jetstream_create", name=INVALID[kind], subjects=subjects, **args)
                assert not bad.ok and bad.error_type in NOT_CREATED, (kind, bad)
                if bad.error_type == "connection":  # the server closed it on the sent name
                    driver.call("close", drain=False)
                    assert driver.call("connect", url=server.url, options={}).ok
        finally:
            assert driver.call("jetstream_delete", kind="stream", name=host, stream=None).ok


# --- the path over the bundled vectors --------------------------------------------------------


def test_the_path_deletes_what_it_created() -> None:
    """nats-py through every bundled case the path asks: each judged without error, and the
    server holds no stream afterwards (buckets are streams too)."""
    cases = [
        c
        for c in vectors.load_all((vectors.BUNDLED_DIR,)).cases
        if c.kind == "name.validate" and client_jetstream.applies(c) and limit(c) is None
    ]
    with open_client("client:nats-py") as client, JetStreamRun(Session(client)) as run:
        judged = {case.id: run.check(case) for case in cases}
        assert run.server is not None
        names = NameSession.open(run.server, timeout=5)
        try:
            left = names.request("$JS.API.STREAM.NAMES", {}, 5).body
        finally:
            names.close()
    assert {j.outcome for j in judged.values()} <= {"pass", "fail"}, judged
    assert judged["names.stream-name.unix.valid.simple"].outcome == "pass"
    assert "refused it locally" in judged["names.stream-name.unix.invalid.dot"].message
    assert left is not None and not left.get("streams"), left
