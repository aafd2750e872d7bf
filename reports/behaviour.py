"""The behaviour view: per ``info`` case (the documents are silent, so nobody is judged), the
implementations at their newest version grouped by what they did (``behaviour.json``, described
by the top-level ``schemas/behaviour.schema.json``, and ``behaviour.html``). Cases where
implementations diverge come first: that is where interoperability breaks. The grouping is
``analysis.behaviour``; observations are text from targets, escaped like every other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import html
from .model import Report

FORMAT = "nats-conformance-behaviour/1"
PAGE = "behaviour.html"


def behaviour_data(report: Report) -> dict[str, Any]:
    """The data of behaviour.json."""
    return {
        "format": FORMAT,
        "generated": report.generated,
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
                            }
                            for by in o.by
                        ],
                    }
                    for o in b.observations
                ],
            }
            for b in report.behaviour
        ],
    }


def _case(case: Mapping[str, Any]) -> str:
    rows = [
        html.row(
            html.observation(o["observed"]),
            "<br>".join(
                html.badge(i["outcome"]) + " " + html.esc(f"{i['implementation']} {i['version']}")
                for i in o["implementations"]
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
