"""Stand-in drivers for tests: small Python programs speaking nats-conformance-driver/2 whose
``answer(request)`` a test writes, run as ``driver:COMMAND`` client targets with a plan file. A
stand-in is never a library: it shows what the harness makes of what a driver does."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nats_conformance.harness.clients.client_targets import ClientTarget, open_client

# Before the test's answer(request): one writer at a time on stdout (replies and events).
OUT = r"""
lock = threading.Lock()
conn = {}


def out(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()
"""

# After it: each request answered in turn; LookupError(type) is the driver's error of that type.
SERVE = r"""

for line in sys.stdin:
    request = json.loads(line)
    try:
        out({"id": request["id"], "ok": True, "result": answer(request)})
    except LookupError as exc:
        out({"id": request["id"], "ok": False,
             "error": {"type": exc.args[0], "message": f"the fake says {exc.args[0]}"}})
"""


@contextmanager
def stand_ins(directory: Path, program: str) -> Iterator[Callable[[Any], ClientTarget]]:
    """``make(plan)``: a client target whose driver is ``program`` reading ``plan`` (its first
    argument, a JSON file); every target made is closed on leaving."""
    script = directory / "stand_in_driver.py"
    script.write_text(program)
    opened: list[ClientTarget] = []

    def make(plan: Any) -> ClientTarget:
        path = directory / f"plan-{len(opened)}.json"
        path.write_text(json.dumps(plan))
        client = open_client(f"driver:{sys.executable} {script} {path}")
        opened.append(client)
        return client

    try:
        yield make
    finally:
        for client in opened:
            client.close()
