"""The normalised event every provider adapter produces; pure values, no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from payhooks.plumbing.errors import MalformedPayload

_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""A character that would break the log line, email subject or terminal an id is shown in."""
_ODD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
"""Either of the two above: what an id is checked for first, in one search."""
MAX_PAISE = 10**15  # ten trillion rupees: far above any payment, far below bigint


def is_text(value: str) -> bool:
    """Whether ``value`` is text PostgreSQL can hold. JSON's escapes can also spell a lone
    surrogate (``"\\ud800"``), which no encoding holds, and a NUL (``"\\u0000"``), which no
    ``text`` column holds: PostgreSQL, a log line or a JSON answer would fail on them, so a
    field holding one is malformed (or left out where it is optional), whatever reads it: an
    event, a settlement line, a gateway's answer."""
    return _NOT_TEXT.search(value) is None


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
    DISPUTE_OPENED = "dispute_opened"
    DISPUTE_UNDER_REVIEW = "dispute_under_review"
    DISPUTE_ACTION_REQUIRED = "dispute_action_required"
    DISPUTE_WON = "dispute_won"
    DISPUTE_LOST = "dispute_lost"
    DISPUTE_CLOSED = "dispute_closed"
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

    @property
    def is_dispute(self) -> bool:
        """A dispute of a captured payment moved on: its figures are ``Event.dispute``, and
        the core records it once and in order (``payhooks.intake.disputes``) before any
        handler sees it."""
        return _TRAITS[self].is_dispute


def kind_words(kind: str) -> str:
    """A kind as a person reads it, ``payment captured`` for ``payment_captured``: the words the
    console and what payhooks writes for people use (a kind this release does not know, kept by
    a newer one, reads so too)."""
    return kind.replace("_", " ")


@dataclass(frozen=True, slots=True)
class _Traits:
    pays: bool
    moves_money: bool
    is_final: bool
    is_refund: bool
    is_dispute: bool = False


