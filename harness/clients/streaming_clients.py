"""NATS Streaming client libraries against the streaming.client vectors.

Each library has a driver (harness/drivers/<library>/) speaking nats-conformance-stan-driver/1
(harness/drivers/stan-protocol.schema.json), built into the cache like the core drivers
(harness.clients.build_driver) and run as a harness.driver.DriverProcess, which bounds every
wait and turns a driver that crashes, hangs or writes garbage into a DriverError. For every
case the harness starts a driver and a fresh reference streaming server
(conformance.streaming_server) bridged onto a real nats-server (harness.streaming
.StreamingBridge), takes the case's steps through the driver, and hands what the client sent
(as the reference decoded it) and reported to conformance.streaming_client.judge: this module
only executes. One row per (client, case); streaming.encode/decode cases get one skip row each
(no driver command reaches a library's codec on its own).
"""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import streaming_client as sc
from conformance import vectors
from conformance.streaming_server import StreamingServerModel
from harness.clients.checks import CheckResult
from harness.clients.driver import DriverError, DriverProcess, DriverReply
from harness.clients.streaming import StreamingBridge
from harness.clients.targets import ClientError, Library, build_driver, pinned_version
from harness.servers.specs import RunningServer

PROTOCOL = "nats-conformance-stan-driver/1"
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "drivers" / "stan-protocol.schema.json"
LIBRARIES: dict[str, Library] = {
    lib.name: lib
    for lib in (
        Library("node-nats-streaming", "npm node-nats-streaming", ("node", "npm")),
        Library("stan.go", "Go module proxy github.com/nats-io/stan.go", ("go",)),
        Library("java-nats-streaming", "Maven Central io.nats:java-nats-streaming",
                ("java", "mvn")),
    )
}  # fmt: skip
HELLO_TIMEOUT = 30.0  # seconds a fresh driver has to answer hello (a JVM starts slowly)
STEP_TIMEOUT = 10.0  # seconds one step may take through the driver
DELIVERY_WAIT = 5.0  # seconds the harness waits for the deliveries a case expects
QUIET = 0.2  # seconds without events taken to mean no more deliveries are coming
CODEC_KINDS = ("streaming.encode", "streaming.decode")
NO_CODEC_PATH = (
    "no path reaches this case: the streaming driver protocol asks a library to take steps, "
    "not to encode or decode one message, and the libraries keep their protobuf codec internal; "
    "what a client encodes and decodes is judged by the streaming.client cases"
)
# Step options and the hello capability each needs.
_NEEDS = {"queue": "queue_group", "durable_name": "durable_name", "manual_ack": "manual_ack",
          "ack_wait_s": "ack_wait", "max_in_flight": "max_in_flight"}  # fmt: skip
_START_NEEDS = {"NewOnly": "start_new_only", "LastReceived": "start_last_received",
                "TimeDeltaStart": "start_time_delta", "SequenceStart": "start_sequence",
                "First": "start_first"}  # fmt: skip


class StanDriverProcess(DriverProcess):
    schema_path = SCHEMA_PATH
    protocol = PROTOCOL


class Skip(Exception):
    """The library lacks what a step needs."""


@dataclass
class StreamingClient:
    """A streaming client library's driver, built on first use."""

    library: Library
    version_pin: str | None = None

    def __post_init__(self) -> None:
        self.name = f"client:{self.library.name}"
        self.version = self.version_pin or pinned_version(self.library.name) or "unknown"
        self.capabilities: frozenset[str] = frozenset()
        self._out: Path | None = None

    def driver(self) -> StanDriverProcess:
        """A started driver that answered hello (ClientError when it cannot build or start)."""
        if self._out is None:
            self._out = build_driver(self.library, self.version_pin)
        driver = StanDriverProcess.start([str(self._out / "run")], name=self.name)
        try:
            hello = driver.call("hello", timeout=HELLO_TIMEOUT)
        except DriverError:
            driver.close()
            raise
        if not hello.ok:
            driver.close()
            raise ClientError(f"{self.name}: hello failed: {hello.error_message}")
        self.version = hello.result["version"]
        self.capabilities = frozenset(hello.result["capabilities"])
        return driver


def parse_spec(spec: str) -> StreamingClient | None:
    """The streaming client a spec names (``client:<library>[==X.Y.Z]``), None for others."""
    library, _, pin = spec.removeprefix("client:").partition("==")
    if not spec.startswith("client:") or library not in LIBRARIES:
        return None
    return StreamingClient(LIBRARIES[library], pin or None)


def available() -> list[str]:
    """Specs of the streaming clients whose build tools are on PATH."""
    return [
        f"client:{name}"
        for name, lib in LIBRARIES.items()
        if all(shutil.which(tool) for tool in lib.tools)
    ]


# --- one case ------------------------------------------------------------------------------------


def _needs(step: dict[str, Any]) -> list[str]:
    if step["do"] != "subscribe":
        return []
    needs = [need for key, need in _NEEDS.items() if step.get(key)]
    return [*needs, _START_NEEDS[step["start"]["position"]]]


def _subscribe_args(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "subject": step["subject"],
        "queue": step.get("queue"),
        "durable_name": step.get("durable_name"),
        "start": step["start"],
        "manual_ack": bool(step.get("manual_ack")),
        "ack_wait_s": step.get("ack_wait_s"),
        "max_in_flight": step.get("max_in_flight"),
    }


