"""The CI gate: which outcomes fail a run, and the expected-failures baseline.

Only `must` cases can fail the gate; `should`, `may` and `info` outcomes are recorded and
reported, never gating. A `must` case that fails (or cannot be run: `error`) fails the gate
unless the baseline lists it for that implementation and version. A listed case that passes
fails the gate too, so the baseline cannot go stale; `update` rewrites it from a run.

The baseline is keyed by what runs, not by where it runs: {implementation: {version: {case_id:
message}}}, the implementation named by ``harness.implementations`` (the rule the report uses)
and the version being the one the target reports (each row's ``target_version``). So the same
binary at another path, or the same server at another port, meets the same entries. The version
``*`` stands for every version of the implementation without an entry of its own.

An entry is the message, or an object ``{"message": ..., "upstream": "https://..."}`` whose
``upstream`` is the URL of the implementation's own bug report: the report shows it beside the
failure, and ``updated`` keeps it while the case still fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypeVar

from nats_conformance.harness.implementations import implementation, spec_version
from nats_conformance.harness.results import ResultRow

BASELINE_FORMAT = "nats-conformance-baseline/2"
FORMAT_1 = "nats-conformance-baseline/1"  # keyed by target spec; converted when loaded
ANY_VERSION = "*"
# A baseline entry whose message starts with this lists a case the implementation fails only
# sometimes (the row then says so): a pass is reported as flaky, never as a stale baseline.
FLAKY_MARK = "flaky: "
GATING_LEVEL = "must"
FAILING = frozenset({"fail", "error"})
SHIPPED_BASELINE = Path(__file__).resolve().parent / "baseline.json"

# A baseline entry as the file holds it: the message, or {"message": ..., "upstream": URL}.
Entry = str | dict[str, str]
Entries = dict[str, dict[str, dict[str, Entry]]]  # implementation -> version -> case id -> entry
ENTRY_KEYS = frozenset({"message", "upstream"})
UPSTREAM_SCHEMES = ("https://", "http://")


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

    @classmethod
    def load(cls, path: Path, *, missing_ok: bool = False) -> Baseline:
        """The baseline in ``path``; an empty one when it does not exist and ``missing_ok`` (a
        baseline update creates it), else a ``BaselineError``: a misspelt path must not pass as
        "nothing expected"."""
        if not path.exists():
            if missing_ok:
                return cls()
            raise BaselineError(
                f"{path}: no such baseline (create it with --baseline-update --baseline {path})"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise BaselineError(f"{path}: cannot read baseline: {exc}") from exc
        found = data.get("format") if isinstance(data, dict) else None
        expected = data.get("expected_failures") if isinstance(data, dict) else None
        if found == FORMAT_1 and _is_table(expected, depth=2):
            return cls(_from_format_1(path, expected))
        if found != BASELINE_FORMAT or not _is_table(expected, depth=3):
            raise BaselineError(
                f"{path}: not a baseline (format {BASELINE_FORMAT!r} with "
                '"expected_failures": {implementation: {version: {case_id: message}}}; '
                'a message may be {"message": ..., "upstream": "https://..."})'
            )
        return cls(expected)

    def _raw(self, target: str, version: str, case_id: str) -> Entry | None:
        versions = self.expected.get(implementation(target), {})
        return versions.get(version, versions.get(ANY_VERSION, {})).get(case_id)

    def entry(self, target: str, version: str, case_id: str) -> str | None:
        """The baseline's message for the case at that implementation and version (None: not
        listed)."""
        raw = self._raw(target, version, case_id)
        return None if raw is None else message_of(raw)

    def upstream(self, target: str, version: str, case_id: str) -> str | None:
        """The URL of the implementation's bug report the entry names, if any."""
        raw = self._raw(target, version, case_id)
        return None if raw is None else upstream_of(raw)

    def lists(self, target: str, version: str, case_id: str) -> bool:
        return self.entry(target, version, case_id) is not None

    def verdict(self, row: ResultRow) -> Verdict:
        entry = self.entry(row.target, row.target_version, row.case_id)
        if row.level != GATING_LEVEL:
            return Verdict.OK
        if row.outcome in FAILING:
            return Verdict.EXPECTED if entry is not None else Verdict.UNEXPECTED
        if row.outcome == "pass" and entry is not None:
            # A known nondeterministic behaviour (an entry marked flaky) may pass: the entry
            # says so, so passing does not make it stale.
            return Verdict.FLAKY if entry.startswith(FLAKY_MARK) else Verdict.STALE
        return Verdict.OK

    def updated(self, rows: Iterable[ResultRow]) -> Baseline:
        """This baseline with the entry of every (implementation, version) in ``rows`` replaced
        by its failures; the entries of everything else, ``*`` ones included, kept."""
        fresh: dict[tuple[str, str], dict[str, Entry]] = {}
        for row in rows:
            entries = fresh.setdefault((implementation(row.target), row.target_version), {})
            if row.level == GATING_LEVEL and row.outcome in FAILING:
                entries[row.case_id] = f"{row.outcome}: {row.message}"[:300]
        kept = {
            (i, v): cases for i, versions in self.expected.items() for v, cases in versions.items()
        }
        for key, entries in fresh.items():
            old = kept.get(key, {})
            # A case marked flaky stays marked, pass or fail; a failure keeps its upstream URL.
            entries |= {c: e for c, e in old.items() if message_of(e).startswith(FLAKY_MARK)}
            for case_id, message in entries.items():
                url = upstream_of(old[case_id]) if case_id in old else None
                if url is not None and isinstance(message, str):
                    entries[case_id] = {"message": message, "upstream": url}
        return Baseline(_nested(kept | fresh))

    def save(self, path: Path) -> None:
        doc = {"format": BASELINE_FORMAT, "expected_failures": self.expected}
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def message_of(entry: Entry) -> str:
    return entry if isinstance(entry, str) else entry["message"]


