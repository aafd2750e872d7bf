"""``nats-conformance smoke``: one client driver checked in seconds, through a real nats-server."""

from __future__ import annotations

import argparse
import base64
import time

from ..clients import driver, registry
from ..clients.client_targets import open_client
from ..servers.kinds import open_target
from ..servers.specs import TargetError
from . import DEFAULT_SERVER

SMOKE_TIMEOUT = 10.0  # seconds each smoke step may take (a driver's first start builds it)


def main(args: argparse.Namespace) -> int:
    """Check one driver in seconds: hello against the schema, then one message through a real
    nats-server. Exit 0 when every step worked, 1 otherwise."""
    started = time.monotonic()
    steps: list[tuple[str, bool, str]] = []

    def step(name: str, reply: driver.DriverReply) -> bool:
        detail = "" if reply.ok else f"{reply.error_type}: {reply.error_message}"
        steps.append((name, reply.ok, detail))
        return reply.ok

    try:
        registry.extend_registry(args.drivers_dir)
        with open_client(args.client) as client:
            process = client.driver()  # builds on first use; the harness checks hello's schema
            hello = client.hello or {}
            problem = driver.schema_problem(hello, "commands/hello/result")
            steps.append(("hello", problem is None, problem or ""))
            library, version = hello.get("library"), hello.get("version")
            print(f"driver: {library} {version} ({hello.get('language')})")
            print(f"protocol: {hello.get('protocol')}")
            if client.capabilities is None:
                print("capabilities: not declared (a protocol-1 driver)")
            else:
                print(f"capabilities: {', '.join(sorted(client.capabilities)) or '(none)'}")
            with open_target(DEFAULT_SERVER) as target:
                server = target.server({})
                payload = b"smoke"
                subject = "nats-conformance.smoke"
                if (
                    step("connect", process.call("connect", url=server.url, options={}))
                    and step(
                        "subscribe", sub := process.call("subscribe", subject=subject, queue=None)
                    )
                    and step(
                        "publish",
                        process.call(
                            "publish",
                            subject=subject,
                            reply=None,
                            headers=None,
                            payload_b64=base64.b64encode(payload).decode(),
                        ),
                    )
                    and step("flush", process.call("flush", timeout_ms=int(SMOKE_TIMEOUT * 1000)))
                ):
                    events = process.events(timeout=SMOKE_TIMEOUT, count=1)
                    got = [e for e in events if e.get("event") == "message"]
                    right = bool(got) and (
                        got[0]["sub"] == sub.result["sub"]
                        and base64.b64decode(got[0]["payload_b64"]) == payload
                    )
                    steps.append(("receive", right, "" if right else f"events: {events}"))
                    step("close", process.call("close", drain=False, timeout=SMOKE_TIMEOUT))
    except (registry.ClientError, driver.DriverError, TargetError) as exc:
        steps.append(("driver", False, str(exc)))
    for name, worked, detail in steps:
        print(f"{'ok  ' if worked else 'FAIL'} {name}{': ' + detail if detail else ''}")
    passed = bool(steps) and all(worked for _, worked, _ in steps) and len(steps) >= 7
    print(f"smoke {'passed' if passed else 'FAILED'} in {time.monotonic() - started:.1f}s")
    return 0 if passed else 1
