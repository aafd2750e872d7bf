"""What a run prints: its progress (a bar on a terminal, lines in a log) and the closing summary
and verdict."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO

from .gate import FLAKY_MARK, Verdict, attempts_made
from .results import LEVELS, OUTCOMES, ResultRow

# Gating problems the closing summary lists one by one (each message is bounded already).
SHOWN_PROBLEMS = 50
SHOWN_GATING = 10  # gating rows the closing verdict names (the summary above lists 50)
ALL_LEVELS = "all"  # the level column of the short table, which adds the levels up
# What flaky means, on the console as in the report: a failure that did not reproduce.
FLAKY_MEANS = (
    "flaky (a failure that did not reproduce: failed, then passed when run again, or a case the "
    "baseline marks flaky passed; not gating)"
)
_COLUMN = {Verdict.EXPECTED: "baselined", Verdict.FLAKY: "flaky"}
_SAID = {  # the verdicts the summary lists case by case, and how it says them
    Verdict.UNEXPECTED: "unexpected failure",
    Verdict.STALE: "baseline is stale (passes)",
    Verdict.FLAKY: "flaky",
}


class Progress:
    """Progress on stderr, one format for the whole run: the rows done of the rows expected, the
    time since the start, and what is happening. On a terminal it is a one-line bar redrawn in
    place; elsewhere (a CI log) it is a line every ``every_n`` rows, and at least every
    ``every_s`` seconds even while no row finishes (a driver build, the report): a heartbeat
    thread, started by the first step or timed phase and stopped by ``finish``, writes it, since
    a redrawn bar in a log is one endless line and silence there looks like a hang.

    ``total`` is what the caller expects; ``expect`` raises it when more rows turn out to come.
    A total of 0 leaves the rows out of the line (a phase with no rows, e.g. the report alone)."""

    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        width: int = 30,
        *,
        every_s: float = 15.0,
        every_n: int = 100,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool = True,
    ) -> None:
        self.total = max(total, 0)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = self.stream.isatty()
        self.every_s, self.every_n, self.clock = every_s, every_n, clock
        self.per_target: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self._started = clock()
        self._last = (0, self._started)  # rows done and the time at the last line (or redraw)
        self._label = ""  # the last row's label, shown on the bar
        self._phases: list[tuple[str, float]] = []  # the timed phases running, innermost last
        self._lock = threading.RLock()  # the heartbeat thread writes too
        self._heartbeat = heartbeat
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def expect(self, rows: int) -> None:
        """``rows`` more rows than the total said (a phase whose rows are known only now)."""
        with self._lock:
            self.total += max(rows, 0)

    def step(self, target: str, label: str, failed: bool) -> None:
        self._start_heartbeat()
        with self._lock:
            self.done += 1
            self.total = max(self.total, self.done)
            self.per_target[target] += 1
            self.failed[target] += failed
            self._label = ("! " if failed else "  ") + label
            if self.enabled:
                self._draw()
            elif self.done - self._last[0] >= self.every_n or self._due():
                self._line(self._counts())

    def beat(self) -> None:
        """What the heartbeat does: when ``every_s`` seconds passed without a line, one line
        saying what runs (and for how long) or, between phases, the counts; on a terminal the
        bar, with the phase's seconds."""
        with self._lock:
            if self.enabled:
                self._draw()
            elif self._due():
                if self._phases:
                    what, since = self._phases[-1]
                    self._line(f"{what}: running for {_duration(self.clock() - since)}")
                else:
                    self._line(self._counts())

    def note(self, text: str) -> None:
        """``text`` on a line of its own (below the bar, which the next step redraws)."""
        with self._lock:
            self._clear()
            self.stream.write(text + "\n")
            self.stream.flush()

    @contextmanager
    def timed(self, what: str) -> Iterator[None]:
        """A line when ``what`` starts and one when it ends, with its seconds, and the heartbeat's
        lines between: a driver build, a client's run or the report take minutes, with no row
        finishing to show the run is alive. A phase after ``finish`` stops its heartbeat again."""
        started_here = self._start_heartbeat()
        since = self.clock()
        with self._lock:
            self._phases.append((what, since))
            self._line(f"{what}: started")
        try:
            yield
        except BaseException:
            self._end_phase(f"{what}: failed after {_duration(self.clock() - since)}")
            raise
        finally:
            if started_here:
                self._stop_heartbeat()
        self._end_phase(f"{what}: done in {_duration(self.clock() - since)}")

    def finish(self) -> None:
        """The last counts (off a terminal) and the bar cleared; the heartbeat stops."""
        self._stop_heartbeat()
        with self._lock:
            if not self.enabled and self.done > self._last[0]:
                self._line(self._counts())
            self._clear()

    def _end_phase(self, text: str) -> None:
        with self._lock:
            self._phases.pop()
            self._line(text)

    def _due(self) -> bool:
        return self.clock() - self._last[1] >= self.every_s

    def _head(self) -> str:
        """The part every line starts with: rows done of the total, and the time so far."""
        rows = f"{self.done}/{self.total} rows, " if self.total else ""
        return f"{rows}{_duration(self.clock() - self._started)}"

    def _counts(self) -> str:
        return ", ".join(
            f"{t} {n}" + (f" ({self.failed[t]} unexpected)" if self.failed[t] else "")
            for t, n in self.per_target.items()
        )

    def _line(self, text: str) -> None:
        """One progress line: on a terminal above the bar, which is redrawn under it."""
        self.note(f"progress: {self._head()}: {text}")
        self._last = (self.done, self.clock())
        if self.enabled:
            self._draw()

    def _draw(self) -> None:
        filled = self.width * self.done // self.total if self.total else 0
        bar = "#" * filled + "-" * (self.width - filled)
        doing = self._label
        if self._phases:
            what, since = self._phases[-1]
            doing = f"{what} {_duration(self.clock() - since)}"
        self.stream.write(f"\r[{bar}] {self._head()} {doing[:40]:<40}")
        self.stream.flush()
        self._last = (self.done, self.clock())

    def _clear(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * (self.width + 80) + "\r")
            self.stream.flush()

    def _start_heartbeat(self) -> bool:
        """Start the heartbeat thread unless it runs (or is off): whether this call started it."""
        with self._lock:
            if not self._heartbeat or self._thread is not None:
                return False
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._beating, args=(self._stop,), name="progress", daemon=True
            )
            self._thread.start()
            return True

    def _beating(self, stop: threading.Event) -> None:
        while not stop.wait(self._wait()):
            self.beat()

    def _wait(self) -> float:
        """Seconds until the heartbeat is due: on a terminal the bar's seconds tick; in a log the
        next line is due ``every_s`` after the last one, whatever wrote that."""
        if self.enabled:
            return min(self.every_s, 1.0)
        with self._lock:
            return max(0.01, self._last[1] + self.every_s - self.clock())

    def _stop_heartbeat(self) -> None:
        with self._lock:
            thread, stop = self._thread, self._stop
            self._thread = self._stop = None
        if thread is not None and stop is not None:
            stop.set()
            thread.join()


