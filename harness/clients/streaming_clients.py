"""NATS Streaming client libraries against the streaming.client vectors.

Each library (harness.clients.registry.STREAMING_LIBRARIES: the driver directories whose
library.json names the protocol nats-conformance-stan-driver) has a driver
(harness/drivers/<library>/) speaking nats-conformance-stan-driver/1
(schemas/stan-driver-protocol.schema.json), built into the cache like the core drivers
(harness.clients.driver_builds) and run as a harness.clients.driver.DriverProcess, which bounds
every wait and turns a driver that crashes, hangs or writes garbage into a DriverError. For every
case the harness starts a driver and a fresh reference streaming server
(conformance.streaming_server) bridged onto a real nats-server (harness.clients.streaming_bridge
.StreamingBridge), takes the case's steps through the driver, and hands what the client sent
(as the reference decoded it) and reported to conformance.streaming_client.judge: this module
only executes. One row per (client, case). The codec cases go through sessions too
(conformance.streaming_codec_client): an encode case of a client message as ``<id>@send`` (the
library made to send it with the case's values), a decode case of a server message as
``<id>@receive`` (its bytes delivered where the library expects that message; for bytes the
documents reject also ``<id>@receive-survives``: the library neither crashes nor hangs; at the
case's level at most, as every derived row).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from ...conformance import streaming_client as sc
from ...conformance import streaming_codec_client as scc
from ...conformance import streaming_messages as pb
from ...conformance import vectors
from ...conformance.streaming_server import StreamingServerModel
from ...conformance.verdicts import CONFORMANCE, derived_level
from ..gate import Baseline
from ..results import (
    NAME_LIMIT,
    CaseRef,
    Checked,
    Found,
    ResultsWriter,
    RunContext,
    bounded,
)
from ..servers.kinds import open_target
from ..servers.specs import RunningServer, TargetError
from ..suites import (
    Judged,
    OfCases,
    OnRow,
    PlannedRow,
    SuiteError,
    judged,
)
from . import driver_session
from .client_specs import source_problem
from .driver import (
    DriverError,
    DriverProcess,
    DriverReply,
    Ruling,
    rule,
)
from .driver_builds import build_driver
from .driver_session import Overrun
from .registry import (
    STREAMING_LIBRARIES,
    ClientError,
    Library,
    pinned_version,
)
from .rows import rerun_by_vector, rerun_failures, write_result
from .streaming_bridge import StreamingBridge

PROTOCOL = "nats-conformance-stan-driver/1"
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "stan-driver-protocol.schema.json"
HELLO_TIMEOUT = 30.0  # seconds a fresh driver has to answer hello (a JVM starts slowly)
STEP_TIMEOUT = 10.0  # seconds one step may take through the driver
DELIVERY_WAIT = 5.0  # seconds the harness waits for the deliveries a case expects
QUIET = 0.2  # seconds without events taken to mean no more deliveries are coming
CLUSTER_ID = "nats-conformance"  # every session's: the cluster the reference serves
# Step options and the hello capability each needs.
_NEEDS = {"queue": "queue_group", "durable_name": "durable_name", "manual_ack": "manual_ack",
          "ack_wait_s": "ack_wait", "max_in_flight": "max_in_flight"}  # fmt: skip
_START_NEEDS = {"NewOnly": "start_new_only", "LastReceived": "start_last_received",
                "TimeDeltaStart": "start_time_delta", "SequenceStart": "start_sequence",
                "First": "start_first"}  # fmt: skip


class StanDriverProcess(DriverProcess):
    schema_path = SCHEMA_PATH
    protocol = PROTOCOL


class Ruled(Exception):
    """The case ends without a verdict on the library: it lacks what a step needs (a skip), or
    the driver answered about itself (driver.rule)."""

    def __init__(self, ruling: Ruling) -> None:
        super().__init__(ruling.message)
        self.ruling = ruling


@dataclass
class StreamingClient:
    """A streaming client library's driver, built on first use."""

    library: Library
    version_pin: str | None = None
    source: Path | None = None  # client:<library>@<path>: the checkout its driver builds against

    def __post_init__(self) -> None:
        at = f"@{self.source}" if self.source else ""
        self.name = f"client:{self.library.name}{at}"
        pinned = None if self.source else pinned_version(self.library.name)
        self.version = self.version_pin or pinned or "unknown"
        self.capabilities: frozenset[str] = frozenset()
        self._out: Path | None = None

    def driver(self) -> StanDriverProcess:
        """A started driver that answered hello (ClientError when it cannot build or start)."""
        if self._out is None:
            self._out = build_driver(self.library, self.version_pin, self.source)
        driver = StanDriverProcess.start([str(self._out / "run")], name=self.name)
        try:
            hello = driver.call("hello", timeout=HELLO_TIMEOUT)
        except DriverError:
            driver.close()
            raise
        if not hello.ok:
            driver.close()
            raise ClientError(f"{self.name}: hello failed: {hello.error_message}")
        self.version = bounded(hello.result["version"], NAME_LIMIT)  # every row repeats it
        self.capabilities = frozenset(hello.result["capabilities"])
        return driver


