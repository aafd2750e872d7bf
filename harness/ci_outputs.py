"""What a CI system reads from a run: JUnit XML, SARIF 2.1.0 and a Markdown summary.

All three are built from the rows as written, the gate's verdicts and the baseline's entries,
nothing else, so they agree with the results file and the exit code: only what fails the gate
is a JUnit failure or error and a SARIF error; a failure the baseline lists is a JUnit skip and
a suppressed SARIF note, each naming the entry's class and reason; a failure that passed when
run again is a JUnit pass with a ``flaky`` property. Messages quote what a target sent: each
output bounds them again and escapes them for its format, and writes no path of the machine it
ran on (``local_paths``): a CI log or a code-scanning alert is read elsewhere.
"""

from __future__ import annotations

import json
import re
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ..conformance.vectors import BUNDLED_DIR
from .gate import (
    FAILING,
    GATING_LEVEL,
    Baseline,
    Entry,
    Verdict,
    entry_words,
    gate_fails,
)
from .results import ResultRow, bounded

Judged = Sequence[tuple[ResultRow, Verdict]]
Scrub = Callable[[str], str]  # a text without the machine's paths (see local_paths)

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


def gate_note(row: ResultRow, verdict: Verdict, entry: Entry | None) -> str:
    """What the gate made of a row, as every output puts it before the row's message."""
    if verdict is Verdict.EXPECTED and entry is not None:
        return f"[{row.level}, baselined: {entry_words(entry)}] "
    if verdict is Verdict.STALE:
        return f"[{row.level}, in the baseline but passes: the baseline is stale] "
    if verdict is Verdict.FLAKY and entry is not None:  # a pass of a case listed as flaky
        return f"[{row.level}, flaky: not gating; baselined: {entry_words(entry)}] "
    if verdict is Verdict.FLAKY:
        return f"[{row.level}, flaky: not gating] "
    if verdict is Verdict.UNEXPECTED:
        return f"[{row.level}, gating] "
    return f"[{row.level}, not gating] " if row.outcome in FAILING else f"[{row.level}] "


def junit_element(row: ResultRow, verdict: Verdict) -> str | None:
    """The JUnit element a row gets: ``failure`` or ``error`` only for what fails the gate (a
    stale entry's pass included), ``skipped`` for a skip and for a failure that does not gate
    (baselined, or below ``must``), none for a pass (a flaky one too)."""
    if verdict is Verdict.STALE:
        return "failure"
    if verdict is Verdict.UNEXPECTED:
        return "failure" if row.outcome == "fail" else "error"
    return "skipped" if row.outcome in FAILING or row.outcome == "skip" else None


def _entry(baseline: Baseline, row: ResultRow) -> Entry | None:
    return baseline.entry(row.target, row.target_version, row.case_id)


def junit_xml(rows: Judged, baseline: Baseline | None = None, scrub: Scrub = str) -> str:
    """One testsuite per target, one testcase per row, agreeing with the gate (junit_element):
    a green gate has no failure and no error. The class name is the suite and the rule group,
    never a path, so it is the same wherever the package is installed. A row whose element does
    not say its outcome (baselined, not gating, flaky) has ``outcome`` and ``gate`` properties."""
    baseline = baseline or Baseline()
    suites = ET.Element("testsuites", name=TOOL)
    for target, judged in _by_target(rows).items():
        elements = Counter(junit_element(row, verdict) for row, verdict in judged)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=_xml_text(scrub(target)),
            tests=str(len(judged)),
            failures=str(elements["failure"]),
            errors=str(elements["error"]),
            skipped=str(elements["skipped"]),
            time=f"{sum(row.duration_ms for row, _ in judged) / 1000:.3f}",
        )
        for row, verdict in judged:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{TOOL}.{row.group}",
                name=_xml_text(row.case_id),
                time=f"{row.duration_ms / 1000:.3f}",
            )
            note = gate_note(row, verdict, _entry(baseline, row))
            element = junit_element(row, verdict)
            if verdict is Verdict.FLAKY or (element == "skipped" and row.outcome in FAILING):
                properties = ET.SubElement(case, "properties")
                for name, value in (("outcome", row.outcome), ("gate", note.strip(" []"))):
                    ET.SubElement(properties, "property", name=name, value=_xml_text(value))
                if verdict is Verdict.FLAKY:  # the failed attempts, or the entry that allows it
                    flaky = _xml_text(scrub(row.message) or note.strip(" []"))
                    ET.SubElement(properties, "property", name="flaky", value=flaky)
            if element is not None:
                message = _xml_text(note + scrub(row.message))
                ET.SubElement(case, element, message=message).text = message
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


