"""What a report says, as plain data: computed by ``analysis``, written by ``outputs``/``html``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..conformance.transports import LAYOUT
from ..conformance.verdicts import CONFORMANCE
from ..harness.gate import FAILING
from ..harness.results import INTEROP_KIND, LATER_KEYS

TCP = LATER_KEYS["transport"]  # what carried a row that names no transport


def row_case(case_id: str, transport: str) -> str:
    """The case a row is of: its id without the ``@<transport>`` a row over another transport
    than tcp ends in, and the ``~<layout>`` before it (``transport_support.case_of`` is the same
    rule in Spark)."""
    suffix = "@" + transport
    if transport == TCP or not case_id.endswith(suffix):
        return case_id
    return case_id[: -len(suffix)].partition(LAYOUT)[0]


def transport_order(transport: str) -> tuple[bool, str]:
    """tcp first, then the others by name."""
    return (transport != TCP, transport)


@dataclass(frozen=True)
class Counts:
    passed: int = 0
    failed: int = 0
    errored: int = 0
    skipped: int = 0

    @property
    def judged(self) -> int:
        """Cases that ran to a verdict (skips are not judged)."""
        return self.passed + self.failed + self.errored

    @property
    def score(self) -> float | None:
        """The share of judged cases that passed; None when nothing was judged."""
        return self.passed / self.judged if self.judged else None

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.passed + other.passed,
            self.failed + other.failed,
            self.errored + other.errored,
            self.skipped + other.skipped,
        )

    def to_json(self) -> dict[str, object]:
        score = self.score
        return {
            "pass": self.passed,
            "fail": self.failed,
            "error": self.errored,
            "skip": self.skipped,
            "score": None if score is None else round(score, 4),
        }


@dataclass(frozen=True)
class Run:
    target: str
    run_id: str
    started: str  # ISO 8601, UTC
    version: str
    kind: str
    rows: int


@dataclass(frozen=True)
class Cell:
    """One (target, rule group, level) of the compliance matrix, from the target's latest run."""

    target: str
    group: str
    level: str
    counts: Counts


@dataclass(frozen=True)
class Failure:
    case_id: str
    group: str
    level: str
    outcome: str
    message: str
    category: str = CONFORMANCE  # robustness: a crash or a hang, reported apart from scores
    transport: str = TCP

    @property
    def case(self) -> str:
        """The case it is a row of (``case_id`` is the row's id: ``<case>@ws`` over ws)."""
        return row_case(self.case_id, self.transport)


@dataclass(frozen=True)
class Change:
    """A case whose verdict changed between a target's previous run and its latest."""

    case_id: str
    group: str
    level: str
    before: str
    after: str
    message: str

    @property
    def regression(self) -> bool:
        return self.after in FAILING


@dataclass(frozen=True)
class Point:
    run_id: str
    time: str
    version: str
    outcome: str


@dataclass(frozen=True)
class FirstFailure:
    """Across one implementation's versions (in version order), where a case starts failing."""

    implementation: str
    case_id: str
    group: str
    level: str
    first_failing: str
    last_passing: str | None  # the newest version before first_failing where the case passed
    newest_version: str
    newest_outcome: str
    versions: int  # how many versions of the series ran the case


@dataclass(frozen=True)
class VersionChange:
    """Across one implementation's versions (in version order), a case whose outcome or
    observation (what the implementation did) differs from the version before: either way, and
    at every level (info included)."""

    implementation: str
    case_id: str
    group: str
    level: str
    before_version: str
    before_outcome: str
    after_version: str
    after_outcome: str
    before_observed: str = ""
    after_observed: str = ""

    @property
    def changed(self) -> tuple[str, ...]:
        """What changed: ``outcome``, ``observation``, or both."""
        return tuple(
            name
            for name, before, after in (
                ("outcome", self.before_outcome, self.after_outcome),
                ("observation", self.before_observed, self.after_observed),
            )
            if before != after
        )


@dataclass(frozen=True)
class Varied:
    """At one version, what the runs of the target judging it disagree on."""

    version: str
    varied: tuple[str, ...]  # outcome, observation or both


@dataclass(frozen=True)
class FlakyChange:
    """A difference between consecutive versions that the runs do not confirm: at one of the two
    versions, or both (``unstable``), the runs of the target judging it disagree on the case.
    Reported with the flaky cases, never as a version change."""

    change: VersionChange
    unstable: tuple[Varied, ...]


@dataclass(frozen=True)
class StripCase:
    """One row of a version strip: the case's outcome at each version (None: not run there)."""

    case_id: str
    group: str
    level: str
    outcomes: tuple[str | None, ...]
    # Versions whose difference from the version before the runs do not confirm (flaky).
    unconfirmed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Strip:
    """An implementation's cases × versions (``reports.strips``): the cases that fail somewhere
    or change, and how many cases keep one passing or skipped outcome at every version."""

    implementation: str
    versions: tuple[str, ...]  # in version order
    targets: tuple[str, ...]  # the target whose latest run judges each version
    cases: list[StripCase]
    stable: dict[str, int]  # outcome -> cases with that outcome at every version


@dataclass
class TargetReport:
    run: Run
    previous: Run | None
    implementation: str
    runs: int  # runs of this target in the history
    totals: Counts  # conformance rows only: robustness failures are counted apart
    must: Counts  # conformance rows only
    failures: list[Failure]  # failing cases of the latest run, robustness then must first (capped)
    failures_total: int  # conformance and robustness
    changes: list[Change]  # against the previous run (capped)
    regressions_total: int
    fixes_total: int
    history: dict[str, list[Point]] = field(default_factory=dict)  # case id -> newest first
    robustness: int = 0  # failing robustness rows of the latest run (a crash or a hang)

    @property
    def interop(self) -> bool:
        """A client pair of the interop matrix, not a server or a client on its own."""
        return self.run.kind == INTEROP_KIND


@dataclass
class Report:
    generated: str
    targets: list[TargetReport]
    cells: list[Cell]
    groups: list[str]
    first_failures: list[FirstFailure]
    version_changes: list[VersionChange]
    runs_total: int
    rows_total: int
    rows_added: int = 0
    details: dict[tuple[str, str, str], dict[str, object]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per pipeline stage
    strips: list[Strip] = field(default_factory=list)  # per implementation (reports.strips)
    # (target, case id) -> the URL of the implementation's bug report its baseline entry names.
    upstream: dict[tuple[str, str], str] = field(default_factory=dict)
    # Differences between versions at a version whose runs disagree: flaky, not version changes.
    flaky_changes: list[FlakyChange] = field(default_factory=list)
    # Each section's data by its name (reports.sections: Section.compute, read by Section.of).
    parts: dict[str, object] = field(default_factory=dict)
