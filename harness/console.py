"""What a run prints: a progress bar on a terminal and the closing summary."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from typing import TextIO

from harness.gate import Verdict
from harness.results import LEVELS, OUTCOMES, ResultRow

# Gating problems the closing summary lists one by one (each message is bounded already).
SHOWN_PROBLEMS = 50
_COLUMN = {Verdict.EXPECTED: "baselined", Verdict.FLAKY: "flaky"}
_SAID = {  # the verdicts the summary lists case by case, and how it says them
    Verdict.UNEXPECTED: "unexpected failure",
    Verdict.STALE: "baseline is stale (passes)",
    Verdict.FLAKY: "flaky",
}


class Progress:
    """A one-line bar on stderr, redrawn in place; silent when stderr is not a terminal."""

    def __init__(self, total: int, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.width = width
        self.enabled = stream.isatty()

    def step(self, label: str, failed: bool) -> None:
        self.done += 1
        if not self.enabled:
            return
        filled = self.width * self.done // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        mark = "!" if failed else " "
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {mark} {label[:40]:<40}")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * (self.width + 60) + "\r")
            self.stream.flush()


def summary(results: Iterable[tuple[ResultRow, Verdict]]) -> str:
    """A table per target and level, then every gating problem and every flaky case (a
    failure that passed when run again: not gating, but never hidden) with its message."""
    counts: Counter[tuple[str, str, str]] = Counter()
    problems: list[tuple[ResultRow, Verdict]] = []
    targets: dict[str, str] = {}
    for row, verdict in results:
        targets.setdefault(row.target, row.target_version)
        counts[(row.target, row.level, row.outcome)] += 1
        if verdict in _COLUMN:
            counts[(row.target, row.level, _COLUMN[verdict])] += 1
        if verdict in _SAID:
            problems.append((row, verdict))
    columns = (*OUTCOMES, *_COLUMN.values())
    name_width = max([len("target"), *(len(f"{t} ({v})") for t, v in targets.items())])
    lines = [f"{'target':<{name_width}}  {'level':<6} " + " ".join(f"{c:>9}" for c in columns)]
    for target, version in targets.items():
        for level in LEVELS:
            if not any(counts[(target, level, o)] for o in OUTCOMES):
                continue
            cells = " ".join(f"{counts[(target, level, c)]:>9}" for c in columns)
            lines.append(f"{f'{target} ({version})':<{name_width}}  {level:<6} {cells}")
    flaky = [(row, verdict) for row, verdict in problems if verdict is Verdict.FLAKY]
    gating = [(row, verdict) for row, verdict in problems if verdict is not Verdict.FLAKY]
    lines += _listed(gating)
    if flaky:
        lines.append(f"{len(flaky)} flaky (failed, then passed when run again; not gating):")
        lines += _listed(flaky)
    return "\n".join(lines)


def _listed(found: list[tuple[ResultRow, Verdict]]) -> list[str]:
    lines = [
        f"{_SAID[verdict]}: {row.target}: {row.case_id}: {row.outcome}: {row.message}"
        for row, verdict in found[:SHOWN_PROBLEMS]
    ]
    if len(found) > SHOWN_PROBLEMS:
        lines.append(f"... and {len(found) - SHOWN_PROBLEMS} more (every row is in the results)")
    return lines
