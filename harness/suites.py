"""One interface for every suite a run is made of: what the command and the pytest plugin iterate.

A suite is one kind of check against one set of targets: a server target's wire cases, the real
streaming server's checks, a client library's client-role vectors, the interop matrix, a NATS
Streaming client. Each says first which rows it will write (``planned``: what ``--dry-run``
prints, the progress counter's total and the plugin's items) and then writes them (``run``), each
row judged against the baseline (``harness.gate``) as soon as it is known.

The implementations live in their wing (``harness.servers``, ``harness.clients``); this module
imports neither, so both can implement it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace
from typing import Protocol, Self

from ..conformance.vectors import Case
from .gate import Baseline, Verdict
from .results import ResultRow, ResultsWriter, RunContext

Judged = tuple[ResultRow, Verdict]
OnRow = Callable[[ResultRow, Verdict], None]


@dataclass(frozen=True)
class PlannedRow:
    """A row a suite will write: its target as the user named it (for a pair of clients
    ``A->B``), the row's id, the vector case it comes from ("" for a check that is no vector),
    its level and its rule group."""

    target: str
    row_id: str
    case_id: str
    level: str
    group: str

    def line(self) -> str:
        """The row as ``--dry-run`` prints it."""
        return f"{self.target}\t{self.row_id}\t{self.level}\t{self.group}"


class SuiteError(Exception):
    """A suite that cannot start (a target or a driver that will not come up): a usage problem,
    its message names the target and why."""


class Suite(Protocol):
    """One kind of check against its targets."""

    @property
    def label(self) -> str:
        """What the suite is doing, for the console (e.g. ``client run client:nats-py``)."""
        ...

    @property
    def role(self) -> str:
        """The role its targets play: ``server`` or ``client``."""
        ...

    def planned(self) -> list[PlannedRow]:
        """The rows ``run`` will write, in its order."""
        ...

    def only(self, rows: Collection[PlannedRow]) -> Suite:
        """The same suite running no more than it takes to write ``rows`` (some of its planned
        rows): the vectors they come from, the checks that give them."""
        ...

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        """Write each row as soon as it is known and yield it with its verdict (``on_row`` hears
        of it first). A gating failure runs again up to ``reruns`` more times where the suite can
        run one case again; ``SuiteError`` when the suite cannot start."""
        ...


def judged(row: ResultRow, flaky: bool, baseline: Baseline, on_row: OnRow) -> Judged:
    """``row`` with its verdict (flaky when it passed after failing), told to ``on_row``."""
    verdict = Verdict.FLAKY if flaky else baseline.verdict(row)
    on_row(row, verdict)
    return row, verdict


def case_ids(rows: Collection[PlannedRow]) -> set[str]:
    """The vector cases ``rows`` come from."""
    return {row.case_id for row in rows}


class OfCases:
    """A suite (a dataclass) over vector ``cases``: ``only`` keeps the cases the rows asked for
    come from, and every row of each (the rows of a case share its session)."""

    cases: list[Case]

    def only(self, rows: Collection[PlannedRow]) -> Self:
        wanted = case_ids(rows)
        return replace(self, cases=[case for case in self.cases if case.id in wanted])
