"""Cashfree PG webhooks: base64 HMAC-SHA256 over timestamp + raw body, amounts in rupees."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from payhooks.events import Dispute, Event, EventKind, Provider, is_text
from payhooks.gateways import _common
from payhooks.gateways._settlements import settlement_event
from payhooks.gateways.cashfree import settlements
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

SIGNATURE_HEADER = "x-webhook-signature"
TIMESTAMP_HEADER = "x-webhook-timestamp"
VERSION_HEADER = "x-webhook-version"
IDEMPOTENCY_HEADER = "x-idempotency-key"
_HEADERS_READ: tuple[str, ...] = (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    VERSION_HEADER,
    IDEMPOTENCY_HEADER,
)
_P = Provider.CASHFREE

PAYMENT_SUCCESS = "PAYMENT_SUCCESS_WEBHOOK"
PAYMENT_FAILED = "PAYMENT_FAILED_WEBHOOK"
PAYMENT_USER_DROPPED = "PAYMENT_USER_DROPPED_WEBHOOK"
REFUND_STATUS = "REFUND_STATUS_WEBHOOK"
AUTO_REFUND_STATUS = "AUTO_REFUND_STATUS_WEBHOOK"
REFUND_ENTITIES: Mapping[str, str] = {REFUND_STATUS: "refund", AUTO_REFUND_STATUS: "auto_refund"}
"""A refund's webhook type, and where under ``data`` its refund is: Cashfree's own refund of
a second payment of a paid order, of a failed one that took money, of one paid to the VPA with
no order (an auto-refund) is money gone back as much as a refund the merchant asked for."""
DISPUTE_CREATED = "DISPUTE_CREATED"
DISPUTE_UPDATED = "DISPUTE_UPDATED"
DISPUTE_CLOSED = "DISPUTE_CLOSED"
DISPUTE_TYPES = (DISPUTE_CREATED, DISPUTE_UPDATED, DISPUTE_CLOSED)
_SUCCESS = "SUCCESS"

# A dispute's status is <dispute_type>_<state> (CHARGEBACK_MERCHANT_WON): every type Cashfree
# documents, the longest first (PRE_ARBITRATION before ARBITRATION), and what each state
# means (docs/providers.md, "Disputes").
_DISPUTE_PHASES = ("PRE_ARBITRATION", "ARBITRATION", "CHARGEBACK", "RETRIEVAL", "DISPUTE")
_DISPUTE_STATES: Mapping[str, EventKind] = {
    "CREATED": EventKind.DISPUTE_OPENED,
    "DOCS_RECEIVED": EventKind.DISPUTE_UNDER_REVIEW,
    "UNDER_REVIEW": EventKind.DISPUTE_UNDER_REVIEW,
    "INSUFFICIENT_EVIDENCE": EventKind.DISPUTE_ACTION_REQUIRED,
    "MERCHANT_WON": EventKind.DISPUTE_WON,
    "MERCHANT_LOST": EventKind.DISPUTE_LOST,
    "MERCHANT_ACCEPTED": EventKind.DISPUTE_LOST,
}
# What a webhook type says when the state does not: a dispute created is open, one closed is
# decided (closed for want of evidence is lost); an update whose state is none of the above
# is recorded and left alone (OTHER), never guessed at.
_DISPUTE_TYPE_KINDS: Mapping[str, EventKind] = {
    DISPUTE_CREATED: EventKind.DISPUTE_OPENED,
    DISPUTE_CLOSED: EventKind.DISPUTE_CLOSED,
    DISPUTE_UPDATED: EventKind.OTHER,
}

_SUCCESS_WEBHOOK_KINDS: Mapping[str, EventKind] = {
    _SUCCESS: EventKind.PAYMENT_CAPTURED,
    "PENDING": EventKind.PAYMENT_PENDING,
}

PRE_AUTH = "PRE_AUTH"
"""How the ``payment_message`` of every payment taken under Cashfree's pre-authorisation
starts (``PRE_AUTH|Transaction Success``), held or captured since."""
HELD = "AUTHORIZED"
"""The word a SUCCESS that is a pre-authorisation's hold adds to its key (a webhook's
``PAYMENT_SUCCESS_WEBHOOK:<cf_payment_id>:AUTHORIZED``, reconciliation's
``reconcile:<cf_payment_id>:AUTHORIZED``), so its capture, reported later, is never its
duplicate. None of Cashfree's ``payment_status`` words."""


