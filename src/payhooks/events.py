"""The normalised event every provider adapter produces; pure values, no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from payhooks.plumbing.errors import MalformedPayload

_SURROGATE = re.compile("[\ud800-\udfff]")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""A character that would break the log line, email subject or terminal an id is shown in."""
MAX_PAISE = 10**15  # ten trillion rupees: far above any payment, far below bigint


def is_text(value: str) -> bool:
    """Whether ``value`` is Unicode text. JSON's escapes can also spell a lone surrogate
    (``"\\ud800"``), which no encoding holds: PostgreSQL, a log line or a JSON answer would
    fail on it, so a field holding one is malformed (or left out where it is optional)."""
    return _SURROGATE.search(value) is None


class Provider(StrEnum):
    """A gateway payhooks serves; its value is the name in URLs, settings and stored rows."""

    RAZORPAY = "razorpay"
    CASHFREE = "cashfree"
    PAYU = "payu"
    PHONEPE = "phonepe"
    JUSPAY = "juspay"


class EventKind(StrEnum):
    """What an event means for a payment attempt, whatever the gateway called it."""

    PAYMENT_PENDING = "payment_pending"
    PAYMENT_AUTHORIZED = "payment_authorized"
    PAYMENT_CAPTURED = "payment_captured"
    PAYMENT_FAILED = "payment_failed"
    REFUND_PROCESSED = "refund_processed"
    SETTLEMENT = "settlement"  # the gateway's payout: recorded by the core, no handler's
    OTHER = "other"

    @property
    def pays(self) -> bool:
        """A payment authorised or captured: money promised or taken for an order, whose
        amount is checked against the checkout (``payhooks.intake.expectations``)."""
        return _TRAITS[self].pays

    @property
    def moves_money(self) -> bool:
        """The gateway says money moved (a capture, a refund): the only claims an API can
        refute (``payhooks.intake.confirmations``)."""
        return _TRAITS[self].moves_money

    @property
    def is_final(self) -> bool:
        """The attempt (or refund) is settled, one way or the other: captured, failed,
        refunded. A pending or authorised payment may still move."""
        return _TRAITS[self].is_final

    @property
    def is_refund(self) -> bool:
        """Money going back: a refund's amount and id, not the payment's, are its figures."""
        return _TRAITS[self].is_refund


@dataclass(frozen=True, slots=True)
class _Traits:
    pays: bool
    moves_money: bool
    is_final: bool
    is_refund: bool


# Every kind has a row: a new one is placed here (tests/unit/test_events.py checks it).
_TRAITS: Mapping[EventKind, _Traits] = {
    #                                  pays   moves  final  refund
    EventKind.PAYMENT_PENDING: _Traits(False, False, False, False),
    EventKind.PAYMENT_AUTHORIZED: _Traits(True, False, False, False),
    EventKind.PAYMENT_CAPTURED: _Traits(True, True, True, False),
    EventKind.PAYMENT_FAILED: _Traits(False, False, True, False),
    EventKind.REFUND_PROCESSED: _Traits(False, True, True, True),
    EventKind.SETTLEMENT: _Traits(False, False, False, False),
    EventKind.OTHER: _Traits(False, False, False, False),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One authentic delivery, normalised.

    ``event_id`` is the delivery key (docs/providers.md). ``merchant_ref`` is the reference
    the gateway echoes back from checkout (Razorpay order id, Cashfree order id, PayU txnid).
    ``amount_paise`` is the amount compared with the cart; ``payment_amount_paise`` is what
    the gateway says was paid when that differs (Cashfree offers and surcharges).
    ``bank_ref`` is the reference a customer reads off their bank statement (UTR, RRN, bank
    transaction id; a refund's ARN): for search only, never for identity or keys.
    """

    provider: Provider
    kind: EventKind
    event_type: str
    event_id: str
    payment_id: str | None = None
    merchant_ref: str | None = None
    amount_paise: int | None = None
    payment_amount_paise: int | None = None
    currency: str | None = None
    refund_id: str | None = None
    refund_amount_paise: int | None = None
    bank_ref: str | None = None
    payload_sha256: str
    attempt_id: str | None = None
    """The gateway's own id of the payment attempt where its signature does not cover it
    (PayU's ``mihpayid``): never part of a key. A second post under one key that names another
    attempt may be a second payment or an edited copy; the gateway's API decides
    (``payhooks.intake.confirmations``, "another attempt")."""
    unconfirmed: bool = False
    """What the callback says rests on a static credential, not on a signature over these
    fields (PhonePe, Juspay, PayU's refund callbacks): it takes effect only as the gateway's
    status API confirms it (``payhooks.intake.confirmations``), never as the callback said."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Received:
    """One authentic delivery as it travels through ingest: its event, the exact bytes, and
    the headers kept with them (those the adapter reads: signature, timestamp, delivery key)."""

    event: Event
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


MAX_TEXT_CHARS = 255
MAX_REFERENCE_CHARS = 64  # UTRs are 12-22 characters, RRNs 12, ARNs 23
_TEXTS = ("event_id", "event_type", "payment_id", "merchant_ref", "refund_id", "currency")
_AMOUNTS = ("amount_paise", "payment_amount_paise", "refund_amount_paise")


def storable(event: Event) -> Event:
    """Refuse, as malformed, values PostgreSQL cannot store or index (a NUL in text, a lone
    surrogate, an id longer than a key should be, an amount beyond ``bigint``) and ids holding
    a control character, which would break the log line, email subject or terminal they are
    shown in. Authentic bytes can hold any of them; no gateway sends them."""
    for name in _TEXTS:
        value = getattr(event, name)
        if value is not None and not is_text(value):
            raise MalformedPayload(event.provider, f"{name} is not valid text")
        if value is not None and (CONTROL.search(value) or len(value) > MAX_TEXT_CHARS):
            raise MalformedPayload(
                event.provider, f"{name} has a control character or over {MAX_TEXT_CHARS} chars"
            )
    for name in _AMOUNTS:
        value = getattr(event, name)
        if value is not None and not 0 <= value <= MAX_PAISE:
            raise MalformedPayload(event.provider, f"{name} is out of range: {value}")
    if event.bank_ref is not None and not _searchable(event.bank_ref):
        return replace(event, bank_ref=None)  # for search only: left out, never refused
    return event


def _searchable(reference: str) -> bool:
    return (
        len(reference) <= MAX_REFERENCE_CHARS
        and not CONTROL.search(reference)
        and is_text(reference)
    )