def parse_spec(spec: str) -> StreamingClient | None:
    """The streaming client a spec names (``client:<library>[==X.Y.Z]``, or
    ``client:<library>@<path>`` built against a checkout), None for others; ClientError for a
    checkout it cannot build against."""
    named, at, source = spec.removeprefix("client:").partition("@")
    library, pinned, pin = named.partition("==")
    if not spec.startswith("client:") or library not in STREAMING_LIBRARIES:
        return None
    entry = STREAMING_LIBRARIES[library]
    if not at:
        return StreamingClient(entry, pin or None)
    checkout = Path(source).expanduser()
    if problem := source_problem(entry, checkout, bool(pinned), container=False):
        raise ClientError(f"bad client {spec!r}: {problem}")
    return StreamingClient(entry, source=checkout.resolve())


def available() -> list[str]:
    """Specs of the streaming clients whose build tools are on PATH."""
    return [f"client:{name}" for name, lib in STREAMING_LIBRARIES.items() if lib.buildable_here()]


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
    """A session's steps (streaming.client ``input``) through one driver, collecting what the
    client reports."""

    def __init__(
        self,
        driver: StanDriverProcess,
        client: StreamingClient,
        inp: dict[str, Any],
        exp: dict[str, Any],
    ) -> None:
        self.d = driver
        self.client = client
        self.inp = inp
        self.exp = exp
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
        if (ruling := rule(reply, cmd)) is not None:
            raise Ruled(ruling)
        return reply

    def step(self, step: dict[str, Any], url: str) -> sc.Reported:
        lacking = [need for need in _needs(step) if need not in self.client.capabilities]
        if lacking:
            raise Ruled(Ruling("skip", f"the driver does not declare {', '.join(lacking)}"))
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


# --- running a session ---------------------------------------------------------------------------


class Row(NamedTuple):
    id: str
    level: str
    outcome: str
    message: str
    category: str = CONFORMANCE


Rows = list[Row]


def _ruled(row_id: str, level: str, ruling: Ruling) -> Row:
    return Row(row_id, level, ruling.outcome, ruling.message, ruling.category)


def _crashed(exc: DriverError, row_id: str, fed: bool) -> Ruling:
    """The ruling on a driver that crashed, hung or broke the protocol during ``row_id``;
    ``fed``: the case's server bytes had been given to the library."""
    exc.server_input = fed
    ruling = rule(exc, case=row_id)
    assert ruling is not None  # a failure always has a ruling
    return ruling


def _run(
    client: StreamingClient,
    server: RunningServer,
    case: vectors.Case,
    row_id: str,
    body: Callable[[StanDriverProcess, StreamingBridge, StreamingServerModel], Rows],
    cluster_id: str = CLUSTER_ID,
    fed: bool = False,
) -> list[Checked]:
    """``body`` with a started driver and a fresh reference streaming server bridged onto
    ``server``. A library that crashes or hangs gives ``row_id`` a robustness failure when the
    case's server bytes (``fed``) were its input, an error otherwise (driver.rule), unless
    ``body`` judged that."""
    started = time.monotonic()
    model = StreamingServerModel(cluster_id=cluster_id)
    transcript = ""
    try:
        with StreamingBridge(server, model) as bridge, client.driver() as driver:
            try:
                rows = body(driver, bridge, model)
            finally:
                transcript = driver.transcript.text()
    except Ruled as exc:
        rows = [_ruled(row_id, case.level, exc.ruling)]
    except DriverError as exc:
        rows = [_ruled(row_id, case.level, _crashed(exc, row_id, fed))]
    except (ClientError, OSError) as exc:
        rows = [Row(row_id, case.level, "error", f"{type(exc).__name__}: {exc}")]
    ms = (time.monotonic() - started) * 1000
    return [
        _result(case, row.outcome, row.message, ms,
                transcript if row.outcome in ("fail", "error") else "", row_id=row.id,
                level=row.level, category=row.category)
        for row in rows
    ]  # fmt: skip