class _Session:
    """One case's steps through one driver, collecting what the client reports."""

    def __init__(self, driver: StanDriverProcess, client: StreamingClient, case: vectors.Case):
        self.d = driver
        self.client = client
        self.inp = case.data["input"]
        self.exp = case.data["expect"]
        self.observed = sc.Observed()
        self.handles: dict[str, str] = {}  # driver handle -> the case's subscription name

    def _take_events(self, timeout: float, count: int | None = None) -> None:
        for event in self.d.events(timeout=timeout, count=count):
            if event["event"] == "message" and event["sub"] in self.handles:
                data = base64.b64decode(event["data_b64"])
                delivery = sc.Delivery(event["sequence"], data, event["redelivered"])
                self.observed.received.setdefault(self.handles[event["sub"]], []).append(delivery)

    def _wait_for(self, sub: str, done: Any) -> None:
        """Read events until ``done(deliveries of sub)`` or DELIVERY_WAIT passes."""
        deadline = time.monotonic() + DELIVERY_WAIT
        while not done(self.observed.received.get(sub, [])) and time.monotonic() < deadline:
            self._take_events(deadline - time.monotonic(), count=1)

    def _settle(self, sub: str) -> None:
        """The deliveries the case expects for ``sub``, then any extra within QUIET."""
        want = sc.expected_count(self.exp, sub)
        self._wait_for(sub, lambda got: len(got) >= want)
        self._take_events(QUIET)

    def _call(self, cmd: str, **args: Any) -> DriverReply:
        reply = self.d.call(cmd, timeout=STEP_TIMEOUT, **args)
        if not reply.ok and reply.error_type == "unsupported":
            raise Skip(f"{cmd} unsupported: {reply.error_message}")
        return reply

    def step(self, step: dict[str, Any], url: str) -> sc.Reported:
        lacking = [need for need in _needs(step) if need not in self.client.capabilities]
        if lacking:
            raise Skip(f"the driver does not declare {', '.join(lacking)}")
        action = step["do"]
        timeout_ms = int(STEP_TIMEOUT * 800)  # the library's own limit ends before the driver's
        if action == "sleep":
            time.sleep(step["ms"] / 1000)
            return sc.Reported(True)
        if action == "connect":
            reply = self._call("connect", url=url, cluster_id=self.inp["cluster_id"],
                               client_id=self.inp["client_id"], timeout_ms=timeout_ms)  # fmt: skip
        elif action == "publish":
            data = vectors.decode_bytes(step["data"], "data")
            reply = self._call("publish", subject=step["subject"], timeout_ms=timeout_ms,
                               data_b64=base64.b64encode(data).decode())  # fmt: skip
            return sc.Reported(reply.ok, reply.result.get("guid"), reply.error_message)
        elif action == "subscribe":
            reply = self._call("subscribe", **_subscribe_args(step))
            if reply.ok:
                self.handles[reply.result["sub"]] = step["sub"]
        elif action == "ack":
            self._wait_for(
                step["sub"], lambda got: any(m.sequence == step["sequence"] for m in got)
            )
            handle = next(h for h, name in self.handles.items() if name == step["sub"])
            reply = self._call("ack", sub=handle, sequence=step["sequence"])
        elif action == "unsubscribe":
            self._settle(step["sub"])
            handle = next(h for h, name in self.handles.items() if name == step["sub"])
            reply = self._call("unsubscribe", sub=handle)
        else:  # close
            for sub in set(self.handles.values()):
                self._settle(sub)
            reply = self._call("close")
        return sc.Reported(reply.ok, error=reply.error_message)


def run_case(client: StreamingClient, server: RunningServer, case: vectors.Case) -> CheckResult:
    """One streaming.client case against one library, as a row."""
    started = time.monotonic()
    model = StreamingServerModel(cluster_id=case.data["input"]["cluster_id"])
    transcript = ""
    try:
        with StreamingBridge(server, model) as bridge, client.driver() as driver:
            session = _Session(driver, client, case)
            try:
                for step in case.data["input"]["steps"]:
                    reported = session.step(step, server.url)
                    session.observed.steps.append(reported)
                    if not reported.ok:
                        break
            finally:
                transcript = driver.transcript.text()
            with bridge.lock:
                session.observed.sent = list(model.received)
                session.observed.ack_inboxes = list(model.ack_inboxes)
        problems = sc.judge(case.data["input"], case.data["expect"], session.observed)
        outcome, message = ("fail", "; ".join(problems)) if problems else ("pass", "")
    except Skip as exc:
        outcome, message = "skip", str(exc)
    except DriverError as exc:
        # A library that crashes or hangs fails the case; a driver breaking the protocol is ours.
        outcome = "error" if exc.cause == "broken" else "fail"
        message = f"the library {exc.cause} (driver: {exc})"
    except (ClientError, OSError) as exc:
        outcome, message = "error", f"{type(exc).__name__}: {exc}"
    ms = (time.monotonic() - started) * 1000
    return _result(case, outcome, message, ms, transcript if outcome in ("fail", "error") else "")


def _result(
    case: vectors.Case, outcome: str, message: str, ms: float, transcript: str = ""
) -> CheckResult:
    return CheckResult(
        case.id, case.level, case.source, outcome, message, round(ms, 3), transcript,
        f"{case.data['description']} (vector {case.id})", group=case.group,
    )  # fmt: skip


def run_streaming_client_vectors(
    client: StreamingClient, server: RunningServer, cases: list[vectors.Case]
) -> Iterator[CheckResult]:
    """Every client-role streaming case against one library, each row as soon as known."""
    for case in cases:
        if "client" not in case.roles:
            continue
        if case.kind == sc.KIND:
            yield run_case(client, server, case)
        elif case.kind in CODEC_KINDS:
            yield _result(case, "skip", NO_CODEC_PATH, 0.0)
