"""Lanes run side by side and hand their items over lane after lane: the order of a run's rows
does not depend on how the lanes are timed; a lane's error reaches the caller; a stopped run
stops its lanes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nats_conformance.harness.runtime.lanes import in_order

# Per lane, the pause (in ms) before each of its items.
LANES = st.lists(st.lists(st.integers(0, 3), max_size=5), max_size=5)


def _lane(index: int, pauses: list[int]) -> Iterator[tuple[int, int]]:
    for at, pause in enumerate(pauses):
        time.sleep(pause / 1000)
        yield index, at


@settings(deadline=None, max_examples=40)
@given(LANES, st.integers(0, 4))
def test_items_come_lane_after_lane_however_the_lanes_are_timed(
    lanes: list[list[int]], at_once: int
) -> None:
    work = [lambda i=i, p=p: _lane(i, p) for i, p in enumerate(lanes)]
    expected = [(i, at) for i, pauses in enumerate(lanes) for at in range(len(pauses))]
    assert list(in_order(work, at_once=at_once)) == expected


def test_the_lanes_run_side_by_side_and_at_once_bounds_them() -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def lane() -> Iterator[int]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        yield 1

    assert list(in_order([lane] * 4)) == [1] * 4
    assert most == 4
    most = 0
    assert list(in_order([lane] * 4, at_once=2)) == [1] * 4
    assert most == 2


def test_a_lanes_error_comes_after_the_items_before_it() -> None:
    def failing() -> Iterator[str]:
        yield "a"
        raise ValueError("lane broke")

    got: list[str] = []
    with pytest.raises(ValueError, match="lane broke"):
        for item in in_order([lambda: iter(["first"]), failing, lambda: iter(["never"])]):
            got.append(item)
    assert got == ["first", "a"]


def test_closing_the_run_stops_every_lane_after_its_item_in_hand() -> None:
    produced: list[int] = []

    def endless(index: int) -> Iterator[int]:
        while True:
            produced.append(index)
            time.sleep(0.001)
            yield index

    run = in_order([lambda: endless(0), lambda: endless(1)])
    assert next(run) == 0
    run.close()  # returns once both threads ended
    count = len(produced)
    time.sleep(0.02)
    assert len(produced) == count