def _duration(seconds: float) -> str:
    """``seconds`` as a person reads them in a log: 9.5s, 4m05s, 1h02m."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def _said(row: ResultRow, verdict: Verdict) -> str:
    """How a listed row is introduced; an unexpected failure says whether it was run again (its
    message then starts with how many attempts failed: gate.failed_message)."""
    once = verdict is Verdict.UNEXPECTED and attempts_made(row.message) == 1
    return _SAID[verdict] + (" (not run again)" if once else "")


def summary(results: Iterable[tuple[ResultRow, Verdict]], *, full: bool = False) -> str:
    """A table of counts per target (per target and level when ``full``), then every gating
    problem and every flaky case (not gating, but never hidden) with its message."""
    counts: Counter[tuple[str, str, str]] = Counter()
    problems: list[tuple[ResultRow, Verdict]] = []
    targets: dict[str, str] = {}
    for row, verdict in results:
        targets.setdefault(row.target, row.target_version)
        columns_of_row = [row.outcome, *([_COLUMN[verdict]] if verdict in _COLUMN else [])]
        for column in columns_of_row:
            counts[(row.target, row.level, column)] += 1
            counts[(row.target, ALL_LEVELS, column)] += 1
        if verdict in _SAID:
            problems.append((row, verdict))
    columns = (*OUTCOMES, *_COLUMN.values())
    name_width = max([len("target"), *(len(f"{t} ({v})") for t, v in targets.items())])
    lines = [f"{'target':<{name_width}}  {'level':<6} " + " ".join(f"{c:>9}" for c in columns)]
    for target, version in targets.items():
        for level in LEVELS if full else (ALL_LEVELS,):
            if not any(counts[(target, level, o)] for o in OUTCOMES):
                continue
            cells = " ".join(f"{counts[(target, level, c)]:>9}" for c in columns)
            lines.append(f"{f'{target} ({version})':<{name_width}}  {level:<6} {cells}")
    flaky = [(row, verdict) for row, verdict in problems if verdict is Verdict.FLAKY]
    gating = [(row, verdict) for row, verdict in problems if verdict is not Verdict.FLAKY]
    lines += _listed(gating)
    if flaky:
        lines.append(f"{len(flaky)} {FLAKY_MEANS}:")
        lines += _listed(flaky)
    return "\n".join(lines)


def verdict_lines(results: Iterable[tuple[ResultRow, Verdict]], code: int, reruns: int) -> str:
    """The lines that close a run, the last thing it prints: what was run again and how that
    ended, the gating rows by name, and the exit code with what it means."""
    judged = list(results)
    said = Counter(verdict for _, verdict in judged)
    rerun_passed = sum(
        verdict is Verdict.FLAKY and row.message.startswith(FLAKY_MARK) for row, verdict in judged
    )
    lines = [
        f"rerun: each gating failure beyond the baseline ran up to {reruns} more time(s): "
        f"{rerun_passed} passed on a rerun (flaky), {said[Verdict.UNEXPECTED]} still fail"
        if reruns
        else "rerun: none (--rerun-failures 0): a failure is judged on its first attempt"
    ]
    gating = [(row, v) for row, v in judged if v in (Verdict.UNEXPECTED, Verdict.STALE)]
    lines += [
        f"gating: {row.target}: {row.case_id}: {_SAID[v]}" for row, v in gating[:SHOWN_GATING]
    ]
    if len(gating) > SHOWN_GATING:
        lines.append(f"gating: ... and {len(gating) - SHOWN_GATING} more (listed above)")
    counts = (
        f"{len(gating)} gating rows ({said[Verdict.UNEXPECTED]} unexpected failures, "
        f"{said[Verdict.STALE]} stale baseline entries), {said[Verdict.EXPECTED]} baselined "
        f"failures, {said[Verdict.FLAKY]} flaky"
    )
    lines.append(f"verdict: exit {code}: {_exit_meaning(code, bool(gating))}; {counts}")
    return "\n".join(lines)


def _exit_meaning(code: int, gated: bool) -> str:
    if code == 0:
        return "passed: no must or robustness failure beyond the baseline"
    if code == 1:
        if gated:
            return "failed: must or robustness rows beyond the baseline (gating, above)"
        return "failed: the report found invalid rows (listed above)"
    if code == 2:
        return "usage or vector problems (listed above); the cases they name did not run"
    return "no report could be written (the reason is above); the results are complete"


def _listed(found: list[tuple[ResultRow, Verdict]]) -> list[str]:
    lines = [
        f"{_said(row, verdict)}: {row.target}: {row.case_id}: {row.outcome}: {row.message}"
        for row, verdict in found[:SHOWN_PROBLEMS]
    ]
    if len(found) > SHOWN_PROBLEMS:
        lines.append(f"... and {len(found) - SHOWN_PROBLEMS} more (every row is in the results)")
    return lines
