"""Version strips: per implementation, its cases × its versions, from each target's latest run.

A version is judged by the newest latest-run among the targets that report it (the wheel pinned
at 2.12.8 and a binary at 2.12.8 are one column). A case is shown when it fails at some version
or its outcome changes between versions; a case with the same passing (or skipped) outcome at
every version is only counted, which keeps a strip of 1,700 client cases readable.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar

from ..conformance.verdicts import level_rank
from ..harness.implementations import implementation
from .model import FlakyChange, Run, Strip, StripCase

QUIET = frozenset({"pass", "skip"})  # outcomes a case may keep at every version and be counted
Row = tuple[str, str, str, str, str]  # target, case id, group, level, outcome
T = TypeVar("T")


def version_order(version: str) -> tuple[int, ...]:
    """Versions compare by their numbers: 2.9.10 < 2.10.25."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def newest_by_version(items: Iterable[T], run_of: Callable[[T], Run]) -> dict[str, T]:
    """Version -> the item whose run is the newest of that version's: the one that judges it."""
    chosen: dict[str, T] = {}
    for item in sorted(items, key=lambda i: (run_of(i).started, run_of(i).run_id)):
        chosen[run_of(item).version] = item
    return chosen


def columns(latest: list[Run], order: Callable[[str], Any]) -> dict[str, dict[str, Run]]:
    """Implementation -> version (in ``order``) -> the run that judges it (the newest)."""
    grouped: dict[str, list[Run]] = defaultdict(list)
    for run in latest:
        grouped[implementation(run.target)].append(run)
    chosen = {impl: newest_by_version(runs, lambda r: r) for impl, runs in grouped.items()}
    return {
        impl: {v: versions[v] for v in sorted(versions, key=lambda v: (order(v), v))}
        for impl, versions in chosen.items()
    }


def strips(rows: Iterable[Row], latest: list[Run], order: Callable[[str], Any]) -> list[Strip]:
    """Pure: the strips from (target, case id, group, level, outcome) rows of ``latest`` runs."""
    by_impl = columns(latest, order)
    column = {
        run.target: (impl, n)
        for impl, versions in by_impl.items()
        for n, run in enumerate(versions.values())
    }
    cases: dict[str, dict[str, tuple[str, str, dict[int, str]]]] = defaultdict(dict)
    for target, case_id, group, level, outcome in rows:
        if target not in column:  # a target whose version another target's newer run judges
            continue
        impl, n = column[target]
        cases[impl].setdefault(case_id, (group, level, {}))[2][n] = outcome
    return [
        _strip(impl, versions, cases.get(impl, {})) for impl, versions in sorted(by_impl.items())
    ]


def _strip(impl: str, versions: dict[str, Run], found: dict[str, tuple[str, str, dict[int, str]]]
           ) -> Strip:  # fmt: skip
    shown, stable = [], Counter[str]()
    width = len(versions)
    for case_id, (group, level, at) in found.items():
        outcomes = tuple(at.get(n) for n in range(width))
        kinds = set(outcomes)
        if len(kinds) == 1 and kinds <= QUIET:
            stable[outcomes[0] or ""] += 1
        else:
            shown.append(StripCase(case_id, group, level, outcomes))
    shown.sort(key=lambda c: (level_rank(c.level), c.group, c.case_id))
    return Strip(
        implementation=impl,
        versions=tuple(versions),
        targets=tuple(run.target for run in versions.values()),
        cases=shown,
        stable=dict(sorted(stable.items())),
    )


def without_noise(found: list[Strip], flaky: Iterable[FlakyChange]) -> list[Strip]:
    """Pure: ``found`` with each flaky change's later version marked unconfirmed in its case's
    row, so that the strip does not show it as a change."""
    unconfirmed: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in flaky:
        unconfirmed[f.change.implementation, f.change.case_id].append(f.change.after_version)
    return [
        replace(
            strip,
            cases=[
                replace(c, unconfirmed=tuple(unconfirmed[key]))
                if (key := (strip.implementation, c.case_id)) in unconfirmed
                else c
                for c in strip.cases
            ],
        )
        for strip in found
    ]


def changed(outcomes: tuple[str | None, ...]) -> list[bool]:
    """Per version: the outcome differs from the one at the version before that ran the case."""
    marks, before = [], None
    for outcome in outcomes:
        marks.append(before is not None and outcome is not None and outcome != before)
        before = outcome if outcome is not None else before
    return marks
