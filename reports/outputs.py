"""Write a report's files: index.html, summary.json, implementations.json, badges, summary.md,
behaviour.json and behaviour.html."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from . import behaviour, html, pages, sections
from .markdown import code_span, table_cell
from .model import Counts, Report, TargetReport

FORMAT = "nats-conformance-report/1"
BADGE_LABEL = "NATS conformance"
TABLE_HEAD = (
    "| target | version | must | must score | all levels | robustness failures | regressions "
    "| fixes |",
    "|---|---|---|---|---|---|---|---|",
)


def write_all(report: Report, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    names = badge_names([t.run.target for t in report.targets])
    badges = out / "badges"
    if badges.exists():  # badges of targets no longer reported must not linger
        for old in badges.glob("*.json"):
            old.unlink()
    badges.mkdir(exist_ok=True)
    for target in report.targets:
        _dump(badges / names[target.run.target], badge(target))
    _dump(out / "summary.json", summary(report, names))
    _dump(out / "implementations.json", implementations(report))
    _dump(out / "behaviour.json", behaviour.behaviour_data(report))
    (out / "summary.md").write_text(markdown(report), encoding="utf-8")
    write_pages(report, out)
    if report.coverage:
        _dump(out / "coverage.json", report.coverage)
        (out / "coverage.html").write_text(html.render_coverage(report), encoding="utf-8")


def rendered_pages(report: Report) -> dict[str, str]:
    """index.html, behaviour.html, the stylesheet they share and, per implementation,
    ``impl/<slug>.html`` and the data behind it, ``impl/<slug>.json``
    (implementation.schema.json): path in the report -> content."""
    data = pages.implementation_data(report)
    names = pages.page_names(list(data))
    files = {}
    for impl, page in data.items():
        files[f"{names[impl]}.json"] = dumps(page)
        json_name = names[impl].rpartition("/")[2] + ".json"
        files[f"{names[impl]}.html"] = pages.render_implementation(page, json_name)
    links = {
        version["target"]: f"{names[impl]}.html#{version['anchor']}"
        for impl, page in data.items()
        for version in page["versions"]
    }
    failing = pages.failing_rows(data, names)
    files["index.html"] = html.render(report, links, failing, sections.SECTIONS)
    files[html.STYLESHEET] = html.stylesheet()  # once, linked by every page
    files[behaviour.PAGE] = behaviour.render_behaviour(behaviour.behaviour_data(report))
    return files


def write_pages(report: Report, out: Path) -> None:
    """The rendered pages; pages of implementations no longer reported are removed."""
    folder = out / pages.PAGE_DIR
    if folder.exists():
        for old in (*folder.glob("*.html"), *folder.glob("*.json")):
            old.unlink()
    folder.mkdir(exist_ok=True)
    for name, content in rendered_pages(report).items():
        (out / name).write_text(content, encoding="utf-8")


def dumps(data: object) -> str:
    """A report's JSON: a value a line, indented by one space, so that the diff of a regenerated
    report shows the values that changed (and no more bytes than that needs)."""
    return json.dumps(data, indent=1, separators=(",", ":"), ensure_ascii=False) + "\n"


def _dump(path: Path, data: object) -> None:
    path.write_text(dumps(data), encoding="utf-8")


def badge_names(targets: list[str]) -> dict[str, str]:
    """A file name per target: readable, and unique even when two targets slug alike."""
    return {target: slug + ".json" for target, slug in html.unique_slugs(targets).items()}


def colour(score: float | None) -> str:
    if score is None:
        return "lightgrey"
    for bound, name in ((1.0, "brightgreen"), (0.95, "green"), (0.8, "yellow"), (0.5, "orange")):
        if score >= bound:
            return name
    return "red"


def badge(target: TargetReport) -> dict[str, Any]:
    """A shields.io endpoint badge: the must cases passed in the target's latest run (conformance
    rows: a robustness failure is counted apart)."""
    must = target.must
    message = f"{must.passed}/{must.judged} must" if must.judged else "no must cases"
    if target.regressions_total:
        message += f", {target.regressions_total} regressed"
    return {
        "schemaVersion": 1,
        "label": BADGE_LABEL,
        "message": message,
        "color": "red" if target.regressions_total else colour(must.score),
    }


def _levels(report: Report, target: str) -> dict[str, dict[str, Any]]:
    by_level: dict[str, Counts] = defaultdict(Counts)
    for cell in report.cells:
        if cell.target == target:
            by_level[cell.level] += cell.counts
    return {level: counts.to_json() for level, counts in sorted(by_level.items())}


def _groups(report: Report, target: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = defaultdict(dict)
    for cell in sorted(report.cells, key=lambda c: (c.group, c.level)):
        if cell.target == target:
            groups[cell.group][cell.level] = cell.counts.to_json()
    return dict(groups)


def summary(report: Report, badges: dict[str, str]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "generated": report.generated,
        "runs": report.runs_total,
        "rows": report.rows_total,
        "rows_added": report.rows_added,
        **{key: value for s in sections.SECTIONS for key, value in s.summary(report).items()},
        "targets": [
            {
                "target": t.run.target,
                "kind": t.run.kind,
                "implementation": t.implementation,
                "version": t.run.version,
                "run_id": t.run.run_id,
                "started": t.run.started,
                "runs": t.runs,
                "previous_run_id": t.previous.run_id if t.previous else None,
                "must": t.must.to_json(),
                "totals": t.totals.to_json(),
                "robustness": t.robustness,
                "levels": _levels(report, t.run.target),
                "groups": _groups(report, t.run.target),
                "failures": t.failures_total,
                "regressions": t.regressions_total,
                "fixes": t.fixes_total,
                "changes": [
                    {
                        "case_id": c.case_id,
                        "group": c.group,
                        "level": c.level,
                        "before": c.before,
                        "after": c.after,
                        "kind": "regression" if c.regression else "fix",
                        "message": c.message,
                    }
                    for c in t.changes
                ],
                "badge": f"badges/{badges[t.run.target]}",
            }
            for t in report.targets
        ],
        "flaky": {
            "total": report.flaky_total,
            "cases": [
                {
                    "target": f.target,
                    "version": f.version,
                    "case_id": f.case_id,
                    "level": f.level,
                    "outcomes": list(f.outcomes),
                    "varied": list(f.varied),
                    "runs": f.runs,
                }
                for f in report.flaky
            ],
            # Differences between versions the runs do not confirm: not version changes.
            "changes": [
                {
                    "implementation": f.change.implementation,
                    **pages.version_change(f.change),
                    "unstable": [
                        {"version": u.version, "varied": list(u.varied)} for u in f.unstable
                    ],
                }
                for f in report.flaky_changes
            ],
        },
    }


def implementations(report: Report) -> dict[str, Any]:
    """Per implementation: its targets' latest runs in version order, its first failures and
    the outcome changes between consecutive versions."""
    grouped: dict[str, list[TargetReport]] = defaultdict(list)
    for target in report.targets:
        grouped[target.implementation].append(target)
    first: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in report.first_failures:
        first[f.implementation].append(
            {
                "case_id": f.case_id,
                "group": f.group,
                "level": f.level,
                "first_failing": f.first_failing,
                "last_passing": f.last_passing,
                "newest_version": f.newest_version,
                "newest_outcome": f.newest_outcome,
                "versions": f.versions,
            }
        )
    changes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for v in report.version_changes:
        changes[v.implementation].append(pages.version_change(v))
    return {
        "format": FORMAT,
        "generated": report.generated,
        "implementations": [
            {
                "implementation": name,
                "kind": targets[0].run.kind,
                "versions": [
                    {
                        "version": t.run.version,
                        "target": t.run.target,
                        "run_id": t.run.run_id,
                        "must": t.must.to_json(),
                        "totals": t.totals.to_json(),
                        "robustness": t.robustness,
                    }
                    for t in sorted(targets, key=html.by_version)
                ],
                "first_failures": first.get(name, []),
                "version_changes": changes.get(name, []),
            }
            for name, targets in sorted(grouped.items())
        ],
    }


def _percent(counts: Counts) -> str:
    score = counts.score
    return "n/a" if score is None else f"{score:.1%}"


def markdown(report: Report) -> str:
    """A summary for CI logs: one table row per target, then what changed and what is wrong."""
    lines = [
        "## NATS conformance",
        "",
        f"{len(report.targets)} targets, {report.runs_total} runs, {report.rows_total} rows "
        f"({report.rows_added} new). Generated {report.generated}.",
        "",
        *TABLE_HEAD,
    ]
    pairs = [t for t in report.targets if t.interop]
    for t in report.targets:
        if not t.interop:
            lines.append(_markdown_row(t))
    if pairs:  # one line for the whole interop matrix, then the pairs that fail a must case
        failing = [t for t in pairs if t.must.judged > t.must.passed]
        must = sum((t.must for t in pairs), Counts())
        lines += [
            "",
            f"Interop: {len(pairs)} ordered client pairs, must {must.passed}/{must.judged}; "
            f"{len(failing)} pair(s) fail a must case.",
        ]
        if failing:
            lines += ["", *TABLE_HEAD, *(_markdown_row(t) for t in failing)]
    regressions = [(t, c) for t in report.targets for c in t.changes if c.regression]
    if regressions:
        lines += ["", "### Regressions", ""]
        lines += [
            f"- `{code_span(t.run.target)}` {code_span(c.case_id)} ({c.level}): "
            f"{c.before} -> {c.after}"
            for t, c in regressions
        ]
    outcome_changes = [v for v in report.version_changes if "outcome" in v.changed]
    if outcome_changes:
        lines += ["", "### Changes between versions", ""]
        lines += [
            f"- {table_cell(v.implementation)} {code_span(v.case_id)} ({v.level}): "
            f"{v.before_outcome} at {table_cell(v.before_version)} -> "
            f"{v.after_outcome} at {table_cell(v.after_version)}"
            for v in outcome_changes
        ]
    observed = sum("observation" in v.changed for v in report.version_changes)
    if observed:
        lines += [
            "",
            f"{observed} observation change(s) between versions: what an implementation did "
            "differs from the version before (see implementations.json).",
        ]
    robust = [t for t in report.targets if t.robustness]
    if robust:
        lines += ["", "### Robustness failures (a crash or a hang; not in the scores)", ""]
        lines += [f"- `{code_span(t.run.target)}`: {t.robustness}" for t in robust]
    if report.flaky_total:
        lines += ["", f"{report.flaky_total} flaky case(s): outcomes or observations differ "
                  "between runs of one version (see summary.json)."]  # fmt: skip
    if report.flaky_changes:
        unconfirmed = len(report.flaky_changes)
        lines += ["", f"{unconfirmed} difference(s) between versions not confirmed (the runs of "
                  "a version disagree): flaky, not changes (see summary.json)."]  # fmt: skip
    lines += [line for s in sections.MARKDOWN for line in s.markdown(report)]
    return "\n".join(lines) + "\n"


def _markdown_row(t: TargetReport) -> str:
    return (
        f"| {table_cell(t.run.target)} | {table_cell(t.run.version)} "
        f"| {t.must.passed}/{t.must.judged} "
        f"| {_percent(t.must)} | {_percent(t.totals)} | {t.robustness} | {t.regressions_total} "
        f"| {t.fixes_total} |"
    )
