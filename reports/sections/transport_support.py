"""Transports: what each target's latest run found over each transport that carried its rows
(tcp, tls, tls-first, ws, wss, ws-deflate, or any other name a row gives, such as an interop
pair's ``tcp>wss``), whether the transport works there, and per implementation the first version
where each transport works, with the reason a version lacks it.

A row over another transport than tcp has the id ``<case>@<transport>``; the case's own row
(over tcp) is the one the matrix's scores count, so that transports add no weight to a score
(``own_row``). Here each transport is a dimension of its own: its counts, its must score and its
failures that can gate. A transport **works** at a version when some of its rows ran (they are
not all skipped, as a transport the target lacks is) and none of its gating rows (a must case's,
a crash's or a hang's) fails where the same case over tcp did not: a failure shared with tcp is
the implementation's, not the transport's. The page says so too (``DEFINITION``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...conformance.transports import LAYOUT
from ...conformance.verdicts import CONFORMANCE, ROBUSTNESS
from ...harness.gate import FAILING, GATING_LEVEL, Baseline
from ...harness.results import LEVELS, OUTCOMES
from .. import html
from ..formats import table_cell
from ..model import TCP, Counts, Report, transport_order
from ..section import Given, Index, Section
from ..strips import columns, version_order

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

WORKS, FAILS, LACKING = "works", "fails", "lacking"
STATE_CLASS = {WORKS: "s-full", FAILS: "s-low", LACKING: "s-none"}
DEFINITION = (
    "A transport works at a version when some of its rows ran (not all skipped, as they are "
    "when the target lacks it) and none of its gating rows (a must case, or a crash or hang) "
    "fails where the same case over tcp does not: a failure shared with tcp is the "
    "implementation's, not the transport's, and one the baseline lists as flaky is no "
    "transport's either. Elsewhere each case counts once: the scores, the "
    "version strip and the changes between versions follow it over tcp, and what fails lists "
    "it once with the transports it fails over; the gate, regressions and flaky cases list "
    "rows, a row over another transport being <case>@<transport> (<case>~<layout>@<transport> "
    "in a WebSocket frame layout)."
)


@dataclass(frozen=True)
class Carried:
    """One target's latest run over one transport."""

    target: str
    transport: str
    levels: Mapping[str, Counts]  # conformance rows per level
    rows: int
    ran: int  # rows not skipped
    robustness: int  # failing robustness rows (a crash or a hang)
    gating: int  # failing rows that can gate: a must case's, a crash's or a hang's
    # Of those, the ones whose case did not fail over tcp and that the baseline does not list as
    # flaky: the transport's failures.
    own: int
    skip_reason: str | None  # the message most of its skipped rows give (None: none skipped)

    @property
    def must(self) -> Counts:
        return self.levels.get(GATING_LEVEL, Counts())

    @property
    def totals(self) -> Counts:
        return sum(self.levels.values(), Counts())

    @property
    def state(self) -> str:
        if not self.ran:
            return LACKING
        return FAILS if self.own else WORKS

    @property
    def lacking(self) -> str | None:
        """Why the target lacks the transport (None: it does not)."""
        if self.state != LACKING:
            return None
        return self.skip_reason or "every row skipped"

    def to_json(self) -> dict[str, Any]:
        """Its figures (transports.schema.json#/$defs/figures)."""
        return {
            "state": self.state,
            "lacking": self.lacking,
            "rows": self.rows,
            "must": self.must.to_json(),
            "totals": self.totals.to_json(),
            "robustness": self.robustness,
            "gating_failures": self.gating,
            "transport_failures": self.own,
        }


def case_of() -> Column:
    """A row's case: its id without the ``@<transport>`` it ends in when carried by another
    transport than tcp, and without the ``~<layout>`` before it (``model.row_case`` in Spark)."""
    from pyspark.sql import functions as F

    transport, case_id = F.col("transport"), F.col("case_id")
    suffixed = (transport != TCP) & case_id.endswith(F.concat(F.lit("@"), transport))
    cut = F.expr("substring(case_id, 1, length(case_id) - length(transport) - 1)")
    return F.when(suffixed, F.substring_index(cut, LAYOUT, 1)).otherwise(case_id)


