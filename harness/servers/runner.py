"""Run server cases against server targets: one row per (target, case, transport), judged by the
gate; the server suite of a run (``harness.suites``).

Transport is a dimension of the run: each wire case runs over each transport the run selects
(``conformance.transports.TRANSPORTS``). A plain TCP row keeps the case's id, so history and
baselines stay valid; another transport's row is ``<case id>@<transport>``, the ``@`` form every
reader of row ids takes (selection, renames, the gate, the report). A transport the target lacks
gives skip rows naming why. Over a WebSocket transport every protocol.parse case's wire script
also runs in each server frame layout the bundled ``frames.layout`` vectors define
(``conformance.frame_layouts``): row ``<case id>~<layout>@<transport>``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

from ...conformance import frame_layouts, wire_script
from ...conformance.frame_layouts import Layout
from ...conformance.streaming_server_session import KIND as STREAMING_SERVER
from ...conformance.transports import DEFAULT_TRANSPORT, row_id
from ...conformance.vectors import Case, LoadResult, bundled_cases, decode_bytes, load_all
from ...conformance.verdicts import ROBUSTNESS, derived_level
from ..gate import GATING_LEVEL, Baseline, attempts
from ..results import CaseRef, Found, ResultsWriter, RunContext
from ..runtime import lanes
from ..suites import (
    Judged,
    OfCases,
    OnRow,
    PlannedRow,
    SuiteError,
    case_ids,
    judged,
)
from . import jetstream_names
from .checks import check_case
from .config import TRANSPORT_GROUPS
from .kinds import open_target
from .specs import TargetError, WireTarget
from .wire import ServerRun

# The case that checks a server's greeting: run first, so a broken greeting fails a must case.
GREETING_CASE = "protocol.info.session.greeting"


def server_cases(loaded: LoadResult) -> list[Case]:
    """The cases a server target is checked with: those whose roles name ``server`` (a wire script,
    or a name asked through the JetStream API) and any other case with a wire script; the
    streaming.server cases are a ``stan:`` target's (harness.servers.streaming_checks), and a
    frame layout gives no row of its own (every protocol.parse case runs in it: ``Row``)."""
    return [
        case
        for case in loaded.cases
        if ("server" in case.roles or "wire" in case.data)
        and case.kind not in (STREAMING_SERVER, frame_layouts.KIND)
    ]


def load_server_cases(paths: list[Path]) -> tuple[list[Case], LoadResult]:
    loaded = load_all(paths)
    return server_cases(loaded), loaded


def ordered(cases: list[Case]) -> list[Case]:
    """``cases`` in the order a target is checked with them: the greeting case first."""
    return sorted(cases, key=lambda c: c.id != GREETING_CASE)


Pair = tuple[str, Case]  # a transport and a case: one row


@dataclass(frozen=True)
class Framed:
    """A frame layout a row's wire script sends its bytes in, and the vector that defines it."""

    case: Case
    layout: Layout


@dataclass(frozen=True)
class Row:
    """One row of a target: a case over a transport, in a frame layout or not. A layout row
    rests on the layout's statement, at the lower of the two cases' levels."""

    transport: str
    case: Case
    framed: Framed | None = None

    @property
    def id(self) -> str:
        layout = "" if self.framed is None else self.framed.layout.name
        return row_id(self.case.id, self.transport, layout)

    @property
    def level(self) -> str:
        own = self.case.level
        return own if self.framed is None else derived_level(own, self.framed.case.level)

    def ref(self) -> CaseRef:
        case, framed = self.case, self.framed
        if framed is None:
            return dataclasses.replace(CaseRef.of(case), case_id=self.id)
        how = f"In the frames of layout {framed.layout.name} ({framed.case.id}): "
        return CaseRef(self.id, self.level, framed.case.source, how + case.data["description"],
                       case.group)  # fmt: skip


@cache
def _layouts() -> tuple[Framed, ...]:
    """The frame layouts the bundled ``frames.layout`` vectors give servers."""
    defined = frame_layouts.defined(bundled_cases(), "server")
    return tuple(Framed(case, layout) for case, layout in defined)


def _framed_applies(case: Case, layout: Layout) -> bool:
    """Whether ``case`` has a row in ``layout``: a protocol.parse case's wire script (on no
    transport of its own) with bytes the layout has somewhere to cut."""
    wire = case.data.get("wire")
    if (
        case.kind != frame_layouts.DELIVERED_KIND
        or wire is None
        or wire_script.transport_of(wire) is not None
    ):
        return False
    sends = [decode_bytes(e.get("send", ""), "send") for e in wire["exchanges"]]
    return layout.applies(sends)


def server_rows(cases: list[Case], transports: tuple[str, ...]) -> list[Row]:
    """Every row of ``cases`` over ``transports``, transport after transport: the
    ``transport_rows``, then over a WebSocket transport each layout's rows it carries."""
    out = []
    for transport in transports:
        out += [Row(t, c) for t, c in transport_rows(cases, (transport,))]
        out += [
            Row(transport, case, framed)
            for framed in _layouts()
            if framed.layout.transport == transport
            for case in ordered(cases)
            if _framed_applies(case, framed.layout)
        ]
    return out


def _runs_over(case: Case, transport: str) -> bool:
    """Whether ``case`` has a row over ``transport``: a case about its transport (a wire script
    pinned to one) over that one only, another wire script over each, and a case without one (a
    name asked through the JetStream API) over plain TCP only."""
    wire = case.data.get("wire")
    if wire is None:
        return transport == DEFAULT_TRANSPORT
    pinned = wire_script.transport_of(wire)
    return pinned is None or pinned == transport


