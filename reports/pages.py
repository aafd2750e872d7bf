"""A page per implementation (``impl/<slug>.html``) and the data behind it (``impl/<slug>.json``),
and the index's list of failing cases built from that data.

An implementation, not a target, gets the page: its versions are read together (the version
strip is cases × versions), a case failing at five versions is one entry with its evidence once,
and a pinned release and the same binary elsewhere are one implementation (the gate's rule,
``harness.implementations``). Every target keeps an anchor on its implementation's page.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ..conformance.verdicts import ROBUSTNESS, level_rank
from ..harness.gate import FAILING
from ..harness.results import INTEROP_KIND
from . import details, html, sections, strips
from .model import (
    Failure,
    FirstFailure,
    Point,
    Report,
    Strip,
    TargetReport,
    transport_order,
)

FORMAT = "nats-conformance-implementation/1"
PAGE_DIR = "impl"
TRANSCRIPT_SHOWN = 1200  # characters of a transcript a page shows (start and end)
TRANSCRIPT_TAIL = 300
OUTCOME_MARK = {"pass": "✓", "fail": "✕", "error": "!", "skip": "–"}
INTEROP_SIDES = ("A", "B")


def case_anchor(case_id: str) -> str:
    """A safe, stable element id for a case's evidence (case ids are arbitrary text)."""
    return "e-" + hashlib.sha1(case_id.encode("utf-8")).hexdigest()[:12]


def page_names(implementations: Sequence[str]) -> dict[str, str]:
    """Implementation -> its page's path without extension, ``impl/<unique slug>``."""
    return {i: f"{PAGE_DIR}/{slug}" for i, slug in html.unique_slugs(implementations).items()}


def bounded_transcript(text: str) -> dict[str, Any]:
    """The start and end of a transcript and how many characters between them are not shown."""
    if len(text) <= TRANSCRIPT_SHOWN:
        return {"text": text, "cut": 0}
    head = TRANSCRIPT_SHOWN - TRANSCRIPT_TAIL
    return {
        "text": text[:head] + "\n…\n" + text[-TRANSCRIPT_TAIL:],
        "cut": len(text) - head - TRANSCRIPT_TAIL,
    }


