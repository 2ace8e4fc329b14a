"""Razorpay webhooks: hex HMAC-SHA256 over the raw body, JSON payload, amounts in paise."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from payhooks.events import Dispute, Event, EventKind, Provider
from payhooks.gateways import _common
from payhooks.gateways._settlements import settlement_event
from payhooks.gateways.razorpay import settlements
from payhooks.plumbing.errors import MalformedPayload

SIGNATURE_HEADER = "x-razorpay-signature"
EVENT_ID_HEADER = "x-razorpay-event-id"
_HEADERS_READ: tuple[str, ...] = (SIGNATURE_HEADER, EVENT_ID_HEADER)
_P = Provider.RAZORPAY
KEY_NOTE = "payhooks_key"
"""The note each refund payhooks sends carries with its intent's key: found again by it after a
lost answer (``status.send_refund``), and read from the refund's webhooks (``Event.refund_key``)."""

_KINDS: Mapping[str, EventKind] = {
    "payment.authorized": EventKind.PAYMENT_AUTHORIZED,
    "payment.captured": EventKind.PAYMENT_CAPTURED,
    "order.paid": EventKind.PAYMENT_CAPTURED,
    "payment.failed": EventKind.PAYMENT_FAILED,
    "refund.processed": EventKind.REFUND_PROCESSED,
    settlements.PROCESSED: EventKind.SETTLEMENT,
}

DISPUTE_KINDS: Mapping[str, EventKind] = {
    "payment.dispute.created": EventKind.DISPUTE_OPENED,
    "payment.dispute.under_review": EventKind.DISPUTE_UNDER_REVIEW,
    "payment.dispute.action_required": EventKind.DISPUTE_ACTION_REQUIRED,
    "payment.dispute.won": EventKind.DISPUTE_WON,
    "payment.dispute.lost": EventKind.DISPUTE_LOST,
    "payment.dispute.closed": EventKind.DISPUTE_CLOSED,
}
"""Razorpay's dispute webhooks (docs/providers.md, "Disputes"): the event names the status;
``action_required`` comes with the dispute's status still ``open``."""

DISPUTE_REASONS: Mapping[str, str] = {
    "goods_or_services_not_received_or_partially_received": (
        "Goods or services not received, or received in part"
    ),
    "non_matching_account_number": "Account number does not match",
    "processed_invalid_expired_card": "Processed with an invalid or expired card",
}
"""The ``reason_code`` values of Razorpay's dispute samples (tests/data/razorpay/disputes), in
words: Razorpay sends a code alone, its ``reason_description`` only sometimes."""


def sign(body: bytes, secret: str) -> str:
    """The signature Razorpay sends for ``body``: what tests and the demo gateway need."""
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Payment:
    """What the payment entity says; every field optional until the event kind requires it."""

    id: str | None = None
    order_id: str | None = None
    amount: int | None = None
    currency: str | None = None
    bank_ref: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Refund:
    id: str | None = None
    payment_id: str | None = None
    amount: int | None = None
    bank_ref: str | None = None
    key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Razorpay(_common.SecretsAdapter):
    """Several secrets are tried because retries of old events keep the old secret."""

    provider = _P
    headers_read = _HEADERS_READ
    refusal = "Razorpay needs at least one non-empty webhook secret"

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """The HMAC-SHA256 of the body, against each secret in constant time."""
        expected = [sign(body, secret) for secret in self.secrets]
        _common.matches_any(expected, headers.get(SIGNATURE_HEADER), provider=_P)

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Event:
        """A payment, order, refund or settlement webhook as an ``Event``."""
        doc = _common.load_json_object(body, provider=_P)
        event_type = _common.event_name(doc.get("event"), "event", provider=_P)
        if event_type in DISPUTE_KINDS:
            return _dispute_event(doc, event_type, headers, body)
        kind = _KINDS.get(event_type, EventKind.OTHER)
        if kind is EventKind.SETTLEMENT:
            return _settlement_event(event_type, headers, body)
        strict = kind is not EventKind.OTHER
        payment = _read_payment(_common.child(doc, "payload", "payment", "entity"), strict=strict)
        refund = _read_refund(_common.child(doc, "payload", "refund", "entity"), strict=strict)
        _require(kind, payment, refund)
        return Event(
            provider=_P,
            kind=kind,
            event_type=event_type,
            event_id=_event_id(headers, event_type, payment, refund, body),
            payment_id=refund.payment_id if kind is EventKind.REFUND_PROCESSED else payment.id,
            merchant_ref=payment.order_id,
            amount_paise=payment.amount,
            currency=payment.currency,
            refund_id=refund.id,
            refund_amount_paise=refund.amount,
            refund_key=refund.key,
            bank_ref=refund.bank_ref if kind is EventKind.REFUND_PROCESSED else payment.bank_ref,
            payload_sha256=_common.sha256_hex(body),
        )


