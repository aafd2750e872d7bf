"""How long to wait for a client library, from what it was just seen to take.

A check that waits for something a library should do (answer a PING, deliver a message) or
should not do (deliver an unfinished operation) used to wait a fixed time: 2 s for a PONG that
never comes. A library that answers at all answers within a few round trips through its driver,
and a round trip is measured on the same connection just before (a flush). So a wait ends after
PATIENCE times the round trip observed, never less than a floor and never more than the fixed
wait it replaces; a slow machine makes round trips slow too, and the waits grow with them.
"""

from __future__ import annotations

import statistics

PATIENCE = 50  # round trips a library is given to do what it does within one when all is well
FLOOR = 0.25  # seconds: the shortest wait for something the library should do
QUIET_FLOOR = 0.1  # seconds: the shortest watch for something it should not do
LOOK = 0.05  # seconds: the longest look for late events once all awaited ones came
LOOK_FLOOR = 0.02  # seconds: the shortest such look
# Seconds without any sign of life (no PONG, no close, no error) before a library is called hung.
# A hang is a robustness failure, a claim made at any level, so it waits this full deadline, never
# the adaptive wait above: a library that is merely slow on a loaded machine is not hung. It is
# also the deadline of a driver command that asks nothing slow (the schema's "deadline"s, which
# harness/drivers/README.md tabulates: tests/test_driver_deadlines.py keeps them equal).
HANG_AFTER = 3.0


def patience(observed: float | None, cap: float, floor: float = FLOOR) -> float:
    """Seconds to wait for what a library does in about ``observed`` seconds when all is well:
    PATIENCE times that, between ``floor`` and ``cap`` (the fixed wait; also when nothing was
    observed yet)."""
    if observed is None:
        return cap
    return min(cap, max(floor, PATIENCE * observed))


class RoundTrips:
    """The round trips seen on one path: a wait is judged by the slower of the latest one and
    the path's median, so one fast round trip on a loaded machine does not shorten it, and one
    slow outlier does not lengthen every wait after it."""

    def __init__(self) -> None:
        self._seen: list[float] = []

    def add(self, seconds: float) -> float:
        """Record a round trip; the one to judge waits by from now on."""
        self._seen.append(seconds)
        return self.typical(seconds)

    def typical(self, latest: float | None = None) -> float | None:
        """The slower of ``latest`` (default: the last seen) and the median; None before any."""
        if not self._seen:
            return None
        last = self._seen[-1] if latest is None else latest
        return max(last, statistics.median(self._seen))


def look_for_more(took: float) -> float:
    """Seconds to look for late events (one delivery too many, an error) after what was awaited
    came ``took`` seconds after the bytes that caused it: anything else those bytes cause comes
    about as fast. Between LOOK_FLOOR and LOOK."""
    return min(LOOK, max(LOOK_FLOOR, took))
