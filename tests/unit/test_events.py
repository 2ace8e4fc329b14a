"""What each EventKind says of the money: one table, every kind placed in it."""

from __future__ import annotations

from payhooks.events import _TRAITS, EventKind
from payhooks.service.shop.states import TARGET, PaymentStatus, target


def test_every_event_kind_is_classified() -> None:
    assert set(_TRAITS) == set(EventKind)


def test_only_a_capture_a_refund_and_a_lost_dispute_move_money() -> None:
    moving = {kind for kind in EventKind if kind.moves_money}
    assert moving == {
        EventKind.PAYMENT_CAPTURED,
        EventKind.REFUND_PROCESSED,
        EventKind.DISPUTE_LOST,
    }


def test_an_authorisation_and_a_capture_pay_for_an_order() -> None:
    paying = {kind for kind in EventKind if kind.pays}
    assert paying == {EventKind.PAYMENT_AUTHORIZED, EventKind.PAYMENT_CAPTURED}


def test_a_capture_a_failure_a_refund_and_a_decided_dispute_are_final() -> None:
    final = {kind for kind in EventKind if kind.is_final}
    assert final == {
        EventKind.PAYMENT_CAPTURED,
        EventKind.PAYMENT_FAILED,
        EventKind.REFUND_PROCESSED,
        EventKind.DISPUTE_WON,
        EventKind.DISPUTE_LOST,
        EventKind.DISPUTE_CLOSED,
    }


def test_only_a_processed_refund_is_a_refund() -> None:
    assert {kind for kind in EventKind if kind.is_refund} == {EventKind.REFUND_PROCESSED}


def test_the_dispute_kinds_are_the_disputes_and_nothing_else() -> None:
    disputed = {kind for kind in EventKind if kind.is_dispute}
    assert disputed == {kind for kind in EventKind if kind.value.startswith("dispute_")}
    assert len(disputed) == 6
    assert not any(kind.pays or kind.is_refund for kind in disputed)


def test_every_kind_but_other_a_settlement_and_the_disputes_moves_the_shops_payment() -> None:
    disputed = {kind for kind in EventKind if kind.is_dispute}
    assert set(TARGET) == set(EventKind) - {EventKind.OTHER, EventKind.SETTLEMENT} - disputed
    assert target(EventKind.OTHER) is None
    assert target(EventKind.SETTLEMENT) is None
    assert all(target(kind) is None for kind in disputed)
    assert target(EventKind.REFUND_PROCESSED) is PaymentStatus.REFUNDED