def _take_steps(
    session: _Session, url: str, after: Callable[[dict[str, Any]], None] = lambda s: None
) -> None:
    """The session's steps, up to the first that fails; ``after`` runs after each one. A
    session past its deadline (driver_session.CASE_SECONDS: it may declare any number of steps, each
    bounded) ends as an error."""
    deadline = time.monotonic() + driver_session.CASE_SECONDS
    for i, step in enumerate(session.inp["steps"]):
        if time.monotonic() >= deadline:
            raise Ruled(Ruling("error", Overrun(f"stopped at input.steps[{i}]").message))
        reported = session.step(step, url)
        session.observed.steps.append(reported)
        if not reported.ok:
            return
        after(step)


def run_case(client: StreamingClient, server: RunningServer, case: vectors.Case) -> Checked:
    """One streaming.client case against one library, as a row."""

    def body(driver: StanDriverProcess, bridge: StreamingBridge, model: Any) -> Rows:
        session = _Session(driver, client, case.data["input"], case.data["expect"])
        _take_steps(session, server.url)
        with bridge.lock:
            session.observed.sent = list(model.received)
            session.observed.ack_inboxes = list(model.ack_inboxes)
        problems = sc.judge(case.data["input"], case.data["expect"], session.observed)
        return [Row(case.id, case.level, "fail" if problems else "pass", "; ".join(problems))]

    [row] = _run(client, server, case, case.id, body, case.data["input"]["cluster_id"])
    return row


def _sent(model: StreamingServerModel, lock: Any, name: str) -> list[Any]:
    with lock:
        return [m for n, m in model.received if n == name]


def _wait(done: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)


def run_send(client: StreamingClient, server: RunningServer, case: vectors.Case) -> Checked:
    """``<id>@send``: the library sends the encode case's message with the case's values."""
    row_id = f"{case.id}@send"
    inp = case.data["input"]
    try:
        plan = scc.send_session(inp["message"], inp["fields"])
    except scc.Unreachable as exc:
        return _result(case, "skip", str(exc), 0.0, row_id=row_id)

    def body(driver: StanDriverProcess, bridge: StreamingBridge, model: Any) -> Rows:
        session = _Session(driver, client, plan.input, plan.expect)

        def deliver(step: dict[str, Any]) -> None:
            if plan.deliver is None or step["do"] != "subscribe":
                return
            [request, *_] = _sent(model, bridge.lock, "SubscriptionRequest")
            bridge.publish(request.inbox, pb.encode(plan.deliver))  # the library acks it
            _wait(lambda: bool(_sent(model, bridge.lock, "Ack")), DELIVERY_WAIT)

        _take_steps(session, server.url, deliver)
        with bridge.lock:
            session.observed.sent = list(model.received)
        sent = any(n == inp["message"] for n, _ in session.observed.sent)
        failed = next((r for r in session.observed.steps if not r.ok), None)
        if not sent and failed is not None:
            raise Ruled(Ruling("skip", f"the library refused the values: {failed.error}"))
        problems = sc.sent_problems(plan.expect, session.observed, [])
        if problems and not sent:  # what the library said instead
            steps = zip(plan.input["steps"], session.observed.steps, strict=False)
            did = [f"{s['do']} {'ok' if r.ok else f'failed ({r.error})'}" for s, r in steps]
            problems.append(f"its steps: {', '.join(did)}")
        return [Row(row_id, case.level, "fail" if problems else "pass", "; ".join(problems))]

    [row] = _run(client, server, case, row_id, body)
    return row


AFTER = pb.MsgProto(1000, scc.SUBJECT, data=b"after", timestamp=1)  # proves the library lives


def _reported(event: dict[str, Any]) -> scc.ReportedMessage:
    return scc.ReportedMessage(event["sequence"], event["subject"],
                               base64.b64decode(event["data_b64"]), event["redelivered"],
                               event["timestamp"])  # fmt: skip


def _survival(driver: StanDriverProcess, row_id: str, level: str, arrived: bool = True) -> Row:
    """Whether the library lived through the bytes: its driver still answers (and, for a
    MsgProto, the valid message delivered after them arrived); ``level``: the derived row's."""
    try:
        driver.call("hello", timeout=STEP_TIMEOUT)
    except DriverError as exc:
        return _ruled(row_id, level, _crashed(exc, row_id, fed=True))
    if not arrived:
        return Row(
            row_id, level, "fail", "the valid MsgProto delivered after the bytes never arrived"
        )
    return Row(row_id, level, "pass", "the library went on working")