def local_paths(roots: Iterable[Path] = ()) -> Scrub:
    """A function that writes a text without the absolute paths of the machine it ran on: a path
    under one of ``roots`` (the vector directories) or the working directory (a repository's
    root in CI) relative to it, the package's vectors relative to them, one under the home or
    the temporary directory as ``~/...`` or ``$TMPDIR/...``. Paths elsewhere (a system binary a
    target names, such as /usr/sbin/nats-server) are the same on every machine, and stay."""
    cwd = Path.cwd().resolve()
    places = [(d, "") for d in _dirs(roots)] + [(BUNDLED_DIR.resolve(), "")]
    places += [(cwd, "")] if cwd != Path(cwd.anchor) else []
    places += [(Path.home().resolve(), "~/"), (Path(tempfile.gettempdir()).resolve(), "$TMPDIR/")]
    # Longest first, so a vector directory under the working directory is cut at itself.
    ordered = sorted(
        {str(path): prefix for path, prefix in places if path != Path(path.anchor)}.items(),
        key=lambda place: -len(place[0]),
    )
    if not ordered:
        return str
    pattern = re.compile(
        r"(?<![\w.~$/-])(" + "|".join(re.escape(path) for path, _ in ordered) + r")(/|(?![\w.-]))"
    )
    prefixes = dict(ordered)

    def scrub(text: str) -> str:
        def cut(match: re.Match[str]) -> str:
            prefix = prefixes[match.group(1)]
            return prefix if match.group(2) else prefix.rstrip("/") or "."

        return pattern.sub(cut, text)

    return scrub


def _dirs(roots: Iterable[Path]) -> list[Path]:
    return [r.resolve() if r.is_dir() else r.resolve().parent for r in roots]


BUNDLED_BASE = "NATS_CONFORMANCE_VECTORS"  # SARIF uriBaseId of the vectors the suite ships
VectorUri = tuple[str, str | None]  # (URI, the uriBaseId it is relative to, None: the checkout's)


def vector_uris(files: Mapping[str, str], roots: Sequence[Path]) -> dict[str, VectorUri]:
    """{case id: where its vector file is}: a bundled file relative to the bundled vectors
    (wherever the package is installed, a virtualenv in the checkout included), another relative
    to the working directory (a repository's root in CI) when under it, else relative to the
    vector directory it came from: never an absolute path of the machine that ran."""
    bundled = BUNDLED_DIR.resolve()
    cwd = Path.cwd().resolve()
    # The filesystem's root is no repository: a file under it would keep its whole path.
    bases = [*([cwd] if cwd != Path(cwd.anchor) else []), *_dirs(roots)]
    out: dict[str, VectorUri] = {}
    for case_id, file in files.items():
        path = Path(file).resolve()
        if path.is_relative_to(bundled):
            out[case_id] = (path.relative_to(bundled).as_posix(), BUNDLED_BASE)
            continue
        base = next((d for d in bases if path.is_relative_to(d)), path.parent)
        out[case_id] = (path.relative_to(base).as_posix(), None)
    return out


def _vector_of(case_id: str, uris: Mapping[str, VectorUri]) -> VectorUri | None:
    # A client row's id is the vector's id and the path it took: "<vector id>@<path>".
    return uris.get(case_id) or uris.get(case_id.partition("@")[0])