def transport_rows(cases: list[Case], transports: tuple[str, ...]) -> list[Pair]:
    """The rows of ``cases`` over ``transports``, transport after transport in the order given,
    each transport's greeting case first (``_runs_over`` says which cases each has)."""
    return [
        (transport, case)
        for transport in transports
        for case in ordered(cases)
        if _runs_over(case, transport)
    ]


def run_target(
    ctx: RunContext,
    target: WireTarget,
    cases: list[Case],
    writer: ResultsWriter,
    baseline: Baseline,
    on_result: OnRow = lambda row, verdict: None,
    *,
    reruns: int = 0,
    transports: tuple[str, ...] = (DEFAULT_TRANSPORT,),
    rows: frozenset[str] = frozenset(),
) -> Iterator[Judged]:
    """Check every case against one target over each of ``transports`` (only the row ids
    ``rows`` when given), writing each row as soon as it and every row before it are known:
    transport after transport, in case order.

    The transports run side by side, one lane each (``harness.runtime.lanes``), except those
    one server serves (``TRANSPORT_GROUPS``), which take turns: so a crash is charged to the
    case whose server died, and a server's run over every transport costs a few times its TCP
    run instead of once per transport.

    Over each transport the greeting case runs first. Once a case finds that the server does not
    greet with INFO, that case fails and every later one over that transport is an ``error``
    saying why, without connecting again. A must case that fails beyond the baseline, and a case
    of any level that fails as robustness (a crash, a hang), runs up to ``reruns`` more times;
    one that then passes gets one row, the passing one, whose message names every failed
    attempt, and the verdict ``FLAKY``.
    """
    version = target.version()
    chosen = [r for r in server_rows(cases, transports) if not rows or r.id in rows]
    turns = {group: threading.Lock() for group in TRANSPORT_GROUPS.values()}

    def lane(transport: str) -> Iterator[tuple[Row, Found, bool]]:
        with turns[TRANSPORT_GROUPS[transport]]:
            broken = ""  # why this transport's server greeting is broken
            for r in chosen:
                if r.transport != transport:
                    continue
                if broken:
                    yield r, Found("error", f"not run: {broken}", 0.0), False
                    continue
                unlisted = r.level == GATING_LEVEL and not baseline.lists(
                    target.name, version, r.id
                )
                found, flaky, greeting = _attempted(r, target, reruns, unlisted=unlisted)
                if greeting:
                    broken = f"the target's greeting is broken ({found.message})"
                yield r, found, flaky

    used = [t for t in transports if any(r.transport == t for r in chosen)]
    target_id = (target.name, target.kind, version)
    work = [partial(lane, transport) for transport in used]
    try:
        for r, found, flaky in lanes.in_order(work):
            row = ctx.record(writer, target_id, r.ref(), found, transport=r.transport)
            yield judged(row, flaky, baseline, on_result)
    finally:
        jetstream_names.close_sessions()  # this target's servers stop next: let go of them first


def _attempted(
    r: Row, target: WireTarget, reruns: int, *, unlisted: bool
) -> tuple[Found, bool, bool]:
    """Row ``r`` on ``target``, run again up to ``reruns`` more times while it fails, when it is
    a must row the baseline does not list (``unlisted``) or failed as robustness: what it found,
    whether flaky, and whether the server's greeting broke."""
    layout = None if r.framed is None else r.framed.layout

    def check() -> ServerRun:
        return check_case(r.case, target, transport=r.transport, layout=layout)

    runs = [check()]

    def again() -> Found:
        runs.append(check())
        return runs[-1].found

    # A crash or a hang fails at every level: it is run again at every level too.
    rerun = unlisted or runs[0].found.category == ROBUSTNESS
    # A broken greeting is not run again: it breaks every case, and the run says so.
    found, flaky = attempts(runs[0].found, again, reruns if rerun else 0,
                            stop=lambda _: runs[-1].greeting_broken)  # fmt: skip
    return found, flaky, runs[-1].greeting_broken


@dataclass(frozen=True)
class ServerSuite(OfCases):
    """The wire cases (and the name cases asked through the JetStream API) against one server
    target over each of ``transports``, opened for the run and stopped after it; with ``rows``,
    only those row ids."""

    spec: str
    cases: list[Case]
    transports: tuple[str, ...] = (DEFAULT_TRANSPORT,)
    rows: frozenset[str] = frozenset()

    role = "server"

    @property
    def label(self) -> str:
        return f"server {self.spec}"

    def planned(self) -> list[PlannedRow]:
        out = []
        for r in server_rows(self.cases, self.transports):
            if not self.rows or r.id in self.rows:
                out.append(PlannedRow(self.spec, r.id, r.case.id, r.level, r.case.group))
        return out

    def only(self, rows: Collection[PlannedRow]) -> ServerSuite:
        """The cases ``rows`` come from, and only those rows (not every transport of each)."""
        wanted = case_ids(rows)
        cases = [case for case in self.cases if case.id in wanted]
        return dataclasses.replace(self, cases=cases, rows=frozenset(r.row_id for r in rows))

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        why = f"target {self.spec} cannot start"
        try:
            target = open_target(self.spec)
        except TargetError as exc:
            raise SuiteError(f"{why}: {exc}") from exc
        with target:
            offered = [t for t in self.transports if target.lacks(t) is None]
            try:  # a target that cannot start at all is a usage problem
                if offered:
                    target.server({}, offered[0])
            except TargetError as exc:
                raise SuiteError(f"{why}: {exc}") from exc
            yield from run_target(
                ctx, target, self.cases, writer, baseline, on_row, reruns=reruns,
                transports=self.transports, rows=self.rows,
            )  # fmt: skip
