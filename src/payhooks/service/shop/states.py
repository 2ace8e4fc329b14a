"""The payment state machine (docs/design.md, "Payment state machine"): forward only, but
out of ``failed``."""

from __future__ import annotations

from enum import StrEnum

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

TARGET = {
    EventKind.PAYMENT_PENDING: PaymentStatus.CREATED,
    EventKind.PAYMENT_AUTHORIZED: PaymentStatus.AUTHORIZED,
    EventKind.PAYMENT_CAPTURED: PaymentStatus.CAPTURED,
    EventKind.PAYMENT_FAILED: PaymentStatus.FAILED,
    EventKind.REFUND_PROCESSED: PaymentStatus.REFUNDED,
}


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
