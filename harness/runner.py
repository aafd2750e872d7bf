"""Run server cases against server targets: one row per (target, case), judged by the gate."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from conformance.vectors import Case, LoadResult, load_all
from harness import jetstream_names
from harness.checks import check_case
from harness.gate import Baseline, Verdict
from harness.results import (
    ResultRow,
    ResultsWriter,
    bounded,
    now,
    run_id,
    suite_version,
    vectors_version,
)
from harness.targets import ServerTarget
from harness.wire import CaseResult


@dataclass(frozen=True)
class RunContext:
    """What every row of one run shares."""

    run_id: str
    suite_version: str
    vectors_version: str

    @classmethod
    def for_vectors(cls, paths: Iterable[Path]) -> RunContext:
        return cls(run_id(), suite_version(), vectors_version(paths))

    def row(
        self,
        *,
        target: str,
        target_kind: str,
        target_version: str,
        case_id: str,
        group: str,
        level: str,
        outcome: str,
        duration_ms: float,
        message: str,
    ) -> ResultRow:
        """A result row of this run, stamped now."""
        return ResultRow(
            self.run_id, now(), self.suite_version, self.vectors_version, target, target_kind,
            target_version, case_id, group, level, outcome, round(duration_ms, 3),
            bounded(message),
        )  # fmt: skip


# The case that checks a server's greeting: run first, so a broken greeting fails a must case.
GREETING_CASE = "protocol.info.session.greeting"


def server_cases(loaded: LoadResult) -> list[Case]:
    """The cases a server target is checked with: those whose roles name ``server`` (a wire script,
    or a name asked through the JetStream API) and any other case with a wire script."""
    return [case for case in loaded.cases if "server" in case.roles or "wire" in case.data]


def load_server_cases(paths: list[Path]) -> tuple[list[Case], LoadResult]:
    loaded = load_all(paths)
    return server_cases(loaded), loaded


def make_row(
    ctx: RunContext, target: ServerTarget, version: str, case: Case, result: CaseResult
) -> ResultRow:
    return ctx.row(
        target=target.name,
        target_kind=target.kind,
        target_version=version,
        case_id=case.id,
        group=case.group,
        level=case.level,
        outcome=result.outcome,
        duration_ms=result.duration_ms,
        message=result.message,
    )


def write_row(writer: ResultsWriter, row: ResultRow, case: Case, result: CaseResult) -> None:
    """Write a case's row with its requirement and transcript as details."""
    transcript = "" if result.transcript is None else result.transcript.text()
    writer.write(
        row, source=case.source, description=case.data["description"], transcript=transcript
    )


def run_target(
    ctx: RunContext,
    target: ServerTarget,
    cases: list[Case],
    writer: ResultsWriter,
    baseline: Baseline,
    on_result: Callable[[ResultRow, Verdict], None] = lambda row, verdict: None,
) -> list[tuple[ResultRow, Verdict]]:
    """Check every case against one target, writing each row as soon as it is known.

    The greeting case runs first. Once a case finds that the server does not greet with INFO,
    that case fails and every later one is an ``error`` saying why, without connecting again.
    """
    version = target.version()
    out = []
    broken_greeting = ""
    try:
        for case in sorted(cases, key=lambda c: c.id != GREETING_CASE):
            if broken_greeting:
                result = CaseResult("error", f"not run: {broken_greeting}", 0.0)
            else:
                result = check_case(case, target)
                if result.greeting_failed:
                    broken_greeting = f"the target's greeting is broken ({result.message})"
            row = make_row(ctx, target, version, case, result)
            write_row(writer, row, case, result)
            verdict = baseline.verdict(row)
            out.append((row, verdict))
            on_result(row, verdict)
    finally:
        jetstream_names.close_sessions()  # this target's servers stop next: let go of them first
    return out