def sarif(
    rows: Judged,
    uris: Mapping[str, VectorUri],
    version: str,
    baseline: Baseline | None = None,
    scrub: Scrub = str,
) -> dict[str, object]:
    """SARIF 2.1.0: a result per row that failed and per stale baseline entry, located at its
    vector file and case. What fails the gate (an unexpected failure, a stale entry) is an
    ``error``; a failure the baseline lists is a ``note`` with an external suppression whose
    justification is the entry's class and reason (code scanning shows it as dismissed); any
    other failure does not gate and is at its level (should warning, may and info note)."""
    baseline = baseline or Baseline()
    results, rules = [], {}
    for row, verdict in rows:
        gating = verdict in (Verdict.UNEXPECTED, Verdict.STALE)
        if not gating and row.outcome not in FAILING:
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
        entry = _entry(baseline, row) if verdict is Verdict.EXPECTED else None
        level = "error" if gating else SARIF_LEVELS.get(row.level, "note")
        text = scrub(f"{row.target}: {what}: {row.message}")
        result: dict[str, object] = {
            "ruleId": row.case_id,
            "level": "note" if entry is not None else level,
            "message": {"text": bounded(text, SARIF_MESSAGE_LIMIT)},
            "locations": [location],
            "properties": {"target": scrub(row.target), "gating": gating, "outcome": row.outcome},
        }
        if entry is not None:
            justification = f"baselined: {entry_words(entry)}"
            result["suppressions"] = [{"kind": "external", "justification": justification}]
        results.append(result)
    driver = {"name": TOOL, "version": version, "rules": list(rules.values())}
    bases = {BUNDLED_BASE: {"description": {"text": f"the vectors bundled with {TOOL} {version}"}}}
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "originalUriBaseIds": bases, "results": results}],
    }


def sarif_json(
    rows: Judged,
    uris: Mapping[str, VectorUri],
    version: str,
    baseline: Baseline | None = None,
    scrub: Scrub = str,
) -> str:
    document = sarif(rows, uris, version, baseline, scrub)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


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


def summary_md(rows: Judged, baseline: Baseline | None = None, scrub: Scrub = str) -> str:
    """Per target the must counts (MD_COLUMNS), the unexpected failures first, then stale
    baseline entries, flaky cases and baselined failures (each with its entry's class and
    reason); last the gate's verdict and exit code."""
    baseline = baseline or Baseline()
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
        name, version = md_text(scrub(target)), md_text(judged[0][0].target_version)
        lines.append(f"| {name} | {version} | {cells} |")
    lines += ["", MD_LEGEND]
    for target, judged in judged_by_target.items():
        for verdict, title in (
            (Verdict.UNEXPECTED, "unexpected failures"),
            (Verdict.STALE, "stale baseline entries (they pass now)"),
            (Verdict.FLAKY, "flaky (not gating)"),
            (Verdict.EXPECTED, "baselined (not gating)"),
        ):
            found = [row for row, v in judged if v is verdict]
            if not found:
                continue
            lines += ["", f"### {md_text(scrub(target))}: {len(found)} {title}", ""]
            lines += [
                f"- {md_text(row.case_id)} ({row.outcome}): "
                + (f"{entry_words(entry)}: " if (entry := _entry(baseline, row)) else "")
                + md_text(scrub(row.message))
                for row in found[:MD_SHOWN]
            ]
            if len(found) > MD_SHOWN:
                lines.append(f"- and {len(found) - MD_SHOWN} more (every row is in the results)")
    return "\n".join([*lines, "", gate_verdict(verdict for _, verdict in rows), ""])


def gate_verdict(verdicts: Iterable[Verdict]) -> str:
    """One sentence: whether the gate passes, its exit code, and what it counted."""
    counted = Counter(verdicts)
    said = [
        f"{counted[v]} {words}"
        for v, words in (
            (Verdict.UNEXPECTED, "unexpected failures"),
            (Verdict.STALE, "stale baseline entries"),
            (Verdict.EXPECTED, "baselined failures (not gating)"),
            (Verdict.FLAKY, "flaky (not gating)"),
        )
    ]
    if gate_fails(counted):
        return f"The gate fails (exit 1): {', '.join(said)}."
    return f"The gate passes (exit 0): {', '.join(said)}."