def messages(at: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Each distinct message once, with the versions that gave it (most versions repeat one)."""
    versions: dict[str, list[str]] = defaultdict(list)
    for version, message in at:
        versions[message].append(version)
    return [{"versions": v, "message": m} for m, v in versions.items()]


def since_run(points: Sequence[Point]) -> dict[str, Any] | None:
    """The oldest run of the failing streak that ``points`` (newest first) end with, and the run
    before it when that one passed."""
    streak = 0
    while streak < len(points) and points[streak].outcome in FAILING:
        streak += 1
    if not streak:
        return None
    before = points[streak] if streak < len(points) else None
    return {
        "kind": "run",
        "value": points[streak - 1].run_id,
        "passed_before": before.run_id if before and before.outcome == "pass" else None,
    }


def _counts(target: TargetReport) -> dict[str, Any]:
    return {
        "version": target.run.version,
        "target": target.run.target,
        "anchor": html.target_id(target.run.target),
        "run_id": target.run.run_id,
        "started": target.run.started,
        "runs": target.runs,
        "previous_run_id": target.previous.run_id if target.previous else None,
        "must": target.must.to_json(),
        "totals": target.totals.to_json(),
        "robustness": target.robustness,
        "failures": target.failures_total,
        "regressions": target.regressions_total,
        "fixes": target.fixes_total,
        "changes": [
            {"case_id": c.case_id, "level": c.level, "before": c.before, "after": c.after}
            for c in target.changes
        ],
    }


def _strip_json(strip: Strip | None) -> dict[str, Any]:
    if strip is None:
        return {"versions": [], "targets": [], "cases": [], "stable": {}}
    return {
        "versions": list(strip.versions),
        "targets": list(strip.targets),
        "cases": [
            {"case_id": c.case_id, "group": c.group, "level": c.level, "outcomes": list(c.outcomes)}
            | ({"unconfirmed": list(c.unconfirmed)} if c.unconfirmed else {})
            for c in strip.cases
        ],
        "stable": strip.stable,
    }


def _failures(
    report: Report, targets: Sequence[TargetReport], first: Mapping[str, FirstFailure]
) -> list[dict[str, Any]]:
    """Each case failing in a latest run of the implementation's targets (newest version first),
    over whichever transports (a case failing over tcp and ws is one entry), with its evidence
    from the newest failing row (over tcp first)."""
    by_case: dict[str, list[tuple[TargetReport, Failure]]] = defaultdict(list)
    judging = strips.newest_by_version(targets, lambda t: t.run).values()  # the strip's rule
    for target in sorted(judging, key=html.by_version, reverse=True):
        for failure in sorted(target.failures, key=lambda f: transport_order(f.transport)):
            by_case[failure.case].append((target, failure))
    found = []
    for case_id, seen in by_case.items():
        newest, failure = seen[0]
        row_id = failure.case_id
        detail = report.details.get((newest.run.run_id, newest.run.target, row_id)) or {}
        ff = first.get(case_id)
        since = (
            {"kind": "version", "value": ff.first_failing, "passed_before": ff.last_passing}
            if ff
            else since_run(newest.history.get(row_id, []))
        )
        found.append(
            {
                "case_id": case_id,
                "group": failure.group,
                "level": failure.level,
                "category": failure.category,
                "since": since,
                "at": [
                    {
                        "version": t.run.version,
                        "target": t.run.target,
                        "outcome": f.outcome,
                        "upstream": report.upstream.get((t.run.target, f.case_id)),
                        "transport": f.transport,
                    }
                    for t, f in seen
                ],
                "messages": messages(
                    [(t.run.version + html.over([f.transport]), f.message) for t, f in seen]
                ),
                "requirement": detail.get("requirement") or None,
                "vector": details.vector_of(case_id),
                "transcript": bounded_transcript(str(detail.get("transcript") or "")),
            }
        )
    found.sort(key=failure_order)
    return found


def failure_order(failure: Mapping[str, Any]) -> tuple[bool, int, str, str]:
    """Robustness failures (a crash, a hang) first, then must first."""
    return (
        failure["category"] != ROBUSTNESS,
        level_rank(failure["level"]),
        failure["group"],
        failure["case_id"],
    )


def implementation_data(report: Report) -> dict[str, dict[str, Any]]:
    """Implementation -> the data of its page (described by implementation.schema.json)."""
    grouped: dict[str, list[TargetReport]] = defaultdict(list)
    for target in report.targets:
        grouped[target.implementation].append(target)
    strip_of = {s.implementation: s for s in report.strips}
    first: dict[str, dict[str, FirstFailure]] = defaultdict(dict)
    for ff in report.first_failures:
        first[ff.implementation][ff.case_id] = ff
    return {
        impl: {
            "format": FORMAT,
            "generated": report.generated,
            "implementation": impl,
            "kind": targets[0].run.kind,
            "versions": [_counts(t) for t in sorted(targets, key=html.by_version)],
            "strip": _strip_json(strip_of.get(impl)),
            "failures": _failures(report, targets, first[impl]),
            **{k: v for s in sections.SECTIONS for k, v in s.implementation(report, impl).items()},
        }
        for impl, targets in sorted(grouped.items())
    }


# --- the page ----------------------------------------------------------------------------------


def _cell(outcome: str | None, changed: bool) -> str:
    """One strip cell, kept small (a strip can have thousands): the column names the version."""
    if outcome is None:
        return html.tag("td", "·", class_="na")
    cls = f"sc {html.outcome_class(outcome)}" + (" chg" if changed else "")
    return html.tag("td", html.esc(OUTCOME_MARK.get(outcome, "?")), class_=cls)


def strip_table(data: Mapping[str, Any]) -> str:
    """Cases × versions; a cell whose outcome differs from the version before is outlined, unless
    the runs do not confirm the difference (flaky)."""
    strip = data["strip"]
    if not strip["versions"]:
        return html.muted("No version of this implementation ran.")
    with_evidence = {f["case_id"] for f in data["failures"]}
    head = (
        html.tag("th", "case", class_="tname")
        + html.tag("th", "level")
        + "".join(
            html.tag(
                "th", html.tag("a", html.breakable(v), href="#" + html.target_id(t)), scope="col"
            )
            for v, t in zip(strip["versions"], strip["targets"], strict=True)
        )
    )
    rows = []
    for case in strip["cases"]:
        anchor = case_anchor(case["case_id"]) if case["case_id"] in with_evidence else None
        name = html.tag("code", html.esc(case["case_id"]))
        unconfirmed = set(case.get("unconfirmed", ()))
        marks = [
            changed and version not in unconfirmed
            for changed, version in zip(
                strips.changed(tuple(case["outcomes"])), strip["versions"], strict=True
            )
        ]
        rows.append(
            html.tag(
                "tr",
                html.tag(
                    "th", html.tag("a", name, href="#" + anchor) if anchor else name, scope="row"
                )
                + html.tag(
                    "td", html.esc(case["level"]), class_=f"lvl {html.level_class(case['level'])}"
                )
                + "".join(_cell(o, m) for o, m in zip(case["outcomes"], marks, strict=True)),
            )
        )
    stable = ", ".join(f"{n} {o or 'not run'}" for o, n in strip["stable"].items())
    note = html.muted(
        f"{html.plural(len(strip['cases']), 'case')} failing at some version or changing; "
        + (f"the other cases keep one outcome at every version ({stable})." if stable else "")
        + " An outlined cell differs from the version before (a difference the runs of a version"
        " do not confirm is flaky: not outlined, listed on the index)."
    )
    table = html.tag(
        "table",
        html.tag("thead", html.tag("tr", head)) + html.tag("tbody", "".join(rows)),
        class_="strip",
        id="strip",
    )
    return note + html.tag("div", table, class_="scroll")


def versions_table(data: Mapping[str, Any]) -> str:
    rows = []
    for v in data["versions"]:
        must = v["must"]
        rows.append(
            html.tag(
                "tr",
                html.tag("td", html.tag("strong", html.esc(v["version"])))
                + html.tag("td", html.breakable(v["target"]))
                + html.tag("td", html.esc(f"{v['run_id']} · {v['started']} · {v['runs']} run(s)"))
                + html.tag(
                    "td",
                    html.esc(f"{must['pass']}/{must['pass'] + must['fail'] + must['error']}"),
                    class_=f"cell {html.must_class(must['fail'] + must['error'], must['pass'])}",
                )
                + html.tag(
                    "td",
                    html.esc(
                        f"{v['failures']} failing"
                        + (f" ({v['robustness']} robustness)" if v["robustness"] else "")
                        + f", {v['regressions']} regressed, {v['fixes']} fixed"
                    ),
                )
                + html.tag("td", _changes(v["changes"])),
                id=v["anchor"],
            )
        )
    headers = ("version", "target", "latest run", "must", "cases", "since the previous run")
    return html.table(headers, rows, class_="small versions")


def _changes(changes: Sequence[Mapping[str, Any]]) -> str:
    return "<br>".join(
        html.badge(c["before"])
        + "→"
        + html.badge(c["after"])
        + " "
        + html.tag("code", html.esc(c["case_id"]))
        for c in changes
    ) or html.tag("span", "none", class_="muted")


def transcript_block(transcript: Mapping[str, Any], interop: bool) -> str:
    text = transcript["text"]
    if not text:
        return html.muted("No transcript recorded.")
    cut = transcript["cut"]
    note = (
        html.muted(
            f"{cut} characters in the middle not shown (the details side file has the transcript)."
        )
        if cut
        else ""
    )
    if not interop:
        return html.tag("pre", html.esc(text)) + note
    # An interop transcript interleaves what A (the publisher) and B (the receiver) did: one
    # column per side keeps each side readable and the order visible.
    rows = []
    for line in text.splitlines():
        side = line[:1] if line[:2] in ("A ", "B ") else ""
        cells = [line if side in ("", s) else "" for s in INTEROP_SIDES]
        rows.append(html.row(*(html.tag("code", html.esc(c)) for c in cells)))
    return (
        html.table(
            ("A (publisher, requester)", "B (receiver, responder)"), rows, class_="small sides"
        )
        + note
    )


def evidence(failure: Mapping[str, Any], interop: bool, is_open: bool = False) -> str:
    """A failing case: where it fails, then message, requirement, vector and transcript."""
    at = failure["at"]
    versions = html.badge(at[0]["outcome"]) + " " + html.esc(html.failing_at(at))
    upstream = next((a["upstream"] for a in at if a["upstream"]), None)
    summary = html.tag(
        "summary",
        html.tag(
            "span", html.esc(failure["level"]), class_=f"lvl {html.level_class(failure['level'])}"
        )
        + html.tag("code", html.esc(failure["case_id"]))
        + html.tag("span", html.esc(failure["group"]), class_="grp")
        + html.tag("span", versions, class_="at")
        + (html.upstream_link(upstream) if upstream else ""),
    )
    said = "".join(
        html.tag(
            "p",
            html.tag("strong", html.esc(", ".join(m["versions"])) + ": ")
            + html.esc(m["message"] or "no message"),
            class_="msg",
        )
        for m in failure["messages"]
    )
    body = [
        tag_h5("Since") + html.tag("p", html.esc(html.since_text(failure["since"]))),
        tag_h5("Message") + said,
        tag_h5("Requirement") + html.requirement(failure["requirement"]),
        tag_h5("Vector") + vector_block(failure["vector"]),
        tag_h5("Transcript") + transcript_block(failure["transcript"], interop),
    ]
    return html.tag(
        "details",
        summary + html.tag("div", "".join(body), class_="body"),
        class_="case",
        id=case_anchor(failure["case_id"]),
        open="" if is_open else None,
    )


def tag_h5(text: str) -> str:
    return html.tag("h5", html.esc(text))


def vector_block(vector: Mapping[str, Any] | None) -> str:
    if not vector:
        return html.muted("Not a bundled vector.")
    cited = "".join(
        html.tag(
            "li", html.tag("code", html.esc(r["id"])) + " " + html.tag("q", html.esc(r["words"]))
        )
        for r in vector["requirements"]
    )
    return html.tag(
        "p",
        html.tag("code", html.esc(vector["file"]))
        + " · case "
        + html.tag("code", html.esc(vector["case_id"])),
    ) + (html.tag("ul", cited, class_="cited") if cited else "")


def render_implementation(data: Mapping[str, Any], json_name: str) -> str:
    """The page of one implementation; ``json_name``: its data file, beside it."""
    interop = data["kind"] == INTEROP_KIND
    robustness = [f for f in data["failures"] if f["category"] == ROBUSTNESS]
    failures = [f for f in data["failures"] if f["category"] != ROBUSTNESS]
    body = (
        html.tag("p", html.tag("a", "← compliance report", href="../index.html"))
        + html.tag("h1", html.esc(data["implementation"]))
        + html.tag(
            "p",
            html.esc(f"{data['kind']} · generated {data['generated']} · ")
            + html.tag("a", "the data of this page (JSON)", href=json_name),
            class_="muted",
        )
        + html.section("Versions", versions_table(data), id="versions")
        + html.section("Version strip", strip_table(data), id="strip-section")
        + (
            html.section(
                "Robustness failures",
                html.muted(
                    f"{html.plural(len(robustness), 'case')} where the implementation crashed "
                    "or hung, whatever the level; not counted in the conformance scores."
                )
                + "".join(evidence(f, interop, n == 0) for n, f in enumerate(robustness)),
                id="robustness",
            )
            if robustness
            else ""
        )
        + html.section(
            "Failing cases",
            html.muted(
                f"{html.plural(len(failures), 'case')}, must first; each with its "
                "evidence from the newest version that fails it."
            )
            # The first (a must failure, when there is one) starts open, as an example.
            + "".join(
                evidence(f, interop, n == 0 and not robustness) for n, f in enumerate(failures)
            ),
            id="failing",
        )
        + "".join(s.implementation_html(data) for s in sections.SECTIONS)
    )
    return html.document(
        f"NATS conformance: {data['implementation']}", html.tag("main", body), root="../"
    )


# --- the index's failing cases --------------------------------------------------------------------


def failing_rows(
    pages: Mapping[str, Mapping[str, Any]], names: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One row per (implementation, failing case), must first."""
    rows = [
        {
            "implementation": impl,
            "page": names[impl] + ".html",
            "anchor": case_anchor(failure["case_id"]),
            "failure": failure,
        }
        for impl, data in pages.items()
        for failure in data["failures"]
    ]
    rows.sort(
        key=lambda r: (
            level_rank(r["failure"]["level"]),
            r["implementation"],
            r["failure"]["case_id"],
        )
    )
    return rows
