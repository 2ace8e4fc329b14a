"""The retry policy for serialization conflicts: bounded by attempts and by a window that
keeps every answer inside the gateways' deadline."""

from __future__ import annotations

import pytest

from payhooks.plumbing.retries import ANSWER_DEADLINE_MS, Retries


def test_no_retry_is_left_once_the_attempts_are_spent():
    retries = Retries(attempts=3, window_s=10)
    assert retries.pause(1, 0, draw=0) is not None
    assert retries.pause(2, 0, draw=0) is not None
    assert retries.pause(3, 0, draw=0) is None


def test_a_retry_that_would_begin_past_the_window_is_not_made():
    retries = Retries(attempts=5, window_s=0.5, backoff_s=0.02)
    assert retries.pause(1, 0.45, draw=0) is not None
    assert retries.pause(1, 0.49, draw=1) is None


def test_the_pause_doubles_and_is_jittered_between_half_and_all_of_its_step():
    retries = Retries(attempts=5, window_s=10, backoff_s=0.02)
    assert retries.pause(1, 0, draw=0) == pytest.approx(0.01)
    assert retries.pause(1, 0, draw=1) == pytest.approx(0.02)
    assert retries.pause(3, 0, draw=1) == pytest.approx(0.08)


def test_the_window_leaves_room_for_one_whole_attempt_before_the_deadline():
    retries = Retries.within(pool_timeout_ms=1000, transaction_timeout_ms=3500)
    assert retries.window_s == pytest.approx(0.5)
    assert retries.window_s * 1000 + 1000 + 3500 <= ANSWER_DEADLINE_MS


def test_timeouts_that_fill_the_deadline_leave_no_window():
    assert Retries.within(pool_timeout_ms=2000, transaction_timeout_ms=4000).window_s == 0


@pytest.mark.parametrize("bad", [{"attempts": 0}, {"window_s": -1}, {"backoff_s": -0.1}])
def test_a_policy_with_no_attempt_or_negative_time_is_refused(bad):
    with pytest.raises(ValueError, match="at least one attempt"):
        Retries(**bad)
