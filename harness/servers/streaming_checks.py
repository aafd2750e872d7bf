"""The real streaming server (a ``stan:`` target) checked with the streaming.server vectors.

The suite is the client: ``StanSession`` is one core NATS connection speaking the streaming
protocol through the reference codec, the I/O side of the session the vectors judge
(conformance.streaming_server_session). The session runs once against a launched server and
once against the reference streaming server; each case's row judges the real server's answer to
its step against the case's ``expect`` and says where the reference answered otherwise.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ...conformance import protocol as p
from ...conformance import streaming_messages as pb
from ...conformance import streaming_server_session as session
from ...conformance.streaming_messages import DecodeError
from ...conformance.streaming_server_session import (
    CLUSTER_ID,
    REPLY_TIMEOUT,
    Answer,
    Received,
    Scenario,
    describe,
)
from ...conformance.vectors import Case
from ...conformance.verdicts import observation
from ..gate import Baseline
from ..results import CaseRef, Found, ResultRow, ResultsWriter, RunContext
from ..runtime.limits import READ_LIMITS
from ..suites import Judged, OfCases, OnRow, PlannedRow, SuiteError, judged
from . import stan
from .specs import TargetError

KIND = session.KIND


class StanSession:
    """One core NATS connection speaking the streaming protocol through the reference codec
    (a ``Transport`` of the session).

    Every streaming message sent or received is decoded into ``transcript``; heartbeats to the
    session's heartbeat inbox are answered at once, as a client must.
    """

    def __init__(self, host: str, port: int) -> None:
        self._sock = socket.create_connection((host, port), timeout=REPLY_TIMEOUT)
        self._parser = p.Parser(p.Direction.SERVER, limits=READ_LIMITS)
        self._prefix = f"_INBOX.{uuid.uuid4().hex}"
        self._count = 0
        self._kinds: dict[str, str] = {}  # inbox -> the message name arriving there
        self._pongs = 0
        self._started = time.monotonic()
        self._received: dict[str, list[pb.Message | DecodeError]] = {}
        self.transcript: list[str] = []
        self.heartbeat = self.inbox("heartbeat")
        connect = p.Connect({"verbose": False, "pedantic": False, "name": "nats-conformance"})
        self._write([connect, p.Sub(f"{self._prefix}.>", None, "1"), p.Ping()])
        self.wait(lambda: self._pongs > 0, REPLY_TIMEOUT)
        if not self._pongs:
            raise ConnectionError(f"no PONG from {host}:{port} within {REPLY_TIMEOUT:g} s")

    def inbox(self, name: str) -> str:
        self._count += 1
        return f"{self._prefix}.{name}.{self._count}"

    def _note(self, line: str) -> None:
        self.transcript.append(f"{time.monotonic() - self._started:7.3f}s {line}")

    def _write(self, ops: list[p.Op]) -> None:
        self._sock.sendall(b"".join(p.encode(op) for op in ops))  # type: ignore[misc]

    def wait(self, done: Callable[[], bool], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not done() and (left := deadline - time.monotonic()) > 0:
            self._sock.settimeout(left)
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                return
            if not data:
                raise ConnectionError("the server closed the NATS connection")
            for event in self._parser.feed(data):
                self._dispatch(event)

    def _dispatch(self, event: p.Event) -> None:
        if isinstance(event, p.Ping):
            self._write([p.Pong()])
        elif isinstance(event, p.Pong):
            self._pongs += 1
        elif isinstance(event, p.Msg) and event.subject == self.heartbeat:
            self._note(f"<- heartbeat on {event.subject}, answered")
            if event.reply:
                self._write([p.Pub(event.reply, None, b"")])
        elif isinstance(event, p.Msg):
            kind = self._kinds.get(event.subject)
            message = pb.decode(kind, event.payload) if kind else None
            self._note(f"<- {event.subject} {kind or 'unexpected'} {describe(message)}")
            if message is not None:
                self._received.setdefault(event.subject, []).append(message)
        elif isinstance(event, p.Err | p.ProtocolError):
            self._note(f"<- {event!r}")

    def expect(self, subject: str, kind: str) -> str:
        self._kinds[subject] = kind
        return subject

    def send(self, subject: str, message: pb.Message, reply: str | None = None) -> None:
        via = f" (reply {reply})" if reply else ""
        self._note(f"-> {subject}{via} {message.NAME} {json.dumps(pb.to_json(message))}")
        self._write([p.Pub(subject, reply, pb.encode(message))])

    def request(self, subject: str, message: pb.Message, answer: str) -> Received:
        reply = self.expect(self.inbox(answer), answer)
        self.send(subject, message, reply)
        self.wait(lambda: bool(self._received.get(reply)), REPLY_TIMEOUT)
        return next(iter(self._received.get(reply, [])), None)

    def received(self, inbox: str) -> list[pb.Message | DecodeError]:
        return self._received.get(inbox, [])

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now_ns(self) -> int:
        return time.time_ns()

    def clock(self) -> float:
        return time.monotonic()

    def unique(self) -> str:
        return uuid.uuid4().hex

    def close(self) -> None:
        self._sock.close()


def run_session(host: str, port: int, cluster_id: str) -> tuple[dict[str, Answer], list[str]]:
    """The session against the streaming server behind a NATS server at ``host:port``: an
    Answer per step, and the decoded transcript."""
    try:
        transport = StanSession(host, port)
    except OSError as exc:
        return session.not_run(f"not run: cannot open a NATS connection: {exc}"), []
    try:
        return Scenario(transport, cluster_id).run(), transport.transcript
    finally:
        transport.close()


@dataclass(frozen=True)
class Observation:
    """What one row's check saw: the answer, why the case's expectation does not hold (None
    when it holds), why the check could not run, and how long it took."""

    answer: str
    problem: str | None = None
    error: str | None = None
    ms: float = 0.0


def observed(case: Case, answer: Answer) -> Observation:
    """A streaming.server case's Observation of its step's answer."""
    if answer.error:
        return Observation("", error=answer.error, ms=answer.ms)
    return Observation(answer.text, session.judge(case.data["expect"], answer), ms=answer.ms)


def verdict(level: str, real: Observation, ref: Observation | None, name: str) -> tuple[str, str]:
    """(outcome, message) of a real streaming server's row; the message says where the reference
    streaming server answered otherwise (an info row is only that comparison)."""
    if real.error:
        return "error", real.error
    parts = []
    problem = real.problem if level != "info" else None
    if problem:
        parts.append(f"{problem}; {name} answered: {real.answer}")
    if ref is not None and (ref.error or ref.answer != real.answer):
        ref_said = ref.error or ref.answer
        own = f" (failing this check itself: {ref.problem})" if ref.problem else ""
        parts.append(
            f"differs from the reference streaming server: {name} answered {real.answer}; "
            f"the reference answered {ref_said}{own}"
        )
    return ("fail" if problem else "pass"), "; ".join(parts)


def record(
    ctx: RunContext,
    writer: ResultsWriter,
    target: stan.StanServerTarget,
    ref: CaseRef,
    real: Observation,
    expected: Observation | None,
    transcript: str = "",
) -> ResultRow:
    """The row of a check against the real streaming server, compared with the reference."""
    outcome, message = verdict(ref.level, real, expected, f"{stan.NAME} {target.version()}")
    found = Found(outcome, message, real.ms, transcript,
                  observed=observation(real.error or real.answer))  # fmt: skip
    return ctx.record(writer, (target.name, target.kind, target.version()), ref, found)


def run_cases(
    target: stan.StanServerTarget, cases: list[Case], writer: ResultsWriter, ctx: RunContext
) -> list[ResultRow]:
    """The session against a fresh server of ``target`` and against the reference; a row per
    case, in the cases' order."""
    with target.launch(CLUSTER_ID) as real:
        answers, transcript = run_session(real.host, real.port, CLUSTER_ID)
    reference = session.reference_answers(CLUSTER_ID)
    rows = []
    for case in cases:
        step = case.data["input"]["step"]
        missing = Answer("", error=f"no step {step!r} in the session")
        real_obs = observed(case, answers.get(step, missing))
        ref_obs = observed(case, reference.get(step, missing))
        rows.append(record(ctx, writer, target, CaseRef.of(case), real_obs, ref_obs,
                           "\n".join(transcript)))  # fmt: skip
    return rows


def open_stan(spec: str) -> stan.StanServerTarget:
    """The target of a ``stan:`` spec (built on first use); SuiteError when it cannot start."""
    try:
        return stan.open_target(spec)
    except TargetError as exc:
        raise SuiteError(f"target {spec} cannot start: {exc}") from exc


@dataclass(frozen=True)
class StanServerSuite(OfCases):
    """The streaming.server ``cases`` against one real streaming server (built on first use):
    one session judges them all, compared with the reference streaming server."""

    spec: str
    cases: list[Case]

    role = "server"

    @property
    def label(self) -> str:
        return f"streaming server {self.spec}"

    def planned(self) -> list[PlannedRow]:
        # Every case has a row: a session that stops early gives the rest "not run" errors.
        return [PlannedRow(self.spec, c.id, c.id, c.level, c.group) for c in self.cases]

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        if not self.cases:
            return
        target = open_stan(self.spec)
        try:
            rows = run_cases(target, self.cases, writer, ctx)
        except TargetError as exc:  # the server will not launch
            raise SuiteError(str(exc)) from exc
        # No case runs again: one session judges them all.
        for row in rows:
            yield judged(row, False, baseline, on_row)