def own_row() -> Column:
    """Whether a row is its case's own (over tcp, or under an id without a transport): the row
    the matrix's scores count."""
    from pyspark.sql import functions as F

    return case_of() == F.col("case_id")


def _count_name(level: str, outcome: str) -> str:
    return f"n_{level}_{outcome}"


def carried(latest: DataFrame, baseline: Baseline) -> list[Carried]:
    """Per target and transport of the ``latest`` rows: the counts, and the gating failures
    that the case's row over tcp does not share and ``baseline`` does not list as flaky."""
    from pyspark.sql import functions as F

    rows = latest.withColumn("case", case_of())
    over_tcp = rows.where(F.col("transport") == TCP).select(
        "target", "case", F.col("outcome").alias("tcp_outcome")
    )
    outcome, level = F.col("outcome"), F.col("level")
    failing = outcome.isin(*FAILING)
    robust = F.col("category") == ROBUSTNESS
    gating = failing & ((level == GATING_LEVEL) | robust)
    shared = F.coalesce(F.col("tcp_outcome").isin(*FAILING), F.lit(False))
    conformance = F.col("category") == CONFORMANCE
    per_level = [
        F.count(F.when(conformance & (level == lv) & (outcome == o), 1)).alias(_count_name(lv, o))
        for lv in LEVELS
        for o in OUTCOMES
    ]
    joined = rows.join(over_tcp, ["target", "case"], "left")
    own = Counter(
        (r.target, r.transport)
        for r in joined.where(gating & ~shared)
        .select("target", "transport", "target_version", "case_id")
        .collect()
        if not _listed_flaky(baseline, r.target, r.target_version, r.case_id)
    )
    found = (
        joined.groupBy("target", "transport")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.count(F.when(outcome != "skip", 1)).alias("ran"),
            F.count(F.when(failing & robust, 1)).alias("robustness"),
            F.count(F.when(gating, 1)).alias("gating"),
            F.mode(F.when(outcome == "skip", F.col("message")), deterministic=True).alias(
                "skip_reason"
            ),
            *per_level,
        )
        .collect()
    )
    result = []
    for r in found:
        levels = {
            lv: Counts(*(r[_count_name(lv, o)] for o in OUTCOMES))
            for lv in LEVELS
            if any(r[_count_name(lv, o)] for o in OUTCOMES)
        }
        result.append(
            Carried(
                r.target,
                r.transport,
                levels,
                r.rows,
                r.ran,
                r.robustness,
                r.gating,
                own[(r.target, r.transport)],
                r.skip_reason,
            )
        )
    return sorted(result, key=lambda c: (c.target, transport_order(c.transport)))


def _listed_flaky(baseline: Baseline, target: str, version: str, case_id: str) -> bool:
    """Whether ``baseline`` lists the row as flaky (its own entry or its tcp row's): a failure
    that comes in some runs and not in others says nothing of the transport."""
    entry = baseline.entry(target, version, case_id)
    return entry is not None and entry.get("class") == "flaky"


def beyond_tcp(found: Iterable[Carried]) -> bool:
    """Whether some row went over another transport than tcp."""
    return any(c.transport != TCP for c in found)


def by_target(found: Iterable[Carried]) -> dict[str, list[Carried]]:
    """Target -> its transports, tcp first."""
    grouped: dict[str, list[Carried]] = {}
    for c in sorted(found, key=lambda c: transport_order(c.transport)):
        grouped.setdefault(c.target, []).append(c)
    return grouped


@dataclass(frozen=True)
class AtVersion:
    version: str
    target: str  # the target whose latest run judges the version (the strips' rule)
    carried: Carried | None  # None: no row of the version went over the transport


@dataclass(frozen=True)
class Series:
    """One transport across one implementation's versions, in version order."""

    transport: str
    versions: tuple[AtVersion, ...]

    @property
    def first_works(self) -> str | None:
        """The first version where it works (None: at none)."""
        return next(
            (v.version for v in self.versions if v.carried and v.carried.state == WORKS), None
        )


