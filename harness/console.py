"""What a run prints: a progress bar on a terminal and the closing summary."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO

from nats_conformance.harness.gate import Verdict, attempts_made
from nats_conformance.harness.results import LEVELS, OUTCOMES, ResultRow

# Gating problems the closing summary lists one by one (each message is bounded already).
SHOWN_PROBLEMS = 50
_COLUMN = {Verdict.EXPECTED: "baselined", Verdict.FLAKY: "flaky"}
_SAID = {  # the verdicts the summary lists case by case, and how it says them
    Verdict.UNEXPECTED: "unexpected failure",
    Verdict.STALE: "baseline is stale (passes)",
    Verdict.FLAKY: "flaky",
}


class Progress:
    """Progress on stderr: on a terminal a one-line bar redrawn in place; elsewhere (a CI log) a
    line every ``every_s`` seconds or ``every_n`` cases with the counts per target, since a
    redrawn bar there is one endless line and silence looks like a hang."""

    def __init__(
        self,
        total: int,
        stream: TextIO = sys.stderr,
        width: int = 30,
        *,
        every_s: float = 5.0,
        every_n: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.width = width
        self.enabled = stream.isatty()
        self.every_s, self.every_n, self.clock = every_s, every_n, clock
        self.per_target: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self._last = (0, clock())  # cases done and the time at the last progress line

    def step(self, target: str, label: str, failed: bool) -> None:
        self.done += 1
        self.per_target[target] += 1
        self.failed[target] += failed
        if not self.enabled:
            done, at = self._last
            if self.done - done >= self.every_n or self.clock() - at >= self.every_s:
                self._line()
            return
        filled = self.width * self.done // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        mark = "!" if failed else " "
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {mark} {label[:40]:<40}")
        self.stream.flush()

    def _line(self) -> None:
        counts = ", ".join(
            f"{t} {n}" + (f" ({self.failed[t]} unexpected)" if self.failed[t] else "")
            for t, n in self.per_target.items()
        )
        self.note(f"progress: {self.done}/{self.total} cases: {counts}")
        self._last = (self.done, self.clock())

    def note(self, text: str) -> None:
        """``text`` on a line of its own (below the bar, which the next step redraws)."""
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    @contextmanager
    def timed(self, what: str) -> Iterator[None]:
        """A line when ``what`` starts and one when it ends, with its seconds: a driver build or
        a client's run takes minutes, with no case finishing to show it is alive."""
        self.note(f"{what}: started")
        started = self.clock()
        try:
            yield
        except BaseException:
            self.note(f"{what}: failed after {self.clock() - started:.1f}s")
            raise
        self.note(f"{what}: done in {self.clock() - started:.1f}s")

    def finish(self) -> None:
        if not self.enabled and self.done > self._last[0]:
            self._line()
        self._clear()

    def _clear(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * (self.width + 60) + "\r")
            self.stream.flush()


def _said(row: ResultRow, verdict: Verdict) -> str:
    """How a listed row is introduced; an unexpected failure says whether it was run again (its
    message then starts with how many attempts failed: gate.failed_message)."""
    once = verdict is Verdict.UNEXPECTED and attempts_made(row.message) == 1
    return _SAID[verdict] + (" (not run again)" if once else "")


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
        f"{_said(row, verdict)}: {row.target}: {row.case_id}: {row.outcome}: {row.message}"
        for row, verdict in found[:SHOWN_PROBLEMS]
    ]
    if len(found) > SHOWN_PROBLEMS:
        lines.append(f"... and {len(found) - SHOWN_PROBLEMS} more (every row is in the results)")
    return lines