def _dispute_event(
    doc: Mapping[str, object], event_type: str, headers: Mapping[str, str], body: bytes
) -> Event:
    """``payload.dispute.entity`` with the payment it disputes (``payload.payment.entity``):
    the dispute's id, amount, reason, phase and ``respond_by``; the event's ``created_at``
    orders two reports of one rank."""
    entity = _common.child(doc, "payload", "dispute", "entity")
    dispute_id = _text(_common.child(entity, "id"), "dispute id", strict=True)
    payment = _read_payment(_common.child(doc, "payload", "payment", "entity"), strict=False)
    payment_id = _text(_common.child(entity, "payment_id"), "dispute payment_id", strict=True)
    if dispute_id is None:
        raise MalformedPayload(_P, "dispute id is missing")
    _common.require({"dispute payment_id": payment_id or payment.id}, provider=_P)
    reported = _common.child(doc, "created_at")
    return Event(
        provider=_P,
        kind=DISPUTE_KINDS[event_type],
        event_type=event_type,
        event_id=_keyed(headers, event_type, body, dispute_id, reported),
        payment_id=payment_id or payment.id,
        merchant_ref=payment.order_id,
        currency=_text(_common.child(entity, "currency"), "dispute currency", strict=True),
        payload_sha256=_common.sha256_hex(body),
        dispute=Dispute(
            id=dispute_id,
            amount_paise=_paise(_common.child(entity, "amount"), "dispute amount", strict=True),
            reason=_common.words(
                _common.child(entity, "reason_code"), _common.child(entity, "reason_description")
            ),
            phase=_common.words(_common.child(entity, "phase")),
            status=_common.words(_common.child(entity, "status")),
            respond_by=_common.unix_time(_common.child(entity, "respond_by")),
            reported_at=_common.unix_time(reported),
            deducted_paise=_paise(
                _common.child(entity, "amount_deducted"), "amount_deducted", strict=False
            ),
        ),
    )


def _settlement_event(event_type: str, headers: Mapping[str, str], body: bytes) -> Event:
    """A payout: read whole here (a settlement payhooks cannot record is malformed), keyed
    on the settlement's id when no event id header came."""
    settled = settlements.webhook(body)
    key = _keyed(headers, event_type, body, settled.settlement_id)
    return settlement_event(settled, event_type=event_type, event_id=key, body=body)


def _read_payment(entity: object, *, strict: bool) -> _Payment:
    """Strict for events we act on; for the rest a badly typed field is just left out.

    An authentic event we ignore should still be answered 200 and recorded, not bounced with
    a 400 that Razorpay would retry for 24 hours before disabling the endpoint.
    """
    if not isinstance(entity, dict):
        return _Payment()
    return _Payment(
        id=_text(entity.get("id"), "payment id", strict=strict),
        order_id=_text(entity.get("order_id"), "payment order_id", strict=strict),
        amount=_paise(entity.get("amount"), "payment amount", strict=strict),
        currency=_text(entity.get("currency"), "payment currency", strict=strict),
        # UPI and cards carry the RRN, netbanking the bank's transaction id.
        bank_ref=_common.reference(
            _common.child(entity, "acquirer_data", "rrn"),
            _common.child(entity, "acquirer_data", "bank_transaction_id"),
        ),
    )


def _read_refund(entity: object, *, strict: bool) -> _Refund:
    if not isinstance(entity, dict):
        return _Refund()
    return _Refund(
        id=_text(entity.get("id"), "refund id", strict=strict),
        payment_id=_text(entity.get("payment_id"), "refund payment_id", strict=strict),
        amount=_paise(entity.get("amount"), "refund amount", strict=strict),
        bank_ref=_common.reference(
            _common.child(entity, "acquirer_data", "arn")
        ),  # on the statement
        # the note payhooks' refund call writes (docs/providers.md, "Refunds"); Razorpay
        # writes notes an empty array when there are none. A failed refund gave nothing back:
        # it names no intent.
        key=None
        if entity.get("status") == "failed"
        else _common.own_key(_common.child(entity, "notes", KEY_NOTE)),
    )


def _text(value: object, field: str, *, strict: bool) -> str | None:
    return _common.text_field(value, field, strict=strict, provider=_P)


def _paise(value: object, field: str, *, strict: bool) -> int | None:
    """Razorpay amounts are integer paise."""
    return _common.paise_field(value, field, strict=strict, provider=_P)


def _require(kind: EventKind, payment: _Payment, refund: _Refund) -> None:
    """An event we act on without the ids it acts on cannot be applied."""
    if kind is EventKind.OTHER:
        return
    needed: Mapping[str, object]
    if kind is EventKind.REFUND_PROCESSED:
        needed = {
            "refund id": refund.id,
            "refund amount": refund.amount,
            "refund payment_id": refund.payment_id,
        }
    else:
        needed = {"payment id": payment.id, "payment amount": payment.amount}
        if kind.pays:  # compared with the order's: never taken for rupees unsaid
            needed["payment currency"] = payment.currency
    _common.require(needed, provider=_P)


def _event_id(
    headers: Mapping[str, str],
    event_type: str,
    payment: _Payment,
    refund: _Refund,
    body: bytes,
) -> str:
    """The delivery key of docs/providers.md: the header as received, else event + entity
    id, else the body's hash.

    A refund event never falls back to the payment id: two partial refunds of one payment
    would share it, and the second would be swallowed as a duplicate.
    """
    entity_id = refund.id if event_type.startswith("refund.") else payment.id
    return _keyed(headers, event_type, body, entity_id)


def _keyed(headers: Mapping[str, str], event_type: str, body: bytes, *ids: object) -> str:
    """The event id header as received, else the event and ``ids`` (an entity's id; a
    dispute's and when it was reported), else the body's hash: every delivery's key."""
    header = _common.key_header(headers.get(EVENT_ID_HEADER))
    if header:
        return header
    return _common.unreserved(
        _P, _common.delivery_key(event_type, *ids) or _common.body_key(event_type, body)
    )


__all__ = [
    "DISPUTE_KINDS",
    "DISPUTE_REASONS",
    "EVENT_ID_HEADER",
    "SIGNATURE_HEADER",
    "Razorpay",
    "sign",
]
