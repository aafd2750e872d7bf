"""``nats-conformance run``: check servers and clients (the suites ``harness.plan`` makes of the
targets), judge each row against the baseline as it comes, write the CI outputs asked for and
the report, and exit with what the gate says."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...conformance import vectors
from .. import ci_outputs, plan
from ..clients import client_specs, registry, streaming_clients
from ..clients.client_targets import check_driver_commands
from ..console import Progress, summary, verdict_lines
from ..gate import (
    SHIPPED_BASELINE,
    Baseline,
    BaselineError,
    Verdict,
    cited_statement,
    gate_fails,
    update_lines,
)
from ..results import ResultRow, ResultsWriter, RunContext, read_rows
from ..runtime import builds
from ..selection import (
    Selection,
    empty_selection_error,
    of_case,
    select_cases,
)
from ..servers import runner
from ..servers import stan as stan_server
from ..servers.binaries import DEBIAN_SERVER
from ..servers.kinds import parse_spec
from ..servers.server_targets import available_targets
from ..servers.specs import TargetError
from ..suites import SuiteError
from . import DEFAULT_SERVER
from .report import write_report


def main(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.vectors or []] or [vectors.BUNDLED_DIR]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"nats-conformance: no such file or directory: {missing[0]}", file=sys.stderr)
        return 2
    if args.results and args.results.exists() and not args.append and not args.dry_run:
        print(f"nats-conformance: {args.results} exists: give another --results FILE, or "
              "--append to add this run's rows to it", file=sys.stderr)  # fmt: skip
        return 2
    try:
        registry.extend_registry(args.drivers_dir)
        if not args.server and not args.client:  # the main job: every default target available
            args.server, args.client = default_targets()
        baseline = _baseline(args.baseline, update=args.baseline_update)
        every = [parse_spec(spec) for spec in args.server or []]
        args.client = client_specs.expand_series(args.client or [])
        for spec in args.client:  # every client spec, before anything runs
            if not plan.is_streaming_client(spec):
                client_specs.parse_client_spec(spec)
        check_driver_commands(args.client)
    except (BaselineError, TargetError, registry.ClientError) as exc:
        print(f"nats-conformance: {exc}", file=sys.stderr)
        return 2
    has_stan = any(spec.kind == "stan" for spec in every)
    has_servers = any(spec.kind != "stan" for spec in every)
    cases, loaded = runner.load_server_cases(paths)
    for problem in loaded.problems:
        print(f"nats-conformance: skipping invalid vector: {problem}", file=sys.stderr)
    for note in loaded.notes:
        print(f"nats-conformance: note: {note}", file=sys.stderr)
    selection = selection_of(args)
    cases, picked = select_cases(selection, cases), select_cases(selection, loaded.cases)
    streaming = [case for case in picked if case.kind in plan.STAN_KINDS]
    runs = bool(has_servers and cases) or bool(has_stan and streaming)
    runs = runs or bool(args.client and [c for c in picked if "client" in c.roles])
    if selection.active and not runs:
        candidates = list(map(of_case, loaded.cases))
        why = empty_selection_error(selection, candidates)
        print(f"nats-conformance: empty selection: {why}", file=sys.stderr)
        return 2
    targets = plan.Targets(
        args.server or [], args.client, bundled=not args.vectors, transports=args.transport
    )
    suites = plan.suites(targets, cases, picked)
    planned = plan.planned(suites)
    if args.dry_run:
        for row in planned:
            print(row.line())
        print(f"{len(planned)} rows in {len(suites)} suites")
        return _invalid_vectors(loaded.problems)
    ctx = RunContext.for_vectors(paths)
    results_path = args.results or Path("out") / f"results-{ctx.run_id}.jsonl"
    progress = Progress(len(planned))

    def on_row(row: ResultRow, verdict: Verdict) -> None:
        progress.step(row.target, row.case_id, verdict is Verdict.UNEXPECTED)

    rows: list[tuple[ResultRow, Verdict]] = []
    with ResultsWriter(results_path) as writer:
        for suite in suites:
            try:
                with progress.timed(suite.label):
                    rows += suite.run(ctx, writer, baseline, args.rerun_failures, on_row)
            except SuiteError as exc:
                progress.finish()
                print(f"nats-conformance: {exc}", file=sys.stderr)
                return 2
    progress.finish()
    if not args.baseline_update:  # an update's failures are what it writes: it says that below
        print(summary(rows, full=args.full_summary))
    write_ci_outputs(args, rows, {case.id: case.file for case in picked}, paths, ctx, baseline)
    if args.baseline_update:
        updated = baseline.updated(read_rows(results_path), cited_statement(loaded.cases))
        updated.save(args.baseline)
        print(f"baseline written: {args.baseline} (from {results_path})")
        print("\n".join(update_lines(baseline, updated)))
        return _invalid_vectors(loaded.problems)
    print(f"results: {results_path}")
    code = max(
        1 if gate_fails(verdict for _, verdict in rows) else 0, _invalid_vectors(loaded.problems)
    )
    if not args.no_report:
        written = write_report(
            [results_path], args.report, args.history, args.spark_master,
            baseline=args.baseline or SHIPPED_BASELINE, full=args.full, progress=progress,
        )  # fmt: skip
        code = max(code, written)
    print(verdict_lines(rows, code, args.rerun_failures))  # last: what the exit code says
    return code


def selection_of(args: argparse.Namespace) -> Selection:
    return Selection(*(tuple(v or ()) for v in (args.case, args.group, args.level, args.role)))


def write_ci_outputs(
    args: argparse.Namespace,
    rows: list,
    files: dict[str, str],
    paths: list[Path],
    ctx: RunContext,
    baseline: Baseline,
) -> None:
    """The JUnit, SARIF and Markdown files asked for, each from the rows, their verdicts and the
    baseline's entries, without this machine's paths."""
    scrub = ci_outputs.local_paths(paths)
    uris = ci_outputs.vector_uris(files, paths)
    outputs = {
        args.junit: lambda: ci_outputs.junit_xml(rows, baseline, scrub),
        args.sarif: lambda: ci_outputs.sarif_json(rows, uris, ctx.suite_version, baseline, scrub),
        args.summary_md: lambda: ci_outputs.summary_md(rows, baseline, scrub),
    }
    for path, render in outputs.items():
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(), encoding="utf-8")
            print(f"wrote {path}")


def _baseline(path: Path | None, *, update: bool) -> Baseline:
    """The baseline a run is judged by: ``path``, else the shipped one. An update writes only
    where the user said (never into the installed package), and may create the file."""
    if update and path is None:
        raise BaselineError("--baseline-update needs --baseline FILE (the file to write)")
    return Baseline.load(path or SHIPPED_BASELINE, missing_ok=update)


def _invalid_vectors(problems: list[vectors.Problem]) -> int:
    """2 when vector files had problems: the valid cases ran, but the user asked for more than
    ran, so the run must not pass as if everything had (the problems were listed at its start)."""
    if not problems:
        return 0
    files = sorted({problem.file for problem in problems})
    print(
        f"nats-conformance: {len(problems)} vector problems in {', '.join(files)}; "
        "those cases did not run (each is listed above)",
        file=sys.stderr,
    )
    return 2


def default_targets() -> tuple[list[str], list[str]]:
    """(servers, clients) the main job runs: the installed server, Debian's and the same binary in a
    container when there is an engine, the real streaming server when Go is here; every client
    library whose toolchain is here (not the container variants) and the streaming client when
    npm is here."""
    servers = [
        spec
        for spec, _ in available_targets()
        if spec in (DEFAULT_SERVER, f"exec:{DEBIAN_SERVER}", f"container:{DEFAULT_SERVER}")
    ]
    if problem := builds.go_missing():
        print(f"nats-conformance: {stan_server.DEFAULT_SPEC} skipped: {problem}", file=sys.stderr)
    else:
        servers.append(stan_server.DEFAULT_SPEC)
    libraries = [spec for spec, _ in registry.available_clients() if spec.startswith("client:")]
    return servers, libraries + streaming_clients.available()