# Every kind has a row: a new one is placed here (tests/unit/test_events.py checks it).
_TRAITS: Mapping[EventKind, _Traits] = {
    #                                  pays   moves  final  refund dispute
    EventKind.PAYMENT_PENDING: _Traits(False, False, False, False),
    EventKind.PAYMENT_AUTHORIZED: _Traits(True, False, False, False),
    EventKind.PAYMENT_CAPTURED: _Traits(True, True, True, False),
    EventKind.PAYMENT_FAILED: _Traits(False, False, True, False),
    EventKind.REFUND_PROCESSED: _Traits(False, True, True, True),
    EventKind.DISPUTE_OPENED: _Traits(False, False, False, False, True),
    EventKind.DISPUTE_UNDER_REVIEW: _Traits(False, False, False, False, True),
    EventKind.DISPUTE_ACTION_REQUIRED: _Traits(False, False, False, False, True),
    EventKind.DISPUTE_WON: _Traits(False, False, True, False, True),
    EventKind.DISPUTE_LOST: _Traits(False, True, True, False, True),  # money taken back
    EventKind.DISPUTE_CLOSED: _Traits(False, False, True, False, True),
    EventKind.SETTLEMENT: _Traits(False, False, False, False, False),
    EventKind.OTHER: _Traits(False, False, False, False),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Dispute:
    """A dispute's figures as one delivery reports them (docs/providers.md, "Disputes").

    ``id`` is the gateway's (Razorpay's ``disp_…``, Cashfree's ``dispute_id``); ``phase`` is
    the stage of the chargeback process the gateway names (``chargeback``, ``pre_arbitration``:
    a dispute won in one phase may be raised again in the next, under the same id), and
    ``status`` the gateway's own word for where it stands, shown as it came. ``respond_by`` is
    the deadline to answer it, ``reported_at`` when the gateway says it reached this state:
    what orders two reports of one rank (``payhooks.intake.disputes``). ``deducted_paise`` is
    what the gateway says it took back when the dispute was lost, where it says so."""

    id: str
    amount_paise: int | None = None
    reason: str | None = None
    phase: str | None = None
    status: str | None = None
    respond_by: datetime | None = None
    reported_at: datetime | None = None
    deducted_paise: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One authentic delivery, normalised.

    ``event_id`` is the delivery key (docs/providers.md). ``merchant_ref`` is the reference
    the gateway echoes back from checkout (Razorpay order id, Cashfree order id, PayU txnid).
    ``amount_paise`` is the amount compared with the cart; ``payment_amount_paise`` is what
    the gateway says was paid when that differs (Cashfree offers and surcharges). A refund's
    own id and amount are ``refund_id`` and ``refund_amount_paise``; its ``amount_paise`` is
    the payment's where the gateway sends that (Razorpay, Juspay), else None.
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
    refund_key: str | None = None
    """The merchant's own id for a refund, as the gateway's report of it carries it back
    (Cashfree's ``refund_id``, the ``payhooks_key`` note of Razorpay's refund, the token of
    PayU's refund as its API reports it): for a refund payhooks sent, its intent's
    idempotency key, which names the intent before the sender has heard the gateway's own
    id (``payhooks.refunding.refunds.closing``). Never part of a key; left out when odd."""
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
    dispute: Dispute | None = None
    """The dispute a dispute event reports (``EventKind.is_dispute``); None for the others."""


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
    shown in. Authentic bytes can hold any of them; no gateway sends them. So is a value of
    another JSON type than the field holds (a number for an id, text for an amount), which a
    reader handed on as it came: never a ``TypeError`` for the caller."""
    for name in _TEXTS:
        value = getattr(event, name)
        if value is None or (
            isinstance(value, str) and len(value) <= MAX_TEXT_CHARS and not _ODD.search(value)
        ):
            continue
        if not (isinstance(value, str) and is_text(value)):
            raise MalformedPayload(event.provider, f"{name} is not valid text")
        raise MalformedPayload(
            event.provider, f"{name} has a control character or over {MAX_TEXT_CHARS} chars"
        )
    for name in _AMOUNTS:
        value = getattr(event, name)
        if value is not None and not (_whole(value) and 0 <= value <= MAX_PAISE):
            raise MalformedPayload(event.provider, f"{name} is out of range: {value!r:.40}")
    if event.dispute is not None:
        _storable_dispute(event.provider, event.dispute)
    if event.refund_key is not None and not _plain(event.refund_key, MAX_TEXT_CHARS):
        event = replace(event, refund_key=None)  # it only finds an intent: left out
    if event.bank_ref is not None and not _searchable(event.bank_ref):
        return replace(event, bank_ref=None)  # for search only: left out, never refused
    return event


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_DISPUTE_TEXTS = ("id", "reason", "phase", "status")
_DISPUTE_AMOUNTS = ("amount_paise", "deducted_paise")


def _storable_dispute(provider: Provider, dispute: Dispute) -> None:
    """A dispute's id and words as ``storable`` holds an event's, its amounts in range."""
    for name in _DISPUTE_TEXTS:
        value = getattr(dispute, name)
        if value is not None and (
            not isinstance(value, str)
            or not is_text(value)
            or CONTROL.search(value)
            or len(value) > MAX_TEXT_CHARS
        ):
            raise MalformedPayload(
                provider, f"dispute {name} is not text of at most {MAX_TEXT_CHARS} chars"
            )
    for name in _DISPUTE_AMOUNTS:
        value = getattr(dispute, name)
        if value is not None and not (_whole(value) and 0 <= value <= MAX_PAISE):
            raise MalformedPayload(provider, f"dispute {name} is out of range: {value!r:.40}")


def _searchable(reference: str) -> bool:
    return _plain(reference, MAX_REFERENCE_CHARS)


def _plain(value: object, most: int) -> bool:
    """Text of at most ``most`` characters with no control character in it."""
    return (
        isinstance(value, str)
        and len(value) <= most
        and not CONTROL.search(value)
        and is_text(value)
    )
