"""A client row: written with its library's name and version and its transport, and, when it is
a gating failure, run again through a new run of its case over that transport
(``harness.gate.attempts``).

A row's id names its transport as a server row's does (``conformance.transports.row_id``): the
tcp row keeps its id (``<vector id>`` or ``<vector id>@<path>``), another transport's row adds
``@<transport>``; ``transport_of`` reads it back."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import partial
from typing import Protocol

from ...conformance import vectors
from ...conformance.transports import ROW, transport_of
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
    target = (client.name, "client", client.version)
    return ctx.record(writer, target, result.case, result.found, transport=result.transport)


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
        yield replace(result, found=found), flaky


def _row_again(again: Rerun, result: Checked) -> Found:
    """What a new run of ``result``'s case found for its row (an error when it gave none)."""
    row_id = result.case.case_id
    found = [row.found for row in again(row_id) if row.case.case_id == row_id]
    if not found:
        return replace(result.found, outcome="error", message="running the case again gave no row")
    return found[0]


Run = Callable[[list[vectors.Case], tuple[str, ...]], Iterable[Checked]]  # cases, transports


def rerun_by_vector(run: Run, cases: list[vectors.Case]) -> Rerun:
    """Run again through ``run`` the vector of a row (its id is
    ``<vector id>[@<path>][@<transport>]``), over the row's transport only."""
    by_id = {case.id: case for case in cases}

    def again(row_id: str) -> Iterable[Checked]:
        head, transport = transport_of(row_id)
        return run([by_id[head.partition(ROW)[0]]], (transport,))

    return again
