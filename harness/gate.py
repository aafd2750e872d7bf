"""The CI gate: which outcomes fail a run, and the expected-failures baseline.

Only `must` cases can fail the gate, and a crash or a hang (category robustness) on a case of
any level; other `should`, `may` and `info` outcomes are recorded and reported, never gating.
A gating row that fails (or cannot be run: `error`) fails the gate unless the baseline lists it
for that implementation and version. A listed case that passes
fails the gate too, so the baseline cannot go stale; `update` rewrites it from a run.

The baseline is keyed by what runs, not by where it runs: {implementation: {version: {case_id:
entry}}}, the implementation named by ``harness.implementations`` (the rule the report uses)
and the version being the one the target reports (each row's ``target_version``). So the same
binary at another path, or the same server at another port, meets the same entries.

Format 3 (written by ``--baseline-update``; schemas/baseline.schema.json, baselines/README.md):
an entry says why the failure is accepted, in a class, so that a baseline cannot hide the suite's
own mistakes:

- ``{"class": "deviation", "reason": R, "statement": ID}``: the implementation deviates from
  the statement ``ID`` of vectors/requirements.json that the case cites;
- ``{"class": "upstream-bug", "reason": R, "upstream": URL}``: a bug the implementation's own
  tracker knows (the report shows the URL beside the failure);
- ``{"class": "flaky", "reason": R}``: a case the implementation fails only sometimes; passing
  it is reported as flaky, never as a stale baseline.

``reason`` is a stable code (``REASONS``: the outcome, or ``robustness`` for a crash or hang),
not a message: messages carry times and names that change between runs. Every entry names a
version: format 3 has no ``*`` (an entry for versions not yet seen would accept failures nobody
has looked at). Format-2 files (messages, ``*`` versions, ``{"message", "upstream"}``) and
format-1 files (keyed by target spec) still load, their entries classed as their marks say.

Case ids are stable: an entry under a former id of a case or of a row (the vectors' ``aliases``
and ``row_aliases``: ``conformance.vectors.renames``) is the current id's entry, and is written
under the current id.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Protocol, TypeVar

import jsonschema

from ..conformance.transports import DEFAULT_TRANSPORT, transport_of
from ..conformance.vectors import Case, Renames, bundled_renames, json_depth
from ..conformance.verdicts import ROBUSTNESS
from .implementations import implementation, spec_version
from .results import ResultRow

BASELINE_FORMAT = "nats-conformance-baseline/3"
FORMAT_2 = "nats-conformance-baseline/2"  # messages and ``*`` versions; classed when loaded
FORMAT_1 = "nats-conformance-baseline/1"  # keyed by target spec; converted when loaded
ANY_VERSION = "*"  # formats 1 and 2 only
# A format-2 entry whose message starts with this lists a case the implementation fails only
# sometimes: it loads as class flaky.
FLAKY_MARK = "flaky: "
CLASSES = ("deviation", "upstream-bug", "flaky")
REASONS = ("fail", "error", "robustness")
GATING_LEVEL = "must"
FAILING = frozenset({"fail", "error"})
ROOT = Path(__file__).resolve().parents[1]  # the repository, or the installed package
SHIPPED_BASELINE = ROOT / "baselines" / "baseline.json"
SCHEMA_PATH = ROOT / "schemas" / "baseline.schema.json"  # format 3

# A baseline entry: {"class", "reason", and "statement" or "upstream" as the class needs}.
Entry = dict[str, str]
Entries = dict[str, dict[str, dict[str, Entry]]]  # implementation -> version -> case id -> entry
FORMAT_2_KEYS = frozenset({"message", "upstream"})
UPSTREAM_SCHEMES = ("https://", "http://")
# Bounds on a baseline file, checked before it is parsed: it is input from anyone.
MAX_BASELINE_BYTES = 64 * 1024 * 1024


class Verdict(StrEnum):
    OK = "ok"  # passed, skipped, or a non-gating level
    EXPECTED = "expected"  # a gating failure the baseline lists
    UNEXPECTED = "unexpected"  # a gating failure the baseline does not list
    STALE = "stale"  # the baseline lists it, but it passed
    # A gating failure that passed when run again, or a pass of a case the baseline marks flaky:
    # reported, not gating.
    FLAKY = "flaky"


class BaselineError(ValueError):
    """A baseline file that cannot be read; the message names the file and the problem."""


@dataclass
class Baseline:
    """Expected must-level failures per implementation and version (see the module docstring)."""

    expected: Entries = field(default_factory=dict)
    # Former case and row ids to current ones: an entry, or a row, under a former id is the
    # current id's (an entry under the current id wins over one under a former id).
    renames: Renames = field(default_factory=Renames, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.expected = _renamed(self.expected, self.renames)

    @classmethod
    def load(
        cls, path: Path, *, missing_ok: bool = False, renames: Renames | None = None
    ) -> Baseline:
        """The baseline in ``path``; an empty one when it does not exist and ``missing_ok`` (a
        baseline update creates it), else a ``BaselineError``: a misspelt path must not pass as
        "nothing expected". Entries under former ids are read as the current ids' by
        ``renames`` (default: the former ids the bundled vectors keep)."""
        renames = bundled_renames() if renames is None else renames
        if not path.exists():
            if missing_ok:
                return cls(renames=renames)
            raise BaselineError(
                f"{path}: no such baseline (create it with --baseline-update --baseline {path})"
            )
        data = _read(path)
        found = data.get("format") if isinstance(data, dict) else None
        expected = data.get("expected_failures") if isinstance(data, dict) else None
        if found == FORMAT_1 and _is_table(expected, depth=2, leaf=_is_format_2_entry):
            return cls(_classed(_from_format_1(path, expected)), renames)
        if found == FORMAT_2 and _is_table(expected, depth=3, leaf=_is_format_2_entry):
            return cls(_classed(expected), renames)
        if isinstance(expected, dict) and any(
            isinstance(versions, dict) and ANY_VERSION in versions for versions in expected.values()
        ):
            raise BaselineError(
                f"{path}: a format-3 entry names its version; '{ANY_VERSION}' is not a version"
            )
        if (error := jsonschema.exceptions.best_match(_validator().iter_errors(data))) is not None:
            where = "/".join(map(str, error.absolute_path)) or "(root)"
            raise BaselineError(
                f"{path}: not a baseline (format {BASELINE_FORMAT!r}, {SCHEMA_PATH.name}): "
                f"at {where}: {error.message}"
            )
        return cls(expected, renames)

    def _own(self, target: str, version: str, case_id: str) -> Entry | None:
        """The entry listed under the row's own id (a former id reads as the current one)."""
        versions = self.expected.get(implementation(target), {})
        cases = versions.get(version, versions.get(ANY_VERSION, {}))
        return cases.get(self.renames.current(case_id))

    def entry(self, target: str, version: str, case_id: str) -> Entry | None:
        """The baseline's entry for the case (or row) at that implementation and version (None:
        not listed). A row over another transport than tcp that has no entry of its own takes
        its tcp row's (``inherited``)."""
        own = self._own(target, version, case_id)
        base, transport = transport_of(case_id)
        if own is not None or transport == DEFAULT_TRANSPORT:
            return own
        return self._own(target, version, base)

    def inherited(self, target: str, version: str, case_id: str) -> bool:
        """Whether the row's entry is its tcp row's: the same deviation seen over another
        transport is the implementation's, listed once (a transport's own failure, one its tcp
        row does not share, gets an entry of its own)."""
        own = self._own(target, version, case_id)
        return own is None and self.entry(target, version, case_id) is not None

    def upstream(self, target: str, version: str, case_id: str) -> str | None:
        """The URL of the implementation's bug report the entry names, if any."""
        entry = self.entry(target, version, case_id)
        return None if entry is None else entry.get("upstream")

    def lists(self, target: str, version: str, case_id: str) -> bool:
        return self.entry(target, version, case_id) is not None

    def verdict(self, row: ResultRow) -> Verdict:
        entry = self.entry(row.target, row.target_version, row.case_id)
        if not gates(row):
            return Verdict.OK
        if row.outcome in FAILING:
            return Verdict.EXPECTED if entry is not None else Verdict.UNEXPECTED
        if row.outcome == "pass" and entry is not None:
            # A known nondeterministic behaviour (class flaky) may pass: that is not stale.
            if entry["class"] == "flaky":
                return Verdict.FLAKY
            # A transport that passes where tcp fails leaves the tcp entry as it is.
            inherited = self.inherited(row.target, row.target_version, row.case_id)
            return Verdict.OK if inherited else Verdict.STALE
        return Verdict.OK

    def updated(
        self, rows: Iterable[ResultRow], statement: Callable[[str], str | None] = lambda c: None
    ) -> Baseline:
        """This baseline with the entries of every (implementation, version) in ``rows``
        replaced by its gating failures, classed: a case that failed in every run of ``rows``
        is a deviation from ``statement(case id)``, the statement the case cites; one that
        failed in some runs and passed in others did not reproduce, so it is flaky, never a
        deviation. A case that was flaky or an upstream bug keeps its class (flaky ones pass
        or fail). Entries of everything else are kept. A row under a former id counts as the
        current id's."""
        failing: dict[tuple[str, str], dict[str, list[ResultRow]]] = {}
        passing: set[tuple[str, str, str]] = set()
        for row in rows:
            key = (implementation(row.target), row.target_version)
            entries = failing.setdefault(key, {})
            case_id = self.renames.current(row.case_id)
            if gates(row) and row.outcome in FAILING:
                entries.setdefault(case_id, []).append(row)
            elif row.outcome == "pass":
                passing.add((*key, case_id))
        fresh = {
            key: {
                case_id: (
                    {"class": "flaky", "reason": reason_of(failed[-1])}
                    if (*key, case_id) in passing
                    else _deviation(reason_of(failed[-1]), _broken(case_id, failed[-1], statement))
                )
                for case_id, failed in entries.items()
            }
            for key, entries in failing.items()
        }
        fresh = {key: _without_inherited(entries) for key, entries in fresh.items()}
        kept = {
            (i, v): cases for i, versions in self.expected.items() for v, cases in versions.items()
        }
        for key, entries in fresh.items():
            old = kept.get(key, {})
            entries |= {c: e for c, e in old.items() if e["class"] == "flaky"}
            for case_id, entry in entries.items():
                if old.get(case_id, {}).get("class") == "upstream-bug":
                    entries[case_id] = old[case_id] | {"reason": entry["reason"]}
        return Baseline(_nested(kept | fresh), self.renames)

    def save(self, path: Path) -> None:
        """Write the baseline: one line per entry, sorted, so a diff shows what changed."""
        path.write_text(_dumps(self.expected), encoding="utf-8")