def run_receive(
    client: StreamingClient, server: RunningServer, case: vectors.Case
) -> list[Checked]:
    """``<id>@receive`` (and for bytes the case rejects, ``<id>@receive-survives``):
    the decode case's bytes delivered to the library where it expects that message."""
    row_id = f"{case.id}@receive"
    inp, exp = case.data["input"], case.data["expect"]
    try:
        plan = scc.receive_plan(inp, exp)
    except scc.Unreachable as exc:
        return [_result(case, "skip", str(exc), 0.0, row_id=row_id)]
    invalid = "error" in exp
    survives = derived_level(case.level, "must")  # a derived row, never above its case

    def body(driver: StanDriverProcess, bridge: StreamingBridge, model: Any) -> Rows:
        session_input = {"cluster_id": CLUSTER_ID, "client_id": scc.CLIENT_ID,
                         "steps": plan.steps}  # fmt: skip
        session = _Session(driver, client, session_input, {})
        if plan.request:
            bridge.answer_with(plan.request, plan.payload, keep=plan.keep)
        try:
            verdict, arrived = _receive(session, bridge, model, plan, exp, server.url)
        except DriverError as exc:
            if not invalid:
                raise
            crashed = _ruled(f"{row_id}-survives", survives, _crashed(exc, row_id, fed=True))
            said = f"not reported as a message or answer: the library {exc.cause}"
            return [Row(row_id, case.level, "pass", said), crashed]
        rows = [Row(row_id, case.level, *verdict)]
        if invalid:
            rows.append(_survival(driver, f"{row_id}-survives", survives, arrived))
        return rows

    # The case's bytes are what the server gives the library (an answer to its request is set up
    # before its steps): a crash or a hang is on them.
    return _run(client, server, case, row_id, body, fed=True)


def _receive(
    session: _Session,
    bridge: StreamingBridge,
    model: StreamingServerModel,
    plan: scc.ReceivePlan,
    exp: dict[str, Any],
    url: str,
) -> tuple[tuple[str, str], bool]:
    """(outcome, message) of the @receive row, and whether the MsgProto after the bytes came."""
    _take_steps(session, url)
    steps, reported = session.inp["steps"], session.observed.steps
    setup_failed = next((r for s, r in zip(steps[:-1], reported, strict=False) if not r.ok), None)
    if setup_failed or (plan.request is None and len(reported) < len(steps)):
        failed = setup_failed or reported[-1]
        return ("fail", f"a step before the bytes failed: {failed.error}"), True
    if plan.request is not None:
        last = reported[-1]
        detail = ""
        if plan.keep:  # a PubAck: the publish must report the guid of its own PubMsg
            guids = [m.guid for m in _sent(model, bridge.lock, "PubMsg") if hasattr(m, "guid")]
            if last.guid not in guids:
                detail = f"it reported guid {last.guid!r}, its PubMsg's is {guids}"
        events = session.d.events(timeout=QUIET)  # an error the library reports on its own
        said = "; ".join(str(e.get("message")) for e in events if e["event"] == "error")
        problems = scc.answer_problems(_ANSWER_OF[plan.request], exp, last.ok, last.error,
                                       detail, said)  # fmt: skip
        did = f"the step {'succeeded' if last.ok else f'failed ({last.error})'}"
        did += f"; the library reported: {said}" if said else ""
        return (("fail", "; ".join(problems)) if problems else ("pass", did)), True
    [request] = _sent(model, bridge.lock, "SubscriptionRequest")
    bridge.publish(request.inbox, plan.payload)
    bridge.publish(request.inbox, pb.encode(AFTER))
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + DELIVERY_WAIT
    while not any(e.get("data_b64") == _AFTER_B64 for e in got):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        got += session.d.events(timeout=remaining, count=1)
    messages = [_reported(e) for e in got if e["event"] == "message"]
    first = next((m for m in messages if m.data != AFTER.data), None)
    said = "; ".join(str(e.get("message")) for e in got if e["event"] == "error")
    problems = scc.delivery_problems(exp, first, said)
    shown = f"reported {first}" if first else f"reported no message ({said or 'no error'})"
    verdict = ("fail", "; ".join(problems)) if problems else ("pass", shown)
    return verdict, any(m.data == AFTER.data for m in messages)


_ANSWER_OF = {request: answer for answer, request in scc.ANSWERS.items()}
_AFTER_B64 = base64.b64encode(AFTER.data).decode()


def _result(
    case: vectors.Case,
    outcome: str,
    message: str,
    ms: float,
    transcript: str = "",
    *,
    row_id: str | None = None,
    level: str | None = None,
    category: str = CONFORMANCE,
) -> Checked:
    """A streaming client's row: the one place its ``Found`` is built."""
    description = f"{case.data['description']} (vector {case.id})"
    ref = CaseRef(row_id or case.id, level or case.level, case.source, description, case.group)
    return Checked(ref, Found(outcome, message, round(ms, 3), transcript, category=category))