def held(payment: object) -> bool:
    """A payment Cashfree reports SUCCESS that it holds under pre-authorisation, not captured:
    an authorisation the merchant captures or voids later (Cashfree releases it after seven
    days), never a capture (docs/providers.md, "Cashfree's pre-authorisation"). Its
    ``is_captured`` decides when it is there: false is a hold, true a capture (Cashfree's own
    sample of an ordinary payment says true beside an authorisation object reading a capture
    pending). Without it: an ``authorization`` naming a void, or a capture or void still
    ``PENDING``, is a hold, one whose capture succeeded a capture; and, saying nothing of a
    capture, the ``PRE_AUTH|`` mark is a hold. A payment that says nothing of either is
    captured (every payment before pre-authorisation existed)."""
    captured = _common.child(payment, "is_captured")
    if isinstance(captured, bool):
        return not captured
    action = _common.child(payment, "authorization", "action")
    state = _common.child(payment, "authorization", "status")
    if state == "PENDING" or action == "VOID":
        return True
    if action == "CAPTURE" and state == _SUCCESS:
        return False
    message = _common.child(payment, "payment_message")
    return isinstance(message, str) and message.startswith(PRE_AUTH)


def sign(body: bytes, timestamp: str, secret: str) -> str:
    """The ``x-webhook-signature`` Cashfree sends: no separator between timestamp and body."""
    digest = hmac.new(secret.encode("utf-8"), timestamp.encode("utf-8") + body, hashlib.sha256)
    return base64.b64encode(digest.digest()).decode("ascii")


@dataclass(frozen=True, slots=True, kw_only=True)
class Cashfree(_common.SecretsAdapter):
    """Several client secrets are tried: events in flight keep the secret they were sent with."""

    provider = _P
    headers_read = _HEADERS_READ
    refusal = "Cashfree needs at least one non-empty client secret"

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """The HMAC-SHA256 of timestamp and body, against each secret in constant time."""
        timestamp = headers.get(TIMESTAMP_HEADER)
        if not timestamp:
            raise SignatureMismatch(_P, "timestamp header missing")
        if not timestamp.isascii():
            raise SignatureMismatch(_P, "timestamp header is not ASCII")
        expected = [sign(body, timestamp, secret) for secret in self.secrets]
        _common.matches_any(expected, headers.get(SIGNATURE_HEADER), provider=_P)

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Event:
        """A payment, refund or settlement webhook as an ``Event``."""
        doc = _common.load_json_object(body, provider=_P)
        event_type = _common.event_name(doc.get("type"), "type", provider=_P)
        if event_type in DISPUTE_TYPES:
            return _dispute_event(event_type, doc, headers, body)
        if event_type in settlements.STATES:
            return _settlement_event(event_type, headers, body)
        read = _refund_event if event_type in REFUND_ENTITIES else _payment_event
        return read(event_type, doc.get("data"), headers, body)


def _payment_kind(event_type: str, status: str | None) -> EventKind:
    """The type alone is not enough: a SUCCESS webhook may say PENDING (late authorisation),
    and its SUCCESS may be a pre-authorisation's hold (``held``, read by the caller)."""
    if event_type == PAYMENT_SUCCESS:
        if status is None:
            raise MalformedPayload(_P, "payment_status is missing")
        return _SUCCESS_WEBHOOK_KINDS.get(status, EventKind.OTHER)
    if event_type in (PAYMENT_FAILED, PAYMENT_USER_DROPPED):
        return EventKind.PAYMENT_FAILED
    return EventKind.OTHER


