"""Waits derived from observed round trips: never longer than the fixed wait they replace,
never shorter than their floor, and growing with a slow machine."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.harness.clients.patience import (
    FLOOR,
    LOOK,
    LOOK_FLOOR,
    PATIENCE,
    RoundTrips,
    look_for_more,
    patience,
)

seconds = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


@given(seconds, st.floats(min_value=0.5, max_value=5.0))
def test_a_wait_stays_between_its_floor_and_the_fixed_wait(observed: float, cap: float) -> None:
    assert FLOOR <= patience(observed, cap) <= cap


def test_nothing_observed_waits_the_fixed_time() -> None:
    assert patience(None, 2.0) == 2.0


def test_a_wait_grows_with_the_round_trip() -> None:
    assert patience(0.001, 2.0) == FLOOR
    assert patience(0.02, 2.0) == PATIENCE * 0.02
    assert patience(0.1, 2.0) == 2.0


def test_round_trips_judge_by_the_slower_of_the_latest_and_the_median() -> None:
    trips = RoundTrips()
    assert trips.typical() is None
    assert trips.add(0.002) == 0.002
    trips.add(0.002)
    assert trips.add(0.5) == 0.5  # the machine just got slow: the latest counts
    assert trips.add(0.001) == 0.002  # one fast round trip does not shorten waits below the median
    assert trips.typical() == 0.002


def test_the_look_for_late_events_lasts_as_long_as_the_awaited_ones_took() -> None:
    assert look_for_more(0.001) == LOOK_FLOOR
    assert look_for_more(0.03) == 0.03
    assert look_for_more(2.0) == LOOK
