"""Write a report's files: index.html, summary.json, implementations.json, badges, summary.md,
behaviour.json and behaviour.html."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from . import html, pages, sections
from .formats import dumps
from .model import Report, TargetReport

FORMAT = "nats-conformance-report/1"
BADGE_LABEL = "NATS conformance"


def write_all(report: Report, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    names = html.badge_names([t.run.target for t in report.targets])
    badges = out / "badges"
    if badges.exists():  # badges of targets no longer reported must not linger
        for old in badges.glob("*.json"):
            old.unlink()
    badges.mkdir(exist_ok=True)
    for target in report.targets:
        _dump(badges / names[target.run.target], badge(target))
    _dump(out / "summary.json", summary(report))
    _dump(out / "implementations.json", implementations(report))
    (out / "summary.md").write_text(markdown(report), encoding="utf-8")
    write_pages(report, out)


def rendered_pages(report: Report) -> dict[str, str]:
    """index.html, the stylesheet every page shares, per implementation ``impl/<slug>.html`` and
    the data behind it, ``impl/<slug>.json`` (implementation.schema.json), and the sections' own
    files (behaviour.html and .json, coverage.html and .json): path in the report -> content."""
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
    for s in sections.SECTIONS:
        files |= s.files(report)
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


def _dump(path: Path, data: object) -> None:
    path.write_text(dumps(data), encoding="utf-8")


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


def summary(report: Report) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "generated": report.generated,
        "runs": report.runs_total,
        "rows": report.rows_total,
        "rows_added": report.rows_added,
        **{key: value for s in sections.SECTIONS for key, value in s.summary(report).items()},
    }


def implementations(report: Report) -> dict[str, Any]:
    """Per implementation: its targets' latest runs in version order, its first failures and
    what the sections add (the changes between consecutive versions)."""
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
                **{
                    k: v
                    for s in sections.SECTIONS
                    for k, v in s.implementation(report, name).items()
                },
            }
            for name, targets in sorted(grouped.items())
        ],
    }


def markdown(report: Report) -> str:
    """A summary for CI logs: one table row per target, then what changed and what is wrong."""
    lines = [
        "## NATS conformance",
        "",
        f"{len(report.targets)} targets, {report.runs_total} runs, {report.rows_total} rows "
        f"({report.rows_added} new). Generated {report.generated}.",
    ]
    lines += [line for s in sections.MARKDOWN for line in s.markdown(report)]
    return "\n".join(lines) + "\n"