def _without_inherited(entries: dict[str, Entry]) -> dict[str, Entry]:
    """``entries`` without the rows over another transport whose entry is their tcp row's
    (the tcp entry covers them: ``Baseline.entry``)."""
    return {
        case_id: entry
        for case_id, entry in entries.items()
        if (base := transport_of(case_id))[1] == DEFAULT_TRANSPORT or entries.get(base[0]) != entry
    }


def entry_words(entry: Entry) -> str:
    """A baseline entry as words: its class, its reason and what the class names."""
    named = entry.get("statement") or entry.get("upstream")
    return f"{entry['class']} ({entry['reason']}" + (f", {named})" if named else ")")


SHOWN_CHANGES = 50  # entries an update lists one by one per implementation and version


def update_lines(old: Baseline, new: Baseline) -> list[str]:
    """What a baseline update wrote, per implementation and version: how many entries it added,
    removed, changed (another class, reason or citation) and kept, each by class (the new one,
    the old one for a removed entry); then each added, removed and changed entry."""
    lines = []
    keys = sorted({(i, v) for b in (old, new) for i, vs in b.expected.items() for v in vs})
    for impl, version in keys:
        before = old.expected.get(impl, {}).get(version, {})
        after = new.expected.get(impl, {}).get(version, {})
        added = sorted(set(after) - set(before))
        removed = sorted(set(before) - set(after))
        changed = sorted(c for c in set(after) & set(before) if after[c] != before[c])
        kept = sorted(c for c in set(after) & set(before) if after[c] == before[c])
        counts = ", ".join(
            f"{kind} {len(ids)}{_by_class([side[c] for c in ids])}"
            for kind, ids, side in (
                ("added", added, after),
                ("removed", removed, before),
                ("changed", changed, after),
                ("kept", kept, after),
            )
        )
        listed = [
            *(f"+ {c}: {entry_words(after[c])}" for c in added),
            *(f"- {c}: {entry_words(before[c])}" for c in removed),
            *(f"~ {c}: {entry_words(before[c])} -> {entry_words(after[c])}" for c in changed),
        ]
        lines += [f"{impl} {version}: {counts}", *(f"  {x}" for x in listed[:SHOWN_CHANGES])]
        if len(listed) > SHOWN_CHANGES:
            lines.append(f"  ... and {len(listed) - SHOWN_CHANGES} more (the file has them all)")
    return lines or ["no entries"]


