"""Wall time of a whole client run per library, warm: `nats-conformance run --client SPEC
--no-report` (client-role vectors, scripted fake-server checks, the library's interop pair).

Each driver is built first (not timed; the build's own time is printed beside it), then each
library runs in a fresh process, one after another. Prints seconds and pass / fail / skip rows per
library. Goal: at most 60 s per library on 2 cores. The machine is shared: compare runs made
back to back, and repeat (--rounds) before trusting a difference.

    python bench/client_run_bench.py [--client SPEC ...] [--rounds R]

SPEC as for `run --client`, 'client:nats-py==*' included; default: every client library whose
toolchain is here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from harness import clients

GOAL_SECONDS = 60.0
RUN = "from harness.cli import main; raise SystemExit(main())"


def build(spec: str) -> float | None:
    """Build the driver of ``spec`` (cached); the seconds its build took, when it was built."""
    parsed = clients.parse_client_spec(spec)
    return clients.build_seconds(clients.build_driver(parsed.library, parsed.version_pin))


def run_once(spec: str) -> tuple[float, Counter[str], int]:
    """One client run in a fresh process: its wall time, rows per outcome and exit status."""
    with tempfile.TemporaryDirectory(prefix="nats-conformance-bench-") as tmp:
        results = Path(tmp) / "r.jsonl"
        cmd = [sys.executable, "-c", RUN, "run", "--client", spec, "--no-report"]
        start = time.perf_counter()
        done = subprocess.run(
            [*cmd, "--results", str(results)], cwd=tmp, capture_output=True, check=False
        )
        elapsed = time.perf_counter() - start
        lines = results.read_text().splitlines() if results.exists() else []
    return elapsed, Counter(json.loads(line)["outcome"] for line in lines), done.returncode


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--client", action="append", metavar="SPEC")
    args.add_argument("--rounds", type=int, default=1)
    opts = args.parse_args()
    default = [s for s, _ in clients.available_clients() if s.startswith("client:")]
    specs = clients.expand_series(opts.client or default)
    built = {spec: build(spec) for spec in specs}
    print(f"{'client':28} {'build s':>8} {'run s':>7}  pass / fail / skip (error)  status")
    for spec in specs:
        times = []
        for _ in range(opts.rounds):
            seconds, outcomes, status = run_once(spec)
            times.append(seconds)
        run = statistics.median(times)
        counts = " / ".join(str(outcomes[o]) for o in ("pass", "fail", "skip"))
        counts += f" ({outcomes['error']})"
        build_s = f"{built[spec]:.0f}" if built[spec] is not None else "?"
        goal = "" if run <= GOAL_SECONDS else f"  over the {GOAL_SECONDS:g} s goal"
        print(f"{spec:28} {build_s:>8} {run:7.1f}  {counts:26} {status}{goal}", flush=True)


if __name__ == "__main__":
    main()