def _payment_event(event_type: str, data: object, headers: Mapping[str, str], body: bytes) -> Event:
    status = _status(
        _common.child(data, "payment", "payment_status"),
        "payment_status",
        decides=event_type == PAYMENT_SUCCESS,
    )
    kind = _payment_kind(event_type, status)
    strict = kind is not EventKind.OTHER
    payment_id = _id(
        _common.child(data, "payment", "cf_payment_id"), "cf_payment_id", strict=strict
    )
    key_status = status if event_type == PAYMENT_SUCCESS and status != _SUCCESS else None
    if kind is EventKind.PAYMENT_CAPTURED and held(_common.child(data, "payment")):
        kind, key_status = EventKind.PAYMENT_AUTHORIZED, HELD  # a hold, captured later or not
    event = Event(
        provider=_P,
        kind=kind,
        event_type=event_type,
        event_id=_event_id(headers, event_type, body, payment_id, key_status),
        payment_id=payment_id,
        merchant_ref=_text(_common.child(data, "order", "order_id"), "order_id", strict=strict),
        amount_paise=compared_paise(
            _amount(_common.child(data, "order", "order_amount"), "order_amount", strict=strict),
            _amount(
                _common.child(data, "payment", "payment_amount"), "payment_amount", strict=strict
            ),
            _common.child(data, "payment_offers"),
            _common.child(data, "payment", "payment_surcharge"),
        ),
        payment_amount_paise=_amount(
            _common.child(data, "payment", "payment_amount"), "payment_amount", strict=strict
        ),
        currency=_text(  # the payment's where the order's is missing, as the status API reads
            _common.child(data, "order", "order_currency")
            or _common.child(data, "payment", "payment_currency"),
            "order_currency",
            strict=strict,
        ),
        bank_ref=_common.reference(_common.child(data, "payment", "bank_reference")),
        payload_sha256=_common.sha256_hex(body),
    )
    needed = {
        "cf_payment_id": payment_id,
        "order_id": event.merchant_ref,
        "order_amount": event.amount_paise,
    }
    if kind.pays:  # what was paid, and in what, never taken for the order's or rupees unsaid
        needed["payment_amount"] = event.payment_amount_paise
        needed["order_currency"] = event.currency
    return _checked(event, needed, strict=strict)


def compared_paise(
    ordered: int | None, paid: int | None, offers: object, surcharge: object = None
) -> int | None:
    """The amount compared with the cart. ``payment_amount`` is below ``order_amount`` under
    an offer Cashfree reports redeemed (``payment_offers[].offer_redemption.discount_amount``)
    and above it with a service fee the customer paid (``payment_surcharge``'s service charge
    and tax). What the payment covers is ``payment_amount`` less the fee reported plus the
    discounts redeemed: at least the order amount, the order amount is compared; short of
    it, what it covers is, so the shortfall is flagged ``amount_mismatch`` like any amount
    off (docs/providers.md). Reconciliation reads the status API's payment entity with the
    same rule. With no ``payment_amount`` the order amount is compared: only a payment that
    pays nothing (a failed one) is read without it; a capture naming none is malformed."""
    if ordered is None or paid is None:
        return ordered
    covered = paid - service_fee(surcharge) + redeemed_discounts(offers)
    return ordered if covered >= ordered else covered


def service_fee(surcharge: object) -> int:
    """Paise of ``payment_surcharge`` (service charge and its tax) the customer paid on top;
    a part that is not a readable amount, or below zero, counts as none."""
    fields = ("payment_surcharge_service_charge", "payment_surcharge_service_tax")
    return sum(max(_amount(_common.child(surcharge, f), f, strict=False) or 0, 0) for f in fields)


def redeemed_discounts(offers: object) -> int:
    """Paise the offers Cashfree reports redeemed took off; an offer not reported redeemed,
    or whose discount is not a readable amount, explains nothing."""
    total = 0
    for offer in offers if isinstance(offers, list) else ():
        redemption = _common.child(offer, "offer_redemption")
        if _common.child(redemption, "redemption_status") != _SUCCESS:
            continue
        discount = _amount(
            _common.child(redemption, "discount_amount"), "discount_amount", strict=False
        )
        total += discount or 0
    return total


_REFUND_FAILED = frozenset({"FAILED", "CANCELLED"})
"""Cashfree's refund statuses for a refund that gave nothing back."""