def series(report: Report, found: Iterable[Carried]) -> dict[str, list[Series]]:
    """Implementation -> each transport its rows went over, across its versions."""
    judging = columns([t.run for t in report.targets], version_order)
    carried_by = {(c.target, c.transport): c for c in found}
    result = {}
    for impl, versions in sorted(judging.items()):
        targets = {run.target for run in versions.values()}
        transports = sorted(
            {t for target, t in carried_by if target in targets}, key=transport_order
        )
        result[impl] = [
            Series(
                transport,
                tuple(
                    AtVersion(version, run.target, carried_by.get((run.target, transport)))
                    for version, run in versions.items()
                ),
            )
            for transport in transports
        ]
    return result


# --- HTML ----------------------------------------------------------------------------------------


def title(c: Carried) -> str:
    """A transport's figures as a tooltip."""
    lines = [
        f"{c.transport}: {c.state}" + (f" ({c.lacking})" if c.lacking else ""),
        f"must {html.fraction(c.must)}; all levels: {html.counts_title(c.totals)}",
        f"gating failures {c.gating}, of them the transport's own (not failing over tcp) {c.own}",
    ]
    if c.robustness:
        lines.append(f"robustness failures {c.robustness}")
    return "\n".join(lines)


def marks(found: Sequence[Carried]) -> str:
    """A chip per transport, coloured by its state: the matrix's and the interop grid's column."""
    if not found:
        return html.tag("span", "·", class_="muted")
    return html.tag(
        "span",
        "".join(
            html.tag(
                "span", html.esc(c.transport), class_=f"tp {STATE_CLASS[c.state]}", title=title(c)
            )
            for c in found
        ),
        class_="tps",
    )


def first_works_table(found: Mapping[str, Sequence[Series]], links: Mapping[str, str]) -> str:
    """Per implementation, the first version where each transport works, and the versions where
    it does not (lacking, and why, or failing)."""
    transports = sorted({s.transport for ss in found.values() for s in ss}, key=transport_order)
    head = html.tag("th", "implementation", class_="tname") + "".join(
        html.tag("th", html.esc(t), scope="col") for t in transports
    )
    rows = []
    for impl, ss in found.items():
        of = {s.transport: s for s in ss}
        anchor = next((links[v.target] for v in ss[0].versions if v.target in links), None)
        name = html.breakable(impl)
        cells = "".join(_first_cell(of.get(t)) for t in transports)
        label = html.tag("a", name, href=anchor.split("#")[0] + "#transports") if anchor else name
        rows.append(html.tag("tr", html.tag("th", label, scope="row") + cells))
    table = html.tag(
        "table",
        html.tag("thead", html.tag("tr", head)) + html.tag("tbody", "".join(rows)),
        id="transports",
    )
    return html.tag("div", table, class_="scroll")


def not_working(s: Series) -> list[str]:
    """The versions where the transport does not work, a line per reason: those that lack it
    (and why), those where it fails."""
    said: dict[str, list[str]] = {}
    for at in s.versions:
        if at.carried is not None and at.carried.state != WORKS:
            said.setdefault(at.carried.lacking or f"{FAILS} over it", []).append(at.version)
    return [f"{', '.join(versions)}: {why}" for why, versions in said.items()]


def newest_state(s: Series) -> str:
    """The transport's state at the newest version with a row over it."""
    newest = next((v.carried for v in reversed(s.versions) if v.carried), None)
    return newest.state if newest else LACKING


def first_text(s: Series) -> str:
    """'2.10.4', '2.9.10 (newest: fails)' or 'none'."""
    state = newest_state(s)
    if s.first_works is None:
        return "none"
    return s.first_works + ("" if state == WORKS else f" (newest: {state})")


def _first_cell(s: Series | None) -> str:
    if s is None:
        return html.tag("td", "·", class_="na", title="no row over this transport")
    state, text = newest_state(s), first_text(s)
    body = html.tag("span", html.esc(text), class_="frac") + "".join(
        html.tag("span", html.esc(line), class_="why") for line in not_working(s)
    )
    return html.tag("td", body, class_=f"cell tpc {STATE_CLASS[state]}")


# --- the section ---------------------------------------------------------------------------------