def upstream_of(entry: Entry) -> str | None:
    return None if isinstance(entry, str) else entry.get("upstream")


def _nested(flat: dict[tuple[str, str], dict[str, Entry]]) -> Entries:
    """{(implementation, version): cases} as sorted nested tables, without empty entries."""
    out: Entries = {}
    for (impl, version), cases in sorted(flat.items()):
        if cases:
            out.setdefault(impl, {})[version] = dict(sorted(cases.items()))
    return out


def _from_format_1(path: Path, by_target: dict[str, dict[str, Entry]]) -> Entries:
    """A format-1 baseline ({target: cases}) in format 2: each target's entry becomes its
    implementation's entry for the version its spec pins, else for every version (``*``, what a
    target's entry meant). Two targets that land on one entry must list the same cases."""
    flat: dict[tuple[str, str], dict[str, Entry]] = {}
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


def _is_entry(value: Any) -> bool:
    """A message, or {"message": text, "upstream": an http(s) URL} (upstream optional)."""
    if isinstance(value, str):
        return True
    return (
        isinstance(value, dict)
        and "message" in value
        and set(value) <= ENTRY_KEYS
        and all(isinstance(v, str) for v in value.values())
        and value.get("upstream", UPSTREAM_SCHEMES[0]).startswith(UPSTREAM_SCHEMES)
    )


def _is_table(value: Any, *, depth: int) -> bool:
    """Nested string-keyed tables ``depth`` deep with entries (``_is_entry``) as leaves."""
    if depth == 0:
        return _is_entry(value)
    return isinstance(value, dict) and all(_is_table(v, depth=depth - 1) for v in value.values())


def flaky_message(failures: list[str], last: str) -> str:
    """The row message of a gating failure that passed when run again: the earlier attempts'
    ``outcome: message`` (oldest first), then the passing attempt's message."""
    earlier = "; ".join(f"attempt {n}: {failure}" for n, failure in enumerate(failures, 1))
    return f"flaky: passed on attempt {len(failures) + 1} after {earlier}" + (
        f"; then: {last}" if last else ""
    )


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
    failing (flaky; its message then names each failed attempt, see flaky_message)."""
    result, failures = first, []
    while result.outcome in FAILING and len(failures) < reruns and not stop(result):
        failures.append(f"{result.outcome}: {result.message}")
        result = again()
    if failures and result.outcome == "pass":
        return replace(result, message=flaky_message(failures, result.message)), True  # type: ignore[type-var]
    return result, False


def gate_fails(verdicts: Iterable[Verdict]) -> bool:
    return any(v in (Verdict.UNEXPECTED, Verdict.STALE) for v in verdicts)