def _refund_event(event_type: str, data: object, headers: Mapping[str, str], body: bytes) -> Event:
    """``data.refund``, or an auto-refund's ``data.auto_refund`` (the same fields but the
    merchant's ``refund_id``, which it has none of, and an ``order_id`` it may lack: money
    paid with no order refunded)."""
    refund = _common.child(data, REFUND_ENTITIES[event_type])
    status = _status(_common.child(refund, "refund_status"), "refund_status", decides=True)
    if status is None:
        raise MalformedPayload(_P, "refund_status is missing")
    kind = EventKind.REFUND_PROCESSED if status == _SUCCESS else EventKind.OTHER
    strict = kind is not EventKind.OTHER
    refund_id = _id(_common.child(refund, "cf_refund_id"), "cf_refund_id", strict=strict)
    key_status = None if status == _SUCCESS else status
    event = Event(
        provider=_P,
        kind=kind,
        event_type=event_type,
        event_id=_event_id(headers, event_type, body, refund_id, key_status),
        payment_id=_id(_common.child(refund, "cf_payment_id"), "cf_payment_id", strict=strict),
        merchant_ref=_text(
            _common.child(refund, "order_id"),
            "order_id",
            strict=strict and event_type == REFUND_STATUS,
        ),
        currency=_text(_common.child(refund, "refund_currency"), "refund_currency", strict=strict),
        refund_id=refund_id,
        refund_amount_paise=_amount(
            _common.child(refund, "refund_amount"), "refund_amount", strict=strict
        ),
        # the merchant's, unless the refund failed: no money went back, so it names no intent
        refund_key=None
        if status in _REFUND_FAILED
        else _common.own_key(_common.child(refund, "refund_id")),
        bank_ref=_common.reference(_common.child(refund, "refund_arn")),
        payload_sha256=_common.sha256_hex(body),
    )
    needed = {
        "cf_refund_id": refund_id,
        "cf_payment_id": event.payment_id,
        "refund_amount": event.refund_amount_paise,
    }
    return _checked(event, needed, strict=strict)


def _dispute_event(
    event_type: str, doc: Mapping[str, object], headers: Mapping[str, str], body: bytes
) -> Event:
    """``data.dispute`` with ``data.order_details`` (the order and the payment disputed), the
    same in every version (2025-01-01 adds ``dispute_amount_currency``): the dispute's
    ``updated_at`` orders two reports of one rank, ``event_time`` when it has none."""
    data = doc.get("data")
    dispute = _common.child(data, "dispute")
    order = _common.child(data, "order_details")
    status = _status(_common.child(dispute, "dispute_status"), "dispute_status", decides=True)
    phase, kind = _dispute_kind(event_type, status)
    strict = kind is not EventKind.OTHER
    dispute_id = _id(_common.child(dispute, "dispute_id"), "dispute_id", strict=strict)
    payment_id = _id(_common.child(order, "cf_payment_id"), "cf_payment_id", strict=strict)
    updated = _common.child(dispute, "updated_at")
    if strict:
        _common.require({"dispute_id": dispute_id, "cf_payment_id": payment_id}, provider=_P)
    figures = None
    if strict and dispute_id is not None:
        figures = Dispute(
            id=dispute_id,
            amount_paise=_amount(
                _common.child(dispute, "dispute_amount"), "dispute_amount", strict=True
            ),
            reason=_common.words(
                _common.child(dispute, "reason_code"),
                _common.child(dispute, "reason_description"),
            ),
            phase=(_common.words(_common.child(dispute, "dispute_type")) or phase or "").lower()
            or None,
            status=status,
            respond_by=_common.iso_time(_common.child(dispute, "respond_by")),
            reported_at=_common.iso_time(updated) or _common.iso_time(doc.get("event_time")),
        )
    currency = _common.child(dispute, "dispute_amount_currency") or _common.child(
        order, "payment_currency"
    )
    return Event(
        provider=_P,
        kind=kind,
        event_type=event_type,
        event_id=_event_id(headers, event_type, body, dispute_id, status, _digits(updated) or None),
        payment_id=payment_id,
        merchant_ref=_text(_common.child(order, "order_id"), "order_id", strict=strict),
        currency=_text(currency, "dispute currency", strict=strict),
        payload_sha256=_common.sha256_hex(body),
        dispute=figures,
    )


