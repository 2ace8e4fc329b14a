"""The payment state machine: forward only, with the documented failed -> success exception."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from payhooks.service.shop.states import PaymentStatus as S
from payhooks.service.shop.states import advance

ORDER = [S.CREATED, S.AUTHORIZED, S.CAPTURED, S.REFUNDED]


def test_captured_never_goes_back_to_authorized():
    assert advance(S.CAPTURED, S.AUTHORIZED) is None


def test_failure_after_capture_is_ignored():
    assert advance(S.CAPTURED, S.FAILED) is None


def test_failed_payment_may_still_be_captured():
    assert advance(S.FAILED, S.CAPTURED) is S.CAPTURED


def test_failed_payment_may_still_be_authorized():
    assert advance(S.FAILED, S.AUTHORIZED) is S.AUTHORIZED


def test_failed_payment_may_be_refunded_since_a_refund_proves_a_capture():
    assert advance(S.FAILED, S.REFUNDED) is S.REFUNDED


def test_failed_payment_never_goes_back_to_created():
    assert advance(S.FAILED, S.CREATED) is None


def test_first_report_sets_status():
    assert advance(None, S.CAPTURED) is S.CAPTURED


def test_repeated_report_changes_nothing():
    assert advance(S.AUTHORIZED, S.AUTHORIZED) is None


@given(st.lists(st.sampled_from(list(S)), min_size=1, max_size=30))
def test_refunded_is_terminal(reports):
    status = S.REFUNDED
    for report in reports:
        status = advance(status, report) or status
    assert status is S.REFUNDED


@given(st.lists(st.sampled_from(list(S)), min_size=1, max_size=30))
def test_status_only_moves_forward_except_out_of_failed(reports):
    status = None
    for report in reports:
        new = advance(status, report)
        if (
            new is not None
            and status is not None
            and status is not S.FAILED
            and new is not S.FAILED
        ):
            assert ORDER.index(new) > ORDER.index(status)
        if new is S.FAILED:
            assert status in (None, S.CREATED, S.AUTHORIZED)
        if status is S.FAILED and new is not None:
            assert new in (S.AUTHORIZED, S.CAPTURED, S.REFUNDED)
        status = new or status
