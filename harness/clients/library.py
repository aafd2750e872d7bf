"""A client library's suite (``harness.suites``): every client-role vector through the paths of
its kind, over each transport of the run, each row written and judged as soon as it is known; a
gating failure runs again through a new run of its vector over its transport."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from functools import partial

from ...conformance import vectors
from ...conformance.transports import DEFAULT_TRANSPORT, transport_of
from ..gate import Baseline
from ..results import ResultsWriter, RunContext
from ..suites import (
    Judged,
    OfCases,
    OnRow,
    PlannedRow,
    SuiteError,
    case_ids,
    judged,
)
from .client_targets import open_client
from .client_vectors import planned_rows, run_client_vectors
from .registry import ClientError
from .rows import rerun_by_vector, rerun_failures, write_result


@dataclass(frozen=True)
class LibrarySuite(OfCases):
    """One client library (``spec``) with the client-role ``cases`` over ``transports``."""

    spec: str
    cases: list[vectors.Case]
    transports: tuple[str, ...] = (DEFAULT_TRANSPORT,)

    role = "client"

    @property
    def label(self) -> str:
        return f"client run {self.spec}"

    def planned(self) -> list[PlannedRow]:
        return [
            PlannedRow(self.spec, row_id, case.id, level, case.group)
            for row_id, level, case in planned_rows(self.cases, self.transports)
        ]

    def only(self, rows: Collection[PlannedRow]) -> LibrarySuite:
        """The cases ``rows`` come from, over the transports they name (every row of each)."""
        wanted = case_ids(rows)
        named = {transport_of(row.row_id)[1] for row in rows}
        return replace(
            self,
            cases=[case for case in self.cases if case.id in wanted],
            transports=tuple(t for t in self.transports if t in named),
        )

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        try:
            client = open_client(self.spec)
        except ClientError as exc:
            raise SuiteError(f"client {self.spec} cannot start: {exc}") from exc
        try:
            try:
                client.driver().close()  # build now: a broken build stops the run with its reason
            except ClientError as exc:
                raise SuiteError(f"client {self.spec} cannot start: {exc}") from exc
            listed = partial(baseline.lists, client.name, client.version)
            run_vectors = partial(run_client_vectors, client)
            vector_rows = run_vectors(self.cases, self.transports)
            again = rerun_by_vector(run_vectors, self.cases)
            try:
                for result, flaky in rerun_failures(vector_rows, again, reruns, listed):
                    row = write_result(client, writer, ctx, result)
                    yield judged(row, flaky, baseline, on_row)
            finally:
                vector_rows.close()  # first, when the run stops early: its sessions hold the driver
        finally:
            client.close()
