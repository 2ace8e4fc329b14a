"""The payment state machine (docs/design.md, "Payment state machine"): forward only, but
out of ``failed``."""

from __future__ import annotations

from enum import StrEnum
from typing import assert_never

from payhooks.events import EventKind


class PaymentStatus(StrEnum):
    CREATED = "created"
    AUTHORIZED = "authorized"
    CAPTURED = "captured"
    REFUNDED = "refunded"
    FAILED = "failed"


_RANK = {
    PaymentStatus.CREATED: 0,
    PaymentStatus.AUTHORIZED: 1,
    PaymentStatus.CAPTURED: 2,
    PaymentStatus.REFUNDED: 3,
}


def target(kind: EventKind) -> PaymentStatus | None:
    """The status an event of ``kind`` reports; None for one that moves no payment. Every
    kind is matched: mypy refuses a new one this does not place."""
    match kind:
        case EventKind.PAYMENT_PENDING:
            return PaymentStatus.CREATED
        case EventKind.PAYMENT_AUTHORIZED:
            return PaymentStatus.AUTHORIZED
        case EventKind.PAYMENT_CAPTURED:
            return PaymentStatus.CAPTURED
        case EventKind.PAYMENT_FAILED:
            return PaymentStatus.FAILED
        case EventKind.REFUND_PROCESSED:
            return PaymentStatus.REFUNDED
        case (
            EventKind.DISPUTE_OPENED
            | EventKind.DISPUTE_UNDER_REVIEW
            | EventKind.DISPUTE_ACTION_REQUIRED
            | EventKind.DISPUTE_WON
            | EventKind.DISPUTE_LOST
            | EventKind.DISPUTE_CLOSED
            | EventKind.OTHER
            | EventKind.SETTLEMENT
        ):
            return None  # a dispute marks the order; a settlement reaches no handler
        case _:
            assert_never(kind)


TARGET = {kind: status for kind in EventKind if (status := target(kind)) is not None}
"""``target`` as a mapping, for the console's replay of stored deliveries."""


def advance(current: PaymentStatus | None, target: PaymentStatus) -> PaymentStatus | None:
    """The status after ``target`` is reported, or None when the report changes nothing.

    A late event never moves a payment backwards. ``failed`` may be followed by an
    authorisation, a capture (late authorisation, UPI retries) or a refund (which proves a
    capture whose report is still on its way), never by ``created``.
    """
    if current is None:
        return target
    if current is target:
        return None
    if current is PaymentStatus.FAILED:
        return target if target is not PaymentStatus.CREATED else None
    if target is PaymentStatus.FAILED:
        return target if _RANK[current] < _RANK[PaymentStatus.CAPTURED] else None
    return target if _RANK[target] > _RANK[current] else None
