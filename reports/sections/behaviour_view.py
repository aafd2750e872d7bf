"""The behaviour view: per ``info`` case (the documents are silent, so nobody is judged), the
implementations at their newest version grouped by what they did (``behaviour.json``, described
by the top-level ``schemas/behaviour.schema.json``, and ``behaviour.html``, linked from
index.html's header). Cases where implementations diverge come first: that is where
interoperability breaks. Observations are text from targets, escaped like every other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import html, strips
from ..formats import dumps
from ..model import TCP, Report, Run, row_case
from ..section import Given, Section

FORMAT = "nats-conformance-behaviour/1"
PAGE = "behaviour.html"
DATA = "behaviour.json"


@dataclass(frozen=True, order=True)
class Observer:
    """An implementation (at its newest version) that made an observation of an info case."""

    implementation: str
    version: str
    target: str
    outcome: str
    transport: str = TCP  # what carried the row


@dataclass(frozen=True)
class Observed:
    """One distinct observation of a case and the implementations that made it."""

    observed: str  # canonical text (conformance.verdicts.observation), "" for nothing observed
    by: tuple[Observer, ...]


@dataclass(frozen=True)
class Behaviour:
    """An info case (the documents are silent, nobody is judged): the implementations grouped by
    what they did; where they diverge, interoperability breaks."""

    case_id: str
    group: str
    observations: tuple[Observed, ...]  # most implementations first

    @property
    def diverges(self) -> bool:
        """Implementations did different things over one transport (what differs only between
        transports, such as INFO's tls_required over TLS, is no divergence)."""
        over: dict[str, set[str]] = defaultdict(set)
        for o in self.observations:
            for by in o.by:
                over[by.transport].add(o.observed)
        return any(len(seen) > 1 for seen in over.values())


def behaviour(
    rows: Iterable[tuple[str, str, str, str, str, str]],
    latest: list[Run],
    order: Callable[[str], Any],
) -> list[Behaviour]:
    """Pure: per info case, the implementations at their newest version (the strips' rule)
    grouped by what they did, from (target, row id, group, outcome, observed, transport) info
    rows of the ``latest`` runs; cases where implementations diverge first. A skipped case
    observed nothing. A case's rows over every transport are one case, each observer naming the
    transport it observed over."""
    newest: dict[str, tuple[str, str]] = {}  # target -> (implementation, its newest version)
    for impl, versions in strips.columns(latest, order).items():
        version, run = list(versions.items())[-1]
        newest[run.target] = (impl, version)
    cases: dict[str, tuple[str, dict[str, list[Observer]]]] = {}
    for target, row_id, group, outcome, observed, transport in rows:
        if target not in newest or outcome == "skip":
            continue
        impl, version = newest[target]
        seen = cases.setdefault(row_case(row_id, transport), (group, defaultdict(list)))[1]
        seen[observed].append(Observer(impl, version, target, outcome, transport))
    found = [
        Behaviour(
            case_id,
            group,
            tuple(
                sorted(
                    (Observed(observed, tuple(sorted(by))) for observed, by in seen.items()),
                    key=lambda o: (-len(o.by), o.observed),
                )
            ),
        )
        for case_id, (group, seen) in cases.items()
    ]
    return sorted(found, key=lambda b: (not b.diverges, b.group, b.case_id))


def behaviour_data(cases: Iterable[Behaviour], generated: str) -> dict[str, Any]:
    """The data of behaviour.json."""
    return {
        "format": FORMAT,
        "generated": generated,
        "cases": [
            {
                "case_id": b.case_id,
                "group": b.group,
                "diverges": b.diverges,
                "observations": [
                    {
                        "observed": o.observed,
                        "implementations": [
                            {
                                "implementation": by.implementation,
                                "version": by.version,
                                "target": by.target,
                                "outcome": by.outcome,
                                "transport": by.transport,
                            }
                            for by in o.by
                        ],
                    }
                    for o in b.observations
                ],
            }
            for b in cases
        ],
    }


def _by_implementation(found: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], list[str]]:
    """(implementation, version, outcome) -> the transports over which it made an observation."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for i in found:
        key = (i["implementation"], i["version"], i["outcome"])
        grouped.setdefault(key, []).append(i.get("transport", TCP))
    return grouped


def _case(case: Mapping[str, Any]) -> str:
    rows = [
        html.row(
            html.observation(o["observed"]),
            "<br>".join(
                html.badge(outcome) + " " + html.esc(f"{impl} {version}{html.over(transports)}")
                for (impl, version, outcome), transports in _by_implementation(
                    o["implementations"]
                ).items()
            ),
        )
        for o in case["observations"]
    ]
    count = html.plural(len(case["observations"]), "distinct observation")
    return html.tag(
        "details",
        html.tag(
            "summary",
            html.tag("code", html.esc(case["case_id"]))
            + html.tag("span", html.esc(case["group"]), class_="grp")
            + html.tag("span", html.esc(count), class_="at"),
        )
        + html.tag(
            "div",
            html.table(("observed", "implementations"), rows, class_="small obs"),
            class_="body",
        ),
        class_="case",
        open="" if case["diverges"] else None,
    )


def render_behaviour(data: Mapping[str, Any]) -> str:
    """behaviour.html: the diverging cases (open), then the cases every implementation agrees on."""
    cases = data["cases"]
    diverging = [c for c in cases if c["diverges"]]
    agreeing = [c for c in cases if not c["diverges"]]
    body = (
        html.tag("p", html.tag("a", "← compliance report", href="index.html"))
        + html.tag("h1", "Behaviour where the documents are silent")
        + html.muted(
            f"Generated {data['generated']}. Each info case with the implementations (at their "
            "newest version) grouped by what they did; an info case never fails anyone. "
            "behaviour.json has every observation whole."
        )
        + html.section(
            f"Where implementations diverge ({len(diverging)})",
            "".join(map(_case, diverging)) or html.muted("No info case has two observations."),
            id="diverging",
        )
        + html.section(
            f"Where they agree ({len(agreeing)})",
            "".join(map(_case, agreeing)) or html.muted("None."),
            id="agreeing",
        )
    )
    return html.document("NATS conformance: behaviour", html.tag("main", body))


class BehaviourSection(Section[list[Behaviour]]):
    name = "behaviour"

    def compute(self, given: Given) -> list[Behaviour]:
        observed = [
            (r.target, r.case_id, r.group, r.outcome, r.observed, r.transport)
            for r in given.cases
            if r.level == "info"
        ]
        return behaviour(observed, list(given.runs), strips.version_order)

    def nav(self, report: Report) -> tuple[str, str]:
        return (PAGE, "Behaviour where the documents are silent")

    def files(self, report: Report) -> dict[str, str]:
        data = behaviour_data(self.of(report), report.generated)
        return {PAGE: render_behaviour(data), DATA: dumps(data)}


SECTION = BehaviourSection()
