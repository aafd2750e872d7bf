"""A NATS Streaming client library against the real streaming server (a ``stan:`` target).

The library (node-nats-streaming, when its build tools are here) takes the streaming.client
vectors against a launched nats-streaming-server and against the reference streaming server
bridged onto a nats-server; each row is the real server's, judged as the server's answer and
compared with the reference's (harness.servers.streaming_checks.record).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from ...conformance import vectors
from ...conformance.streaming_server import StreamingServerModel
from ...conformance.streaming_server_session import CLUSTER_ID, KIND
from ..gate import Baseline
from ..results import CaseRef, ResultRow, ResultsWriter, RunContext
from ..servers.kinds import open_target
from ..servers.specs import RunningServer, TargetError
from ..servers.stan import StanServerTarget
from ..servers.streaming_checks import Observation, open_stan, record
from ..suites import (
    Judged,
    OfCases,
    OnRow,
    PlannedRow,
    SuiteError,
    judged,
)
from . import streaming_clients
from .client_targets import ClientError
from .driver import DriverError
from .streaming_bridge import StreamingBridge
from .streaming_clients import StreamingClient

Server = Callable[[], AbstractContextManager[tuple[str, str]]]  # a fresh server: (url, cluster id)


# --- a streaming client library against the real streaming server ------------------------------


def client_case_id(library: str, case: vectors.Case) -> str:
    """The row of a streaming.client case a library takes against a streaming server target."""
    return f"streaming.server.{library}.{case.id.removeprefix('streaming.client.')}"


def _client_observations(
    client: StreamingClient, cases: Sequence[vectors.Case], session: Server
) -> dict[str, Observation]:
    """Each streaming.client case's steps through ``client`` against a fresh streaming server
    (``session()``: a context giving its (url, cluster id)), judged as the server's answer."""
    observed = {}
    for case in cases:
        started = time.monotonic()
        case_id = client_case_id(client.library.name, case)
        try:
            with session() as (url, cluster_id):
                answer, problem = streaming_clients.server_observation(
                    client, url, cluster_id, case
                )
        except (DriverError, ClientError, OSError) as exc:
            observed[case_id] = Observation("", error=f"not run: {type(exc).__name__}: {exc}")
            continue
        ms = (time.monotonic() - started) * 1000
        observed[case_id] = Observation(answer, problem, ms=ms)
    return observed


def run_client_cases(
    target: StanServerTarget,
    reference: RunningServer,
    client: StreamingClient,
    cases: Sequence[vectors.Case],
    writer: ResultsWriter,
    ctx: RunContext,
) -> list[ResultRow]:
    """The streaming.client ``cases`` taken by a streaming client library against a launched
    real streaming server, each compared with the reference streaming server bridged onto
    ``reference`` (a nats-server). A case gets a fresh server of each kind, as the vectors
    assume."""

    @contextmanager
    def real_server() -> Iterator[tuple[str, str]]:
        with target.launch(CLUSTER_ID) as real:
            yield real.url, CLUSTER_ID

    @contextmanager
    def reference_server() -> Iterator[tuple[str, str]]:
        with StreamingBridge(reference, StreamingServerModel(cluster_id=CLUSTER_ID)):
            yield reference.url, CLUSTER_ID

    observed = _client_observations(client, cases, real_server)
    expected = _client_observations(client, cases, reference_server)
    rows = []
    for case in cases:
        case_id = client_case_id(client.library.name, case)
        ref = CaseRef(case_id, case.level, case.source, case.data["description"], KIND)
        rows.append(record(ctx, writer, target, ref, observed[case_id], expected.get(case_id)))
    return rows


@dataclass(frozen=True)
class StanClientSuite(OfCases):
    """The streaming.client ``cases`` taken by ``client`` (a streaming client library) against
    one real streaming server, compared with the reference bridged onto a nats-server of target
    ``reference``."""

    spec: str
    reference: str
    client: StreamingClient
    cases: list[vectors.Case]

    role = "server"

    @property
    def label(self) -> str:
        return f"streaming server {self.spec} with {self.client.library.name}"

    def planned(self) -> list[PlannedRow]:
        name = self.client.library.name
        return [PlannedRow(self.spec, client_case_id(name, c), c.id, c.level, KIND)
                for c in self.cases]  # fmt: skip

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        if not self.cases:
            return
        try:
            with open_target(self.reference) as reference:
                target = open_stan(self.spec)
                server = reference.server({})
                rows = run_client_cases(target, server, self.client, self.cases, writer, ctx)
        except TargetError as exc:  # a server of either kind that will not start or launch
            raise SuiteError(str(exc)) from exc
        # No case runs again: each is compared with the reference once.
        for row in rows:
            yield judged(row, False, baseline, on_row)
