"""Run server cases against server targets: one row per (target, case), judged by the gate."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from nats_conformance.conformance.vectors import Case, LoadResult, load_all
from nats_conformance.conformance.verdicts import ROBUSTNESS
from nats_conformance.harness.gate import GATING_LEVEL, Baseline, Verdict, attempts
from nats_conformance.harness.results import Found, ResultRow, ResultsWriter, RunContext
from nats_conformance.harness.servers import jetstream_names
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.targets import ServerTarget
from nats_conformance.harness.servers.wire import CaseResult

# The case that checks a server's greeting: run first, so a broken greeting fails a must case.
GREETING_CASE = "protocol.info.session.greeting"


def server_cases(loaded: LoadResult) -> list[Case]:
    """The cases a server target is checked with: those whose roles name ``server`` (a wire script,
    or a name asked through the JetStream API) and any other case with a wire script."""
    return [case for case in loaded.cases if "server" in case.roles or "wire" in case.data]


def load_server_cases(paths: list[Path]) -> tuple[list[Case], LoadResult]:
    loaded = load_all(paths)
    return server_cases(loaded), loaded


def record(
    ctx: RunContext,
    writer: ResultsWriter,
    target: ServerTarget,
    version: str,
    case: Case,
    result: CaseResult,
) -> ResultRow:
    """Write a case's row with its requirement and transcript as details."""
    transcript = "" if result.transcript is None else result.transcript.text()
    return ctx.record(
        writer,
        (target.name, target.kind, version),
        (case.id, case.group, case.level),
        Found(
            result.outcome,
            result.message,
            result.duration_ms,
            transcript,
            observed=result.observed,
            category=result.category,
        ),
        source=case.source,
        description=case.data["description"],
    )


def run_target(
    ctx: RunContext,
    target: ServerTarget,
    cases: list[Case],
    writer: ResultsWriter,
    baseline: Baseline,
    on_result: Callable[[ResultRow, Verdict], None] = lambda row, verdict: None,
    *,
    reruns: int = 0,
) -> list[tuple[ResultRow, Verdict]]:
    """Check every case against one target, writing each row as soon as it is known.

    The greeting case runs first. Once a case finds that the server does not greet with INFO,
    that case fails and every later one is an ``error`` saying why, without connecting again.
    A must case that fails beyond the baseline, and a case of any level that fails as robustness
    (a crash, a hang), runs up to ``reruns`` more times; one that then passes gets one row, the
    passing one, whose message names every failed attempt, and the verdict ``FLAKY``.
    """
    version = target.version()
    out = []
    broken_greeting = ""
    try:
        for case in sorted(cases, key=lambda c: c.id != GREETING_CASE):
            flaky = False
            if broken_greeting:
                result = CaseResult("error", f"not run: {broken_greeting}", 0.0)
            else:
                gating = case.level == GATING_LEVEL
                unlisted = gating and not baseline.lists(target.name, version, case.id)
                # A broken greeting is not run again: it breaks every case, and the run says so.
                again = partial(check_case, case, target)
                first = again()
                # A crash or a hang fails at every level: it is run again at every level too.
                rerun = unlisted or first.category == ROBUSTNESS
                result, flaky = attempts(first, again, reruns if rerun else 0,
                                         stop=lambda result: result.greeting_failed)  # fmt: skip
                if result.greeting_failed:
                    broken_greeting = f"the target's greeting is broken ({result.message})"
            row = record(ctx, writer, target, version, case, result)
            verdict = Verdict.FLAKY if flaky else baseline.verdict(row)
            out.append((row, verdict))
            on_result(row, verdict)
    finally:
        jetstream_names.close_sessions()  # this target's servers stop next: let go of them first
    return out