def run_streaming_client_vectors(
    client: StreamingClient, server: RunningServer, cases: list[vectors.Case]
) -> Iterator[Checked]:
    """Every client-role streaming case against one library, each row as soon as known:
    streaming.client cases as sessions, encode cases ``@send``, decode cases ``@receive``."""
    for case in cases:
        if "client" not in case.roles:
            continue
        if case.kind == sc.KIND:
            yield run_case(client, server, case)
        elif case.kind == "streaming.encode":
            yield run_send(client, server, case)
        elif case.kind == "streaming.decode":
            yield from run_receive(client, server, case)


# --- a real streaming server, as the client reports it ------------------------------------------


def server_observation(
    client: StreamingClient, url: str, cluster_id: str, case: vectors.Case
) -> tuple[str, str | None]:
    """The case's steps against the streaming server at ``url``: what the client reported,
    and why the server's part of the case (every step succeeds, ``received``) does not hold.
    What the client sent is the client's part, judged by its own rows. A DriverError when the
    client cannot take the case (a step it lacks, an answer about its driver): nothing observed.
    """
    with client.driver() as driver:
        session = _Session(driver, client, {**case.data["input"], "cluster_id": cluster_id},
                           case.data["expect"])  # fmt: skip
        try:
            _take_steps(session, url)
        except Ruled as exc:
            raise DriverError(f"{client.name} cannot take the case: {exc}") from None
    server_part = {"received": case.data["expect"].get("received", {})}
    problems = sc.judge(case.data["input"], server_part, session.observed)
    steps = ", ".join("ok" if r.ok else f"failed ({r.error})" for r in session.observed.steps)
    got = "; ".join(f"{sub}: {sc.show(d)}" for sub, d in sorted(session.observed.received.items()))
    return f"steps {steps}; received {got or 'nothing'}", "; ".join(problems) or None


@dataclass(frozen=True)
class StreamingClientSuite(OfCases):
    """A NATS Streaming client library (``harness.suites``) against the client-role streaming
    ``cases``, through the reference streaming server bridged onto a nats-server of target
    ``server``; a gating failure runs again through a new run of its vector."""

    spec: str
    cases: list[vectors.Case]
    server: str

    role = "client"

    @property
    def label(self) -> str:
        return f"client run {self.spec}"

    def planned(self) -> list[PlannedRow]:
        # One row per case, a decode case the library must survive two. Not known exactly before
        # running: a driver that fails before a decode case is judged gives only its @receive
        # row; the plan counts both.
        rows = []
        for case in (c for c in self.cases if "client" in c.roles):
            if case.kind == sc.KIND:
                rows.append((case.id, case.level, case))
            elif case.kind == "streaming.encode":
                rows.append((f"{case.id}@send", case.level, case))
            elif case.kind == "streaming.decode":
                rows.append((f"{case.id}@receive", case.level, case))
                if "error" in case.data["expect"] and _reachable(case):
                    survives = derived_level(case.level, "must")
                    rows.append((f"{case.id}@receive-survives", survives, case))
        return [PlannedRow(self.spec, row, c.id, lv, c.group) for row, lv, c in rows]

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        client = parse_spec(self.spec)
        if client is None:
            raise SuiteError(f"client {self.spec} is no NATS Streaming client")
        try:
            target = open_target(self.server)
        except TargetError as exc:
            raise SuiteError(f"target {self.server} cannot start: {exc}") from exc
        with target:
            try:
                server = target.server({})
            except TargetError as exc:
                raise SuiteError(f"target {self.server} cannot start: {exc}") from exc
            try:
                client.driver().close()  # build now: a broken build stops the run with why
            except (ClientError, DriverError) as exc:
                raise SuiteError(f"client {self.spec} cannot start: {exc}") from exc
            run = partial(run_streaming_client_vectors, client, server)
            listed = partial(baseline.lists, client.name, client.version)
            # A streaming client speaks plain TCP only: every row is a tcp row.
            again = rerun_by_vector(lambda cases, _: run(cases), self.cases)
            for result, flaky in rerun_failures(run(self.cases), again, reruns, listed):
                yield judged(write_result(client, writer, ctx, result), flaky, baseline, on_row)


def _reachable(case: vectors.Case) -> bool:
    """Whether a decode case's bytes can be delivered to a library at all."""
    try:
        scc.receive_plan(case.data["input"], case.data["expect"])
    except scc.Unreachable:
        return False
    return True