def _series_json(s: Series) -> dict[str, Any]:
    return {
        "transport": s.transport,
        "first_works": s.first_works,
        "versions": [
            {"version": v.version, "target": v.target}
            | (v.carried.to_json() if v.carried else {"state": None})
            for v in s.versions
        ],
    }


class TransportSection(Section[list[Carried]]):
    name = "transports"

    def compute(self, given: Given) -> list[Carried]:
        return carried(given.latest, given.baseline)

    def nav(self, report: Report) -> tuple[str, str] | None:
        return ("#transports-section", "Transports") if beyond_tcp(self.of(report)) else None

    def index(self, page: Index) -> str:
        """Nothing for a report whose rows all went over tcp (as every report before)."""
        found = self.of(page.report)
        if not beyond_tcp(found):
            return ""
        return html.section(
            "Transports: the first version that works",
            html.muted(
                "Per implementation and transport: the first version where the transport works "
                "(and its newest state when it no longer does), and the versions where it does "
                "not work: why they lack it, or that it fails over them. " + DEFINITION
            )
            + first_works_table(series(page.report, found), page.links),
            id="transports-section",
        )

    def summary(self, report: Report) -> dict[str, Any]:
        return {
            "transports": [
                {"target": c.target, "transport": c.transport} | c.to_json()
                for c in self.of(report)
            ]
        }

    def implementation(self, report: Report, implementation: str) -> dict[str, Any]:
        found = series(report, self.of(report)).get(implementation, [])
        return {"transports": [_series_json(s) for s in found]}

    def implementation_html(self, page: Mapping[str, Any]) -> str:
        transports = page.get("transports", [])
        if [s["transport"] for s in transports] in ([], [TCP]):
            return ""
        return html.section(
            "Transports",
            html.muted(DEFINITION) + page_grid(transports),
            id="transports",
        )

    def markdown(self, report: Report) -> list[str]:
        """A line per implementation whose rows went over another transport than tcp."""
        lines = []
        for impl, ss in series(report, self.of(report)).items():
            if [s.transport for s in ss] in ([], [TCP]):
                continue
            said = ", ".join(f"{table_cell(s.transport)} {table_cell(first_text(s))}" for s in ss)
            lines.append(f"- {table_cell(impl)}: {said}")
        return ["", "### Transports: the first version that works", "", *lines] if lines else []


def page_grid(transports: Sequence[Mapping[str, Any]]) -> str:
    """An implementation page's versions × transports, from its data."""
    head = html.tag("th", "version", class_="tname") + "".join(
        html.tag("th", html.esc(s["transport"]), scope="col") for s in transports
    )
    rows = []
    for n, version in enumerate(transports[0]["versions"]):
        rows.append(
            html.tag(
                "tr",
                html.tag("th", html.tag("strong", html.esc(version["version"])), scope="row")
                + "".join(_page_cell(s["versions"][n]) for s in transports),
            )
        )
    first = html.tag(
        "tr",
        html.tag("th", "first version that works", scope="row")
        + "".join(
            html.tag("td", html.esc(s["first_works"] or "none"), class_="cell") for s in transports
        ),
    )
    table = html.tag(
        "table",
        html.tag("thead", html.tag("tr", head)) + html.tag("tbody", "".join(rows) + first),
        class_="small transports",
    )
    return html.tag("div", table, class_="scroll")


def _page_cell(at: Mapping[str, Any]) -> str:
    state = at["state"]
    if state is None:
        return html.tag("td", "·", class_="na", title="no row over this transport")
    must, totals = at["must"], at["totals"]
    judged = must["pass"] + must["fail"] + must["error"]
    body = html.tag("span", html.esc(state), class_="frac") + html.tag(
        "span", html.esc(f"must {must['pass']}/{judged}"), class_="sub"
    )
    if at["lacking"]:
        body += html.tag("span", html.esc(at["lacking"]), class_="why")
    elif at["transport_failures"]:
        body += html.tag(
            "span", html.esc(f"{at['transport_failures']} failing where tcp does not"), class_="why"
        )
    counts = Counts(totals["pass"], totals["fail"], totals["error"], totals["skip"])
    return html.tag("td", body + html.counts_line(counts), class_=f"cell tpc {STATE_CLASS[state]}")


SECTION = TransportSection()
