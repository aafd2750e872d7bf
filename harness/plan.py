"""The suites of a run, from the targets it names: the one list the command and the pytest plugin
iterate (``harness.suites``), in the order they run: each server target, each real streaming
server, each client library, the interop matrix across the libraries, each NATS Streaming client
(and with the bundled vectors the PyPI streaming client's row)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ..conformance import streaming_client, streaming_server_session
from ..conformance.transports import TRANSPORTS
from ..conformance.vectors import Case
from .clients import interop_cases, streaming_clients
from .clients.interop_matrix import DEFAULT_SERVER, InteropSuite
from .clients.library import LibrarySuite
from .clients.stan_client_checks import StanClientSuite
from .clients.streaming_bridge import PythonClientSuite
from .clients.streaming_clients import StreamingClientSuite
from .servers.kinds import parse_spec
from .servers.runner import ServerSuite
from .servers.streaming_checks import StanServerSuite
from .suites import PlannedRow, Suite

STAN_CLIENT = "node-nats-streaming"  # the library that takes the streaming.client cases there
STAN_KINDS = (streaming_server_session.KIND, streaming_client.KIND)  # what a stan: target runs


@dataclass(frozen=True)
class Targets:
    """What a run checks: server specs, client specs, whether the vectors are the bundled
    ones (then, with streaming clients, the PyPI streaming client's row too), and the transports
    a server target's wire cases and a client library's fake-server cases run over."""

    servers: list[str]
    clients: list[str]
    bundled: bool
    transports: tuple[str, ...] = TRANSPORTS


def is_streaming_client(spec: str) -> bool:
    return streaming_clients.parse_spec(spec) is not None


def suites(targets: Targets, server_cases: list[Case], cases: list[Case]) -> list[Suite]:
    """The suites checking ``targets``: servers with ``server_cases``, clients with the
    client-role ``cases``."""
    parsed = [parse_spec(spec) for spec in targets.servers]
    plain = [spec.spec for spec in parsed if spec.kind != "stan"]
    # The real streaming server gets the streaming.server cases, and the streaming.client ones
    # through a streaming client library; every other kind the vectors.
    out: list[Suite] = [ServerSuite(spec, server_cases, targets.transports) for spec in plain]
    stan = [spec.spec for spec in parsed if spec.kind == "stan"]
    if stan:
        client = None
        if f"client:{STAN_CLIENT}" in streaming_clients.available():
            client = streaming_clients.parse_spec(f"client:{STAN_CLIENT}")
        own = [case for case in cases if case.kind == streaming_server_session.KIND]
        taken = [case for case in cases if case.kind == streaming_client.KIND]
        for spec in stan:
            out.append(StanServerSuite(spec, own))
            if client is not None:
                out.append(StanClientSuite(spec, DEFAULT_SERVER, client, taken))
    libraries = [spec for spec in targets.clients if not is_streaming_client(spec)]
    out += [LibrarySuite(spec, cases, targets.transports) for spec in libraries]
    if libraries:
        pairs_cases, problems = interop_cases.load_cases(cases)
        for problem in problems:
            print(f"nats-conformance: skipping invalid vector: {problem}", file=sys.stderr)
        if pairs_cases:
            server = plain[0] if plain else DEFAULT_SERVER  # the first server target the user named
            out.append(InteropSuite(libraries, pairs_cases, server, targets.transports))
    streaming = [spec for spec in targets.clients if is_streaming_client(spec)]
    out += [StreamingClientSuite(spec, cases, DEFAULT_SERVER) for spec in streaming]
    if streaming and targets.bundled:
        out.append(PythonClientSuite())
    return out


def planned(of: list[Suite]) -> list[PlannedRow]:
    """Every row the suites ``of`` will write, in order."""
    return [row for suite in of for row in suite.planned()]
