"""A client row: written with its library's name and version, and, when it is a gating failure,
run again through a new run of its case (``harness.gate.attempts``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import partial
from typing import Protocol

from ...conformance import vectors
from ..gate import GATING_LEVEL, attempts
from ..results import Checked, Found, ResultRow, ResultsWriter, RunContext


class Named(Protocol):
    """What a client row names of its library: a driver's target or a streaming client."""

    name: str
    version: str


def write_result(
    client: Named, writer: ResultsWriter, ctx: RunContext, result: Checked
) -> ResultRow:
    """Write one client row, with its requirement and transcript as details."""
    return ctx.record(writer, (client.name, "client", client.version), result.case, result.found)


# --- running a failing row again -----------------------------------------------------------------

Rerun = Callable[[str], Iterable[Checked]]  # a row id -> the rows of a new run of its case


def rerun_failures(
    results: Iterable[Checked], again: Rerun, reruns: int, listed: Callable[[str], bool]
) -> Iterator[tuple[Checked, bool]]:
    """Each of ``results`` and whether it is flaky: a gating failure (a must row that fails and
    that ``listed``, the baseline, does not name) is run again through ``again``, up to
    ``reruns`` more times (harness.gate.attempts)."""
    for result in results:
        gating = result.case.level == GATING_LEVEL and not listed(result.case.case_id)
        found, flaky = attempts(
            result.found, partial(_row_again, again, result), reruns if gating else 0
        )
        yield Checked(result.case, found), flaky


def _row_again(again: Rerun, result: Checked) -> Found:
    """What a new run of ``result``'s case found for its row (an error when it gave none)."""
    row_id = result.case.case_id
    found = [row.found for row in again(row_id) if row.case.case_id == row_id]
    if not found:
        return replace(result.found, outcome="error", message="running the case again gave no row")
    return found[0]


def rerun_by_vector(
    run: Callable[[list[vectors.Case]], Iterable[Checked]], cases: list[vectors.Case]
) -> Rerun:
    """Run again through ``run`` the vector of a row (its id is ``<vector id>[@<path>]``)."""
    by_id = {case.id: case for case in cases}
    return lambda row_id: run([by_id[row_id.partition("@")[0]]])
