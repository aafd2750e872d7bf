"""One vector case against one server target: skip, error, or the wire script's verdict."""

from __future__ import annotations

import time

from conformance.vectors import Case
from harness.targets import ServerTarget, TargetError
from harness.wire import CaseResult, run_wire_script


def check_case(case: Case, target: ServerTarget, *, timeout: float = 1.0) -> CaseResult:
    """Run ``case``'s wire script on a server of ``target`` (each wait bounded by ``timeout``)."""
    wire = case.data.get("wire")
    if wire is None:
        return CaseResult("skip", "no wire script", 0.0)
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
    return run_wire_script(wire, server, timeout=timeout)
