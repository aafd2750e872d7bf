"""A section of the report: the one interface every part of it implements (``reports/sections/``).

A section is one module: what it computes (``compute``, from what the analysis gives every
section: ``Given``, never the whole history), its plain data (kept in ``Report.parts`` under its
name), its HTML on index.html (and its link in the page's header) and on the implementation
pages, its place in summary.json, summary.md, implementations.json and ``impl/<slug>.json``, and
files of its own. Each hook has a default that contributes nothing, so a section overrides only
what it shows. Its CSS, if it has any, is a block at the end of the packaged stylesheet
``reports/report.css`` headed ``/* section: <module>.py */``. ``reports.sections`` lists the
sections in the order each output shows them; the modules that write the outputs (``html``,
``outputs``, ``pages``) iterate those lists and name no section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NamedTuple, TypeVar, cast

from ..harness.gate import Baseline
from ..harness.results import LATER_KEYS
from .model import Report, Run

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .ingest import RowProblem

D = TypeVar("D")


class LatestCase(NamedTuple):
    """A row of a target's latest run, as the analysis collects them (one per case)."""

    target: str
    case_id: str
    group: str
    level: str
    outcome: str
    category: str
    observed: str | None  # what was observed, for an info case only (None for the others)
    transport: str = LATER_KEYS["transport"]  # what carried it (reports.sections.transport_support)
    own: bool = True  # the case's own row (over tcp): the one the matrix's scores count


@dataclass(frozen=True)
class Given:
    """What the analysis gives every section to compute from: never the whole history."""

    runs: Sequence[Run]  # each target's latest run
    cases: Sequence[LatestCase]  # the rows of those runs, collected
    latest: DataFrame  # the same rows in Spark, every column of the store (and its session)
    unstable: DataFrame  # per target, version and case, where its runs disagree (analysis)
    baseline: Baseline  # the baseline the report judges the latest runs by, as the gate does
    problems: Sequence[RowProblem]  # every invalid row of the results read


@dataclass(frozen=True)
class Index:
    """What a section's part of index.html may draw on besides its own data."""

    report: Report
    links: Mapping[str, str]  # target -> the address of its place on its implementation's page
    failing: Sequence[Mapping[str, Any]]  # a row per (implementation, failing case), must first
    filters: Mapping[str, Mapping[str, str]]  # filter -> value -> the option value rows carry


class Section(Generic[D]):
    """One part of the report; ``name`` keys its data in ``Report.parts``."""

    name: ClassVar[str]

    def compute(self, given: Given) -> D:
        """Its data, from what the analysis gives (None for a section drawn from the core alone:
        each target's latest run, the matrix cells, the version series)."""
        raise NotImplementedError

    def of(self, report: Report) -> D:
        """Its data in ``report`` (``compute`` put it there, or a test did)."""
        return cast(D, report.parts[self.name])

    def nav(self, report: Report) -> tuple[str, str] | None:
        """Its link in index.html's header: (address, text), to its place on the page or to a
        page of its own; None for none."""
        return None

    def index(self, page: Index) -> str:
        """Its HTML on index.html ("" for none)."""
        return ""

    def summary(self, report: Report) -> dict[str, Any]:
        """Its keys in summary.json."""
        return {}

    def markdown(self, report: Report) -> list[str]:
        """Its lines in summary.md, each block starting with an empty line."""
        return []

    def implementation(self, report: Report, implementation: str) -> dict[str, Any]:
        """Its keys in the data of one implementation: ``impl/<slug>.json`` and that
        implementation's entry of implementations.json (described by
        schemas/implementation.schema.json and schemas/implementations.schema.json)."""
        return {}

    def implementation_html(self, page: Mapping[str, Any]) -> str:
        """Its HTML on an implementation's page, from that page's data ("" for none)."""
        return ""

    def files(self, report: Report) -> dict[str, str]:
        """Files of its own: path in the report -> content."""
        return {}
