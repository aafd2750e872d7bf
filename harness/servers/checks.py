"""One vector case against one server target: skip, error, or the verdict of its server path.

A case reaches a server through its wire script, or, for ``name.validate``, through the JetStream
API (``harness.jetstream_names``).
"""

from __future__ import annotations

import time

from nats_conformance.conformance.vectors import Case
from nats_conformance.harness.servers import jetstream_names
from nats_conformance.harness.servers.specs import TargetError
from nats_conformance.harness.servers.targets import ServerTarget
from nats_conformance.harness.servers.wire import CaseResult, run_wire_script


def check_case(case: Case, target: ServerTarget, *, timeout: float = 1.0) -> CaseResult:
    """Run ``case`` on a server of ``target`` (each wait bounded by ``timeout``)."""
    names = case.kind == jetstream_names.KIND
    wire = case.data.get("wire")
    if names:
        reason = jetstream_names.not_asked(case)
        if reason is not None:
            return CaseResult("skip", reason, 0.0)
        config = jetstream_names.SERVER_CONFIG
    elif wire is None:
        return CaseResult("skip", "no wire script", 0.0)
    else:
        config = wire.get("config", {})
    if config and not target.configurable:
        keys = ", ".join(sorted(config))
        return CaseResult(
            "skip", f"needs server configuration {keys} that target {target.name} cannot set", 0.0
        )
    started = time.monotonic()
    try:
        server = target.server(config)
    except TargetError as exc:
        return CaseResult("error", str(exc), (time.monotonic() - started) * 1000)
    if names:
        return jetstream_names.check(case, server, timeout=max(timeout, jetstream_names.API_WAIT))
    return run_wire_script(wire, server, timeout=timeout)