def _by_class(entries: list[Entry]) -> str:
    counted = Counter(entry["class"] for entry in entries)
    return f" ({', '.join(f'{c} {counted[c]}' for c in CLASSES if counted[c])})" if counted else ""


def _dumps(expected: Entries) -> str:
    def key(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)

    def table(items: list[str], indent: str) -> str:
        return "{}" if not items else "{\n" + ",\n".join(items) + f"\n{indent}}}"

    impls = [
        f"    {key(impl)}: "
        + table(
            [
                f"      {key(version)}: "
                + table(
                    [
                        f"        {key(case)}: {json.dumps(e, ensure_ascii=False, sort_keys=True)}"
                        for case, e in sorted(cases.items())
                    ],
                    "      ",
                )
                for version, cases in sorted(versions.items())
            ],
            "    ",
        )
        for impl, versions in sorted(expected.items())
    ]
    return (
        f'{{\n  "format": {key(BASELINE_FORMAT)},\n  "expected_failures": '
        + table(impls, "  ")
        + "\n}\n"
    )


def gates(row: ResultRow) -> bool:
    """Whether a row's failure can fail the gate: a ``must`` case's, or a crash or hang on any
    case (robustness needs no document to say so)."""
    return row.level == GATING_LEVEL or row.category == ROBUSTNESS


