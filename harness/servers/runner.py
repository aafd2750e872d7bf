"""Run server cases against server targets: one row per (target, case), judged by the gate; the
server suite of a run (``harness.suites``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...conformance.streaming_server_session import KIND as STREAMING_SERVER
from ...conformance.vectors import Case, LoadResult, load_all
from ...conformance.verdicts import ROBUSTNESS
from ..gate import GATING_LEVEL, Baseline, attempts
from ..results import CaseRef, Found, ResultsWriter, RunContext
from ..suites import (
    Judged,
    OfCases,
    OnRow,
    PlannedRow,
    SuiteError,
    judged,
)
from . import jetstream_names
from .checks import check_case
from .kinds import open_target
from .specs import TargetError, WireTarget

# The case that checks a server's greeting: run first, so a broken greeting fails a must case.
GREETING_CASE = "protocol.info.session.greeting"


def server_cases(loaded: LoadResult) -> list[Case]:
    """The cases a server target is checked with: those whose roles name ``server`` (a wire script,
    or a name asked through the JetStream API) and any other case with a wire script; the
    streaming.server cases are a ``stan:`` target's (harness.servers.streaming_checks)."""
    return [
        case
        for case in loaded.cases
        if ("server" in case.roles or "wire" in case.data) and case.kind != STREAMING_SERVER
    ]


def load_server_cases(paths: list[Path]) -> tuple[list[Case], LoadResult]:
    loaded = load_all(paths)
    return server_cases(loaded), loaded


def ordered(cases: list[Case]) -> list[Case]:
    """``cases`` in the order a target is checked with them: the greeting case first."""
    return sorted(cases, key=lambda c: c.id != GREETING_CASE)


def run_target(
    ctx: RunContext,
    target: WireTarget,
    cases: list[Case],
    writer: ResultsWriter,
    baseline: Baseline,
    on_result: OnRow = lambda row, verdict: None,
    *,
    reruns: int = 0,
) -> Iterator[Judged]:
    """Check every case against one target, writing each row as soon as it is known.

    The greeting case runs first. Once a case finds that the server does not greet with INFO,
    that case fails and every later one is an ``error`` saying why, without connecting again.
    A must case that fails beyond the baseline, and a case of any level that fails as robustness
    (a crash, a hang), runs up to ``reruns`` more times; one that then passes gets one row, the
    passing one, whose message names every failed attempt, and the verdict ``FLAKY``.
    """
    version = target.version()
    broken_greeting = ""
    try:
        for case in ordered(cases):
            flaky = False
            if broken_greeting:
                found = Found("error", f"not run: {broken_greeting}", 0.0)
            else:
                gating = case.level == GATING_LEVEL
                unlisted = gating and not baseline.lists(target.name, version, case.id)
                found, flaky, broken = _attempted(case, target, reruns, unlisted=unlisted)
                if broken:
                    broken_greeting = f"the target's greeting is broken ({found.message})"
            target_id = (target.name, target.kind, version)
            row = ctx.record(writer, target_id, CaseRef.of(case), found)
            yield judged(row, flaky, baseline, on_result)
    finally:
        jetstream_names.close_sessions()  # this target's servers stop next: let go of them first


def _attempted(
    case: Case, target: WireTarget, reruns: int, *, unlisted: bool
) -> tuple[Found, bool, bool]:
    """``case`` on ``target``, run again up to ``reruns`` more times while it fails, when it is
    a must case the baseline does not list (``unlisted``) or failed as robustness: what it found,
    whether flaky, and whether the server's greeting broke."""
    runs = [check_case(case, target)]

    def again() -> Found:
        runs.append(check_case(case, target))
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
    target, opened for the run and stopped after it."""

    spec: str
    cases: list[Case]

    role = "server"

    @property
    def label(self) -> str:
        return f"server {self.spec}"

    def planned(self) -> list[PlannedRow]:
        return [PlannedRow(self.spec, c.id, c.id, c.level, c.group) for c in ordered(self.cases)]

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        why = f"target {self.spec} cannot start"
        try:
            target = open_target(self.spec)
        except TargetError as exc:
            raise SuiteError(f"{why}: {exc}") from exc
        with target:
            try:
                target.server({})  # a target that cannot start at all is a usage problem
            except TargetError as exc:
                raise SuiteError(f"{why}: {exc}") from exc
            yield from run_target(ctx, target, self.cases, writer, baseline, on_row, reruns=reruns)
