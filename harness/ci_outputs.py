"""What a CI system reads from a run: JUnit XML, SARIF 2.1.0 and a Markdown summary.

All three are built from the rows as written and the gate's verdicts, nothing else, so they
agree with the results file and the exit code. Messages quote what a target sent: each output
bounds them again and escapes them for its format.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from nats_conformance.harness.gate import FAILING, GATING_LEVEL, Verdict, gates
from nats_conformance.harness.results import ResultRow, bounded

Judged = Sequence[tuple[ResultRow, Verdict]]

TOOL = "nats-conformance"
JUNIT_MESSAGE_LIMIT = 2000
SARIF_MESSAGE_LIMIT = 1000
MD_MESSAGE_LIMIT = 300
MD_SHOWN = 30  # problems listed per kind and target; a PR comment has a size limit
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVELS = {"must": "error", "should": "warning", "may": "note", "info": "note"}

# Characters XML 1.0 cannot carry at all, not even escaped; a target can send any byte.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _by_target(rows: Judged) -> dict[str, list[tuple[ResultRow, Verdict]]]:
    out: dict[str, list[tuple[ResultRow, Verdict]]] = {}
    for row, verdict in rows:
        out.setdefault(row.target, []).append((row, verdict))
    return out


def _xml_text(text: str, limit: int = JUNIT_MESSAGE_LIMIT) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", bounded(text, limit))


def _verdict_note(row: ResultRow, verdict: Verdict) -> str:
    if verdict is Verdict.EXPECTED:
        return f"[{row.level}, in the baseline] "
    if verdict is Verdict.STALE:
        return f"[{row.level}, in the baseline but passes: the baseline is stale] "
    gating = gates(row) and row.outcome in FAILING
    return f"[{row.level}{', gating' if gating else ''}] "


def junit_xml(rows: Judged) -> str:
    """One testsuite per target, one testcase per row. The class name is the suite and the rule
    group, never a path, so it is the same wherever the package is installed."""
    suites = ET.Element("testsuites", name=TOOL)
    for target, judged in _by_target(rows).items():
        outcomes = Counter(row.outcome for row, _ in judged)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=target,
            tests=str(len(judged)),
            failures=str(outcomes["fail"] + sum(v is Verdict.STALE for _, v in judged)),
            errors=str(outcomes["error"]),
            skipped=str(outcomes["skip"]),
            time=f"{sum(row.duration_ms for row, _ in judged) / 1000:.3f}",
        )
        for row, verdict in judged:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{TOOL}.{row.group}",
                name=row.case_id,
                time=f"{row.duration_ms / 1000:.3f}",
            )
            message = _xml_text(_verdict_note(row, verdict) + row.message)
            element = {"fail": "failure", "error": "error", "skip": "skipped"}.get(row.outcome)
            if verdict is Verdict.STALE:  # a pass that fails the gate must show as a failure
                element = "failure"
            if element is not None:
                ET.SubElement(case, element, message=message).text = message
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


BUNDLED_BASE = "NATS_CONFORMANCE_VECTORS"  # SARIF uriBaseId of the vectors the suite ships
VectorUri = tuple[str, str | None]  # (URI, the uriBaseId it is relative to, None: the checkout's)


def vector_uris(files: Mapping[str, str], roots: Sequence[Path]) -> dict[str, VectorUri]:
    """{case id: where its vector file is}: a bundled file relative to the bundled vectors
    (wherever the package is installed, a virtualenv in the checkout included), another relative
    to the working directory (a repository's root in CI) when under it, else relative to the
    vector directory it came from."""
    from nats_conformance.conformance.vectors import BUNDLED_DIR

    bundled = BUNDLED_DIR.resolve()
    cwd = Path.cwd().resolve()
    dirs = [r.resolve() if r.is_dir() else r.resolve().parent for r in roots]
    out: dict[str, VectorUri] = {}
    for case_id, file in files.items():
        path = Path(file).resolve()
        if path.is_relative_to(bundled):
            out[case_id] = (path.relative_to(bundled).as_posix(), BUNDLED_BASE)
            continue
        base = next((d for d in [cwd, *dirs] if path.is_relative_to(d)), path.parent)
        out[case_id] = (path.relative_to(base).as_posix(), None)
    return out


def _vector_of(case_id: str, uris: Mapping[str, VectorUri]) -> VectorUri | None:
    # A client row's id is the vector's id and the path it took: "<vector id>@<path>".
    return uris.get(case_id) or uris.get(case_id.partition("@")[0])


def sarif(rows: Judged, uris: Mapping[str, VectorUri], version: str) -> dict[str, object]:
    """SARIF 2.1.0: a result per row that fails the gate (an unexpected failure or a stale
    baseline entry) and per other row that failed, at its level (must error, should warning,
    may and info note), located at its vector file and case."""
    results, rules = [], {}
    for row, verdict in rows:
        gating = verdict in (Verdict.UNEXPECTED, Verdict.STALE)
        if not gating and (verdict is Verdict.EXPECTED or row.outcome not in FAILING):
            continue
        rules[row.case_id] = {"id": row.case_id, "shortDescription": {"text": row.case_id}}
        what = "baseline is stale (passes)" if verdict is Verdict.STALE else row.outcome
        location: dict[str, object] = {
            "logicalLocations": [{"fullyQualifiedName": row.case_id, "kind": "object"}]
        }
        if found := _vector_of(row.case_id, uris):
            uri, base = found
            artifact = {"uri": uri} | ({"uriBaseId": base} if base else {})
            location["physicalLocation"] = {"artifactLocation": artifact}
        results.append(
            {
                "ruleId": row.case_id,
                "level": SARIF_LEVELS.get(row.level, "note"),
                "message": {
                    "text": bounded(f"{row.target}: {what}: {row.message}", SARIF_MESSAGE_LIMIT)
                },
                "locations": [location],
                "properties": {"target": row.target, "gating": gating, "outcome": row.outcome},
            }
        )
    driver = {"name": TOOL, "version": version, "rules": list(rules.values())}
    bases = {BUNDLED_BASE: {"description": {"text": f"the vectors bundled with {TOOL} {version}"}}}
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "originalUriBaseIds": bases, "results": results}],
    }


def sarif_json(rows: Judged, uris: Mapping[str, VectorUri], version: str) -> str:
    return json.dumps(sarif(rows, uris, version), indent=2, ensure_ascii=False) + "\n"


# Not "." "-" "+" "#": they act only at a line's start, and every line starts with our own text.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()!|~<>@&])")


def md_text(text: str, limit: int = MD_MESSAGE_LIMIT) -> str:
    """``text`` bounded, on one line, with nothing a Markdown renderer acts on (links, HTML,
    mentions, tables): a target's words must not format or ping anything in a PR comment."""
    one_line = " ".join(bounded(text, limit).split())
    return _MD_SPECIAL.sub(r"\\\1", one_line)


# The summary's count columns: a must row's outcome, except that a baselined failure (or
# error) counts as baselined, not as fail or error, and a pass the gate ran again as flaky.
MD_COLUMNS = ("pass", "fail", "error", "skip", "baselined", "flaky")
MD_LEGEND = (
    "Counts of `must` cases. fail and error: gating failures the baseline does not list; "
    "baselined: failures the baseline expects; flaky: failed, then passed when run again, or "
    "a pass of a case the baseline marks flaky (not gating)."
)


def _md_column(row: ResultRow, verdict: Verdict) -> str:
    """The summary column a must row counts in."""
    if verdict is Verdict.EXPECTED:
        return "baselined"
    return "flaky" if verdict is Verdict.FLAKY else row.outcome


def summary_md(rows: Judged) -> str:
    """Per target the must counts (MD_COLUMNS), the unexpected failures first, then stale
    baseline entries, then flaky cases."""
    lines = ["## nats-conformance", ""]
    if not rows:
        return "\n".join([*lines, "No case ran.", ""])
    lines += [
        "| target | version | " + " | ".join(f"must {c}" for c in MD_COLUMNS) + " |",
        "|---|---|" + "---:|" * len(MD_COLUMNS),
    ]
    judged_by_target = _by_target(rows)
    for target, judged in judged_by_target.items():
        must = Counter(_md_column(row, v) for row, v in judged if row.level == GATING_LEVEL)
        cells = " | ".join(str(must[c]) for c in MD_COLUMNS)
        lines.append(f"| {md_text(target)} | {md_text(judged[0][0].target_version)} | {cells} |")
    lines += ["", MD_LEGEND]
    for target, judged in judged_by_target.items():
        for verdict, title in (
            (Verdict.UNEXPECTED, "unexpected failures"),
            (Verdict.STALE, "stale baseline entries (they pass now)"),
            (Verdict.FLAKY, "flaky (not gating)"),
        ):
            found = [row for row, v in judged if v is verdict]
            if not found:
                continue
            lines += ["", f"### {md_text(target)}: {len(found)} {title}", ""]
            lines += [
                f"- {md_text(row.case_id)} ({row.outcome}): {md_text(row.message)}"
                for row in found[:MD_SHOWN]
            ]
            if len(found) > MD_SHOWN:
                lines.append(f"- and {len(found) - MD_SHOWN} more (every row is in the results)")
    if not any(v in (Verdict.UNEXPECTED, Verdict.STALE) for _, v in rows):
        lines += ["", "The gate passes: no unexpected failure, no stale baseline entry."]
    return "\n".join([*lines, ""])
