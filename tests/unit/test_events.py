"""What each EventKind says of the money: one table, every kind placed in it."""

from __future__ import annotations

from payhooks.events import _TRAITS, EventKind
from payhooks.service.shop.states import TARGET, PaymentStatus, target


def test_every_event_kind_is_classified() -> None:
    assert set(_TRAITS) == set(EventKind)


def test_only_a_capture_and_a_refund_move_money() -> None:
    moving = {kind for kind in EventKind if kind.moves_money}
    assert moving == {EventKind.PAYMENT_CAPTURED, EventKind.REFUND_PROCESSED}


def test_an_authorisation_and_a_capture_pay_for_an_order() -> None:
    paying = {kind for kind in EventKind if kind.pays}
    assert paying == {EventKind.PAYMENT_AUTHORIZED, EventKind.PAYMENT_CAPTURED}


def test_a_capture_a_failure_and_a_refund_are_final() -> None:
    final = {kind for kind in EventKind if kind.is_final}
    assert final == {
        EventKind.PAYMENT_CAPTURED,
        EventKind.PAYMENT_FAILED,
        EventKind.REFUND_PROCESSED,
    }


def test_only_a_processed_refund_is_a_refund() -> None:
    assert {kind for kind in EventKind if kind.is_refund} == {EventKind.REFUND_PROCESSED}


def test_every_kind_but_other_and_a_settlement_moves_the_shops_payment() -> None:
    assert set(TARGET) == set(EventKind) - {EventKind.OTHER, EventKind.SETTLEMENT}
    assert target(EventKind.OTHER) is None
    assert target(EventKind.SETTLEMENT) is None
    assert target(EventKind.REFUND_PROCESSED) is PaymentStatus.REFUNDED