def cited_statement(cases: Iterable[Case]) -> Callable[[str], str | None]:
    """The statement a row's case cites first (a row id is ``<vector id>[@<path>]``), or None."""
    first = {case.id: next(iter(case.data.get("requirements") or []), None) for case in cases}
    return lambda row_id: first.get(row_id.partition("@")[0])


def _broken(case_id: str, row: ResultRow, statement: Callable[[str], str | None]) -> str | None:
    """The statement a failing row (of ``case_id``) deviates from: its case's citation; none
    for a crash or a hang, which breaks no sentence (robustness needs none)."""
    return None if row.category == ROBUSTNESS else statement(case_id)


def reason_of(row: ResultRow) -> str:
    """A row's stable reason code: ``robustness`` for a crash or hang, else its outcome."""
    return "robustness" if row.category == ROBUSTNESS else row.outcome


def _deviation(reason: str, statement: str | None) -> Entry:
    return {"class": "deviation", "reason": reason} | (
        {} if statement is None else {"statement": statement}
    )


def _read(path: Path) -> Any:
    """The JSON of a baseline file, its size, encoding and nesting checked before parsing."""
    if not path.is_file():  # a FIFO would block the open, a device read without end
        raise BaselineError(f"{path}: not a regular file")
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BASELINE_BYTES + 1)
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc}") from exc
    if len(raw) > MAX_BASELINE_BYTES:
        raise BaselineError(f"{path}: larger than {MAX_BASELINE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    if json_depth(text) > MAX_BASELINE_DEPTH:
        raise BaselineError(f"{path}: nested deeper than {MAX_BASELINE_DEPTH}")
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or an integer beyond int's digit limit
        raise BaselineError(f"{path}: cannot read baseline: {exc}") from exc


# A baseline is four tables deep; anything much deeper is not one (and would exhaust the parser).
MAX_BASELINE_DEPTH = 16


def _classed(entries: dict[str, dict[str, dict[str, Any]]]) -> Entries:
    """Format-2 entries (a message, or {"message", "upstream"}) as format-3 ones: a flaky mark
    is class flaky, an upstream URL class upstream-bug, anything else a deviation; the reason is
    the outcome the message starts with."""
    out: Entries = {}
    for impl, versions in entries.items():
        for version, cases in versions.items():
            for case_id, old in cases.items():
                message = old if isinstance(old, str) else old["message"]
                flaky = message.startswith(FLAKY_MARK)
                message = message.removeprefix(FLAKY_MARK)
                reason = next((r for r in REASONS if message.startswith(f"{r}:")), "fail")
                if flaky:
                    entry: Entry = {"class": "flaky", "reason": reason}
                elif isinstance(old, dict) and "upstream" in old:
                    entry = {"class": "upstream-bug", "reason": reason, "upstream": old["upstream"]}
                else:
                    entry = _deviation(reason, None)
                out.setdefault(impl, {}).setdefault(version, {})[case_id] = entry
    return out


def _renamed(expected: Entries, renames: Renames) -> Entries:
    """``expected`` with each entry under a former case or row id under the current id; where
    both are listed, the entry under the current id."""
    out: Entries = {}
    for impl, versions in expected.items():
        for version, cases in versions.items():
            current: dict[str, Entry] = {}
            # Former ids first, so that an entry under the current id has the last word.
            for case_id, entry in sorted(
                cases.items(), key=lambda c: renames.current(c[0]) == c[0]
            ):
                current[renames.current(case_id)] = entry
            out.setdefault(impl, {})[version] = dict(sorted(current.items()))
    return out


def _nested(flat: dict[tuple[str, str], dict[str, Entry]]) -> Entries:
    """{(implementation, version): cases} as sorted nested tables, without empty entries."""
    out: Entries = {}
    for (impl, version), cases in sorted(flat.items()):
        if cases:
            out.setdefault(impl, {})[version] = dict(sorted(cases.items()))
    return out


def _from_format_1(path: Path, by_target: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A format-1 baseline ({target: cases}) in format 2: each target's entry becomes its
    implementation's entry for the version its spec pins, else for every version (``*``, what a
    target's entry meant). Two targets that land on one entry must list the same cases."""
    flat: dict[tuple[str, str], dict[str, Any]] = {}
    origin: dict[tuple[str, str], str] = {}
    for target, cases in by_target.items():
        key = (implementation(target), spec_version(target) or ANY_VERSION)
        if key in flat and set(flat[key]) != set(cases):
            raise BaselineError(
                f"{path}: format-1 targets {origin[key]!r} and {target!r} are both "
                f"{key[0]} version {key[1]} but list different cases; split them by version "
                f"by hand, or write a new baseline with --baseline-update --baseline FILE"
            )
        flat[key], origin[key] = {**cases, **flat.get(key, {})}, origin.get(key, target)
    return _nested(flat)


def _is_upstream(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(UPSTREAM_SCHEMES)


def _is_format_2_entry(value: Any) -> bool:
    """A message, or {"message": text, "upstream": an http(s) URL} (upstream optional)."""
    if isinstance(value, str):
        return True
    return (
        isinstance(value, dict)
        and isinstance(value.get("message"), str)
        and set(value) <= FORMAT_2_KEYS
        and _is_upstream(value.get("upstream", UPSTREAM_SCHEMES[0]))
    )


@cache
def _validator() -> jsonschema.protocols.Validator:
    """The format-3 schema's validator (the schema is the format's one definition)."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def _is_table(value: Any, *, depth: int, leaf: Callable[[Any], bool]) -> bool:
    """Nested string-keyed tables ``depth`` deep with entries (``leaf``) as leaves."""
    if depth == 0:
        return leaf(value)
    return isinstance(value, dict) and all(
        _is_table(v, depth=depth - 1, leaf=leaf) for v in value.values()
    )


def flaky_message(failures: list[str], last: str) -> str:
    """The row message of a gating failure that passed when run again: the earlier attempts'
    ``outcome: message`` (oldest first), then the passing attempt's message."""
    earlier = "; ".join(f"attempt {n}: {failure}" for n, failure in enumerate(failures, 1))
    return f"flaky: passed on attempt {len(failures) + 1} after {earlier}" + (
        f"; then: {last}" if last else ""
    )


# The start of the row message of a gating failure that failed every time it was run again.
_FAILED_EVERY = re.compile(r"failed (\d+) of \1 attempts; last: ")


def failed_message(count: int, last: str) -> str:
    """The row message of a case that failed on each of its ``count`` attempts (reruns were
    tried): the count, then the last attempt's message."""
    return f"failed {count} of {count} attempts; last: {last}"


def attempts_made(message: str) -> int:
    """How many times a failing row's case ran: the count its message starts with when it was
    run again (failed_message), else 1."""
    found = _FAILED_EVERY.match(message)
    return int(found.group(1)) if found else 1


class Attempt(Protocol):
    """A result a case can be run again for: a dataclass with an outcome and a message."""

    outcome: str
    message: str


A = TypeVar("A", bound=Attempt)


def attempts(
    first: A, again: Callable[[], A], reruns: int, stop: Callable[[A], bool] = lambda a: False
) -> tuple[A, bool]:
    """``first``, and while the case fails (unless ``stop`` says running it again is pointless)
    ``again()``, up to ``reruns`` more times: the last result, and whether it passed after
    failing (flaky; its message then names each failed attempt, see flaky_message). One that
    failed every time it ran says how often (failed_message): "not run again" and "run again,
    failed again" read differently."""
    result, failures = first, []
    while result.outcome in FAILING and len(failures) < reruns and not stop(result):
        failures.append(f"{result.outcome}: {result.message}")
        result = again()
    if failures and result.outcome == "pass":
        return replace(result, message=flaky_message(failures, result.message)), True  # type: ignore[type-var]
    if failures and result.outcome in FAILING:
        message = failed_message(len(failures) + 1, result.message)
        return replace(result, message=message), False  # type: ignore[type-var]
    return result, False


def gate_fails(verdicts: Iterable[Verdict]) -> bool:
    return any(v in (Verdict.UNEXPECTED, Verdict.STALE) for v in verdicts)