def _dispute_kind(event_type: str, status: str | None) -> tuple[str | None, EventKind]:
    """The phase a dispute's status names (lower case, as payhooks keeps it) and what the
    status means; a status Cashfree does not document falls back on the webhook's type."""
    for phase in _DISPUTE_PHASES:
        if status is not None and status.startswith(phase + "_"):
            state = status[len(phase) + 1 :]
            if event_type == DISPUTE_CLOSED and state == "INSUFFICIENT_EVIDENCE":
                return phase.lower(), EventKind.DISPUTE_LOST
            if state in _DISPUTE_STATES:
                return phase.lower(), _DISPUTE_STATES[state]
            return phase.lower(), _DISPUTE_TYPE_KINDS[event_type]
    return None, _DISPUTE_TYPE_KINDS[event_type]


def _digits(value: object) -> str:
    """A time's digits alone (``20230615211915``): a key part that holds no ':'."""
    if not isinstance(value, str):
        return ""
    return "".join(c for c in value if c.isascii() and c.isdigit())


def _settlement_event(event_type: str, headers: Mapping[str, str], body: bytes) -> Event:
    """A payout: read whole here (a settlement payhooks cannot record is malformed), keyed
    on its type and settlement id when no idempotency header came (each state of one
    settlement is a delivery of its own)."""
    settled = settlements.webhook(body)
    key = _event_id(headers, event_type, body, settled.settlement_id, None)
    return settlement_event(settled, event_type=event_type, event_id=key, body=body)


def _checked(event: Event, needed: Mapping[str, object], *, strict: bool) -> Event:
    """``event``, when it is not ``strict`` or carries every one of ``needed``."""
    if strict:
        _common.require(needed, provider=_P)
    return event


def _text(value: object, field: str, *, strict: bool) -> str | None:
    """Strict for events we act on; an ignored event with an odd field is still recorded."""
    return _common.text_field(value, field, strict=strict, provider=_P)


def _status(value: object, field: str, *, decides: bool) -> str | None:
    """Where a status ``decides`` the event's kind and its key (a SUCCESS webhook, a refund),
    one that is not text is malformed; elsewhere it is left out, like any odd field of an
    event nothing reads it for. One of another type is read as missing."""
    if isinstance(value, str) and not is_text(value):
        _common.refuse(f"{field} is not valid text", strict=decides, provider=_P)
        return None
    return _text(value, field, strict=False)


def _id(value: object, field: str, *, strict: bool) -> str | None:
    """cf_payment_id is an int up to 2022-09-01 and a string from 2023-08-01: always a str."""
    return _common.id_field(value, field, strict=strict, provider=_P)


def _amount(value: object, field: str, *, strict: bool) -> int | None:
    """Cashfree amounts are JSON numbers; a string here is not what was documented."""
    if isinstance(value, str):
        _common.refuse(f"{field} is a string, not a number", strict=strict, provider=_P)
        return None
    return _common.optional_paise(value, field, strict=strict, provider=_P)


def _event_id(
    headers: Mapping[str, str],
    event_type: str,
    body: bytes,
    key_id: str | None,
    key_status: str | None,
    key_time: str | None = None,
) -> str:
    """The delivery key of docs/providers.md, plus the status when it is not the final one
    the type implies (``HELD`` for a SUCCESS that is a pre-authorisation's hold; and, for a
    dispute, its status and the digits of its ``updated_at``: each report of a dispute is a
    delivery of its own, its retries one).

    Without it a PENDING delivery of PAYMENT_SUCCESS_WEBHOOK, or a hold's, would claim the key
    of the capture that follows for the same attempt, and the capture would be dropped as a
    duplicate.
    """
    header = _common.key_header(headers.get(IDEMPOTENCY_HEADER))
    if header:
        return header
    parts: list[object] = [event_type, key_id]
    if key_status is not None:
        parts.append(key_status)
    if key_time is not None:
        parts.append(key_time)
    return _common.unreserved(
        _P, _common.delivery_key(*parts) or _common.body_key(event_type, body)
    )


__all__ = [
    "DISPUTE_TYPES",
    "HELD",
    "IDEMPOTENCY_HEADER",
    "PRE_AUTH",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "VERSION_HEADER",
    "Cashfree",
    "held",
    "sign",
]
