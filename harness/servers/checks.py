"""One vector case against one server target: skip, error, or the verdict of its server path.

A case reaches a server through its wire script, or, for ``name.validate``, through the JetStream
API (``harness.servers.jetstream_names``). A server process that exits during a case (a crash)
fails the case in category ``robustness``, whatever the case's level: the documents need not
say that a server must not crash.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from ...conformance import wire_script
from ...conformance.frame_layouts import Layout
from ...conformance.transports import DEFAULT_TRANSPORT
from ...conformance.vectors import Case
from ...conformance.verdicts import ROBUSTNESS
from . import jetstream_names
from .specs import TargetError, WireTarget
from .wire import ServerRun, run_wire_script

# Seconds a server whose listener refuses connections after a case has to show its exit.
CRASH_GRACE = 2.0


def check_case(
    case: Case,
    target: WireTarget,
    *,
    transport: str = DEFAULT_TRANSPORT,
    timeout: float = 1.0,
    layout: Layout | None = None,
) -> ServerRun:
    """Run ``case`` on a server of ``target`` over ``transport`` (each wait bounded by
    ``timeout``; the wire script's bytes in the frames of ``layout``, when given); a transport
    the target lacks is a skip with its reason, and only wire scripts travel over transports
    other than plain TCP."""
    names = case.kind == jetstream_names.KIND
    wire = case.data.get("wire")
    if transport != DEFAULT_TRANSPORT and wire is None:
        return ServerRun.of("skip", f"no wire script to run over {transport}", 0.0)
    if names:
        reason = jetstream_names.not_asked(case)
        if reason is not None:
            return ServerRun.of("skip", reason, 0.0)
        config = jetstream_names.SERVER_CONFIG
    elif wire is None:
        return ServerRun.of("skip", "no wire script", 0.0)
    else:
        config = wire.get("config", {})
        pinned = wire_script.transport_of(wire)
        if pinned is not None and pinned != transport:
            return ServerRun.of("skip", f"a case about {pinned} runs over {pinned} only", 0.0)
    lacking = target.lacks(transport)
    if lacking is not None:
        return ServerRun.of("skip", lacking, 0.0)
    if config and not target.configurable:
        keys = ", ".join(sorted(config))
        return ServerRun.of(
            "skip", f"needs server configuration {keys} that target {target.name} cannot set", 0.0
        )
    started = time.monotonic()
    try:
        server = target.server(config, transport)
    except TargetError as exc:
        return ServerRun.of("error", str(exc), (time.monotonic() - started) * 1000)
    if names:
        result = jetstream_names.check(case, server, timeout=max(timeout, jetstream_names.API_WAIT))
    else:
        result = run_wire_script(wire, server, timeout=timeout, layout=layout)
    return _crashed(result, target, config, transport)


def _crashed(
    result: ServerRun, target: WireTarget, config: dict[str, Any], transport: str
) -> ServerRun:
    """``result``, or a robustness failure when the target's server is gone after the case (a
    case that did not pass may have seen the crash a moment before the exit shows)."""
    found = result.found
    gone = target.gone(config, transport, within=CRASH_GRACE if found.outcome != "pass" else 0.0)
    if gone is None:
        return result
    seen = f"; the case found: {found.message}" if found.message else ""
    crash = dataclasses.replace(
        found,
        outcome="fail",
        message=f"the server process {gone} during the case{seen}",
        category=ROBUSTNESS,
    )
    return dataclasses.replace(result, found=crash)
