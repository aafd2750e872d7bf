"""Wall time of a whole client run per library, warm: `nats-conformance run --client SPEC
--no-report` (client-role vectors, scripted fake-server checks, the library's interop pair).

Each driver is built first (not timed; the build's own time is printed beside it), then each
library runs in a fresh process, one after another. Prints seconds and pass / fail / skip rows per
library. Goal: at most 60 s per library on 2 cores. The machine is shared: compare runs made
back to back, and repeat (--rounds) before trusting a difference.

    python bench/client_run_bench.py [--client SPEC ...] [--rounds R] [--code DIR] [--keep DIR]

SPEC as for `run --client`, 'client:nats-py==*' included; default: every client library whose
toolchain is here. --code DIR runs the suite of another checkout (say `git archive main | tar -x
-C DIR`), for a before/after comparison on the same drivers; --keep DIR keeps each run's rows
as DIR/<spec>.jsonl (to compare outcomes by case_id).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from nats_conformance.harness.clients import client_specs, driver_builds, registry
from nats_conformance.harness.runtime import builds

GOAL_SECONDS = 60.0
RUN = "from nats_conformance.harness.cli import main; raise SystemExit(main())"


def build(spec: str) -> float | None:
    """Build the driver of ``spec`` (cached); the seconds its build took, when it was built."""
    parsed = client_specs.parse_client_spec(spec)
    return builds.build_seconds(driver_builds.build_driver(parsed.library, parsed.version_pin))


def run_once(spec: str, code: Path | None, keep: Path | None) -> tuple[float, Counter[str], int]:
    """One client run in a fresh process (of the suite in ``code``, default this one): its wall
    time, rows per outcome and exit status; its rows are copied to ``keep``."""
    env = dict(os.environ, PYTHONPATH=str(code)) if code else None
    with tempfile.TemporaryDirectory(prefix="nats-conformance-bench-") as tmp:
        results = Path(tmp) / "r.jsonl"
        cmd = [sys.executable, "-c", RUN, "run", "--client", spec, "--no-report"]
        start = time.perf_counter()
        done = subprocess.run(
            [*cmd, "--results", str(results)], cwd=tmp, env=env, capture_output=True, check=False
        )
        elapsed = time.perf_counter() - start
        text = results.read_text() if results.exists() else ""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{spec.replace(':', '_')}.jsonl").write_text(text)
    lines = text.splitlines()
    return elapsed, Counter(json.loads(line)["outcome"] for line in lines), done.returncode


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--client", action="append", metavar="SPEC")
    args.add_argument("--rounds", type=int, default=1)
    args.add_argument("--code", type=Path, metavar="DIR", help="the checkout whose suite runs")
    args.add_argument("--keep", type=Path, metavar="DIR", help="keep each run's rows here")
    opts = args.parse_args()
    default = [s for s, _ in registry.available_clients() if s.startswith("client:")]
    specs = client_specs.expand_series(opts.client or default)
    built = {spec: build(spec) for spec in specs}
    print(f"{'client':28} {'build s':>8} {'run s':>7}  pass / fail / skip (error)  status")
    for spec in specs:
        times = []
        for _ in range(opts.rounds):
            seconds, outcomes, status = run_once(spec, opts.code, opts.keep)
            times.append(seconds)
        run = statistics.median(times)
        counts = " / ".join(str(outcomes[o]) for o in ("pass", "fail", "skip"))
        counts += f" ({outcomes['error']})"
        build_s = f"{built[spec]:.0f}" if built[spec] is not None else "?"
        goal = "" if run <= GOAL_SECONDS else f"  over the {GOAL_SECONDS:g} s goal"
        print(f"{spec:28} {build_s:>8} {run:7.1f}  {counts:26} {status}{goal}", flush=True)


if __name__ == "__main__":
    main()
