"""PhonePe callbacks (PG v2): ``Authorization`` holds the lowercase hex SHA-256 of the
webhook's ``username:password``, the same value on every callback, and nothing signs the body.
Whoever learns that value can write any body under it, so every event is ``unconfirmed``: it
takes effect only as PhonePe's order status API confirms it (``payhooks.intake.confirmations``)."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

from payhooks.events import Event, EventKind, Provider
from payhooks.gateways import _common
from payhooks.plumbing.errors import SignatureMismatch

AUTHORIZATION_HEADER = "authorization"
_HEADERS_READ: tuple[str, ...] = (AUTHORIZATION_HEADER,)
MAX_BODY_BYTES = 64 * 1024
"""A callback is 1-2 KB. It is parsed once the static credential matched, which anyone holding
it can send: a tighter bound than the signed JSON gateways' 1 MiB."""
_P = Provider.PHONEPE
_DIGEST = re.compile(r"[0-9a-f]{64}")

CAPTURES = frozenset({"checkout.order.completed", "pg.order.completed"})
FAILURES = frozenset({"checkout.order.failed", "pg.order.failed"})
REFUNDED = "pg.refund.completed"
COMPLETED = "COMPLETED"
FAILED_STATES = frozenset({"FAILED", "EXPIRED"})
"""An order's final failure: the status API says FAILED; a docs sample of ``pg.order.failed``
says EXPIRED."""


def authorization(credential: str) -> str:
    """The ``Authorization`` value PhonePe sends for ``username:password``: lowercase hex
    SHA-256, no scheme prefix (the SDKs' ``is_callback_valid``)."""
    return hashlib.sha256(credential.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Order:
    """What an order's (or a refund's) payload says; each field None until required."""

    state: str | None = None
    order_id: str | None = None
    merchant_ref: str | None = None
    amount: int | None = None
    currency: str | None = None
    payment_id: str | None = None
    bank_ref: str | None = None
    refund_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PhonePe(_common.CredentialsAdapter):
    """``credentials``: each webhook's ``username:password`` as set in PhonePe's dashboard;
    several are tried while one is rotated out (a retry may still carry the old one)."""

    provider = _P
    headers_read = _HEADERS_READ
    max_body_bytes = MAX_BODY_BYTES
    missing = "PhonePe needs at least one webhook username:password"
    malformed = (
        "each PhonePe webhook credential is username:password as set in "
        "PhonePe's dashboard, both non-empty"
    )

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """The header against each credential's digest, in constant time; the body plays no
        part (PhonePe signs none)."""
        given = _common.header_value(headers, AUTHORIZATION_HEADER)
        if not given:
            raise SignatureMismatch(_P, "Authorization header missing")
        if not _DIGEST.fullmatch(given):
            raise SignatureMismatch(
                _P, "Authorization is not 64 lowercase hex characters (sha256 of username:password)"
            )
        found = False
        for credential in self.credentials:
            found |= hmac.compare_digest(authorization(credential).encode(), given.encode())
        if not found:
            raise SignatureMismatch(_P, "Authorization matches no configured webhook credential")

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Event:
        """A callback as an unconfirmed ``Event``: it takes effect once the order
        status API confirms it."""
        doc = _common.load_json_object(body, provider=_P)
        event_type = _common.event_name(doc.get("event"), "event", provider=_P)
        payload = doc.get("payload")
        state = _text(_common.child(payload, "state"), "state", strict=False)
        kind = kind_of(event_type, state)
        order = _read(payload, event_type, state, strict=kind is not EventKind.OTHER)
        _require(kind, order)
        refund = is_refund(event_type)  # no payment named: the attempt listed is the refund's
        return Event(
            provider=_P,
            kind=kind,
            event_type=event_type,
            event_id=event_id(event_type, payload, order, body),
            payment_id=None if refund else order.payment_id,
            merchant_ref=order.merchant_ref,
            amount_paise=None if refund else order.amount,
            currency=order.currency,
            refund_id=order.refund_id,
            refund_amount_paise=order.amount if refund else None,
            bank_ref=order.bank_ref,
            payload_sha256=_common.sha256_hex(body),
            unconfirmed=True,
        )


def kind_of(event_type: str, state: str | None) -> EventKind:
    """Acted on only where the event and the payload's own ``state`` agree (PhonePe: rely on
    the root-level state); anything else, unknown names and values included, is kept as
    OTHER."""
    if event_type in CAPTURES and state == COMPLETED:
        return EventKind.PAYMENT_CAPTURED
    if event_type in FAILURES and state in FAILED_STATES:
        return EventKind.PAYMENT_FAILED
    if event_type == REFUNDED and state == COMPLETED:
        return EventKind.REFUND_PROCESSED
    return EventKind.OTHER


def is_refund(event_type: str) -> bool:
    """The event is about a refund (``pg.refund.*``)."""
    return event_type.startswith("pg.refund.")


def _read(payload: object, event_type: str, state: str | None, *, strict: bool) -> _Order:
    """Strict for events acted on; for the rest an odd field is left out, so an authentic
    event that is ignored is still answered 200 (PhonePe: "avoid strict deserialization")."""
    if not isinstance(payload, dict):  # no state either: the event is OTHER
        return _Order()
    refund = is_refund(event_type)
    attempt = latest_attempt(payload.get("paymentDetails"), state)
    return _Order(
        state=state,
        order_id=_text(payload.get("orderId"), "orderId", strict=strict),
        merchant_ref=_text(
            payload.get("originalMerchantOrderId" if refund else "merchantOrderId"),
            "originalMerchantOrderId" if refund else "merchantOrderId",
            strict=strict,
        ),
        amount=paise(payload.get("amount"), "amount", strict=strict),
        currency=_text(payload.get("currency"), "currency", strict=strict) or "INR",
        payment_id=_text(_common.child(attempt, "transactionId"), "transactionId", strict=strict),
        bank_ref=bank_reference(attempt),
        refund_id=_refund_id(payload, strict=strict) if refund else None,
    )


def latest_attempt(details: object, state: str | None) -> dict[str, object] | None:
    """The attempt an order's state is about: of a COMPLETED order, its completed attempt;
    else the latest (greatest ``timestamp``, then the last listed). The webhook and the status
    API (asked with ``details=true``) pick the same one, so their payment ids agree."""
    attempts = [a for a in details if isinstance(a, dict)] if isinstance(details, list) else []
    if state == COMPLETED:
        done = [a for a in attempts if a.get("state") == COMPLETED]
        attempts = done or attempts
    if not attempts:
        return None
    return max(enumerate(attempts), key=lambda pair: (_millis(pair[1]), pair[0]))[1]


def _millis(attempt: Mapping[str, object]) -> int:
    stamp = attempt.get("timestamp")
    return stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else -1


def bank_reference(attempt: object) -> str | None:
    """The number on the customer's statement: a UPI rail's ``utr`` (on the attempt, or on a
    split instrument's rail), else a card's or netbanking's ``bankTransactionId``. For search
    only: an odd one is left out."""
    splits = _common.child(attempt, "splitInstruments")
    split_utrs = (
        [_common.child(s, "rail", "utr") for s in splits] if isinstance(splits, list) else []
    )
    return _common.reference(
        _common.child(attempt, "rail", "utr"),
        *split_utrs,
        _common.child(attempt, "rail", "rrn"),
        _common.child(attempt, "instrument", "bankTransactionId"),
    )


def _refund_id(payload: Mapping[str, object], *, strict: bool) -> str | None:
    """The merchant's ``merchantRefundId`` (what the refund status API is asked with; in every
    sample), else PhonePe's ``refundId``."""
    return _text(payload.get("merchantRefundId"), "merchantRefundId", strict=strict) or _text(
        payload.get("refundId"), "refundId", strict=strict
    )


def _require(kind: EventKind, order: _Order) -> None:
    needed: Mapping[str, object]
    if kind is EventKind.PAYMENT_CAPTURED:
        needed = {
            "merchantOrderId": order.merchant_ref,
            "amount": order.amount,
            "paymentDetails[].transactionId": order.payment_id,
        }
    elif kind is EventKind.PAYMENT_FAILED:
        needed = {"merchantOrderId": order.merchant_ref, "amount": order.amount}
    elif kind is EventKind.REFUND_PROCESSED:
        needed = {
            "merchantRefundId": order.refund_id,
            "amount": order.amount,
            "originalMerchantOrderId": order.merchant_ref,
        }
    else:
        return
    _common.require(needed, provider=_P)


def event_id(event_type: str, payload: object, order: _Order, body: bytes) -> str:
    """The delivery key. PhonePe sends no event id, so it is derived from what stays the same
    on every retry of one event and differs between events, and covers what its confirmation
    asks PhonePe about: an order reaches a state once (``event:merchantOrderId:state``, the
    id the order status API is asked with); one order can fail several attempts
    (``...:transactionId`` added); a refund is its order and id
    (``event:originalMerchantOrderId:merchantRefundId:state``, both asked about); a
    subscription its id, state and pause start. A part holding a ':' (ambiguous) or nothing
    to key on: the body's hash. No key takes a key space payhooks mints (``unreserved``)."""
    key = _derived(event_type, payload, order) or _common.body_key(event_type, body)
    return _common.unreserved(_P, key)


def _derived(event_type: str, payload: object, order: _Order) -> str | None:
    if is_refund(event_type):
        return _common.plain_key(event_type, order.merchant_ref, order.refund_id, order.state)
    placed = order.merchant_ref or order.order_id
    if ".transaction." in event_type:
        return _common.plain_key(event_type, placed, order.state, order.payment_id)
    if placed is not None:
        return _common.plain_key(event_type, placed, order.state)
    subscription = _text(
        _common.child(payload, "subscriptionId")
        or _common.child(payload, "merchantSubscriptionId"),
        "subscriptionId",
        strict=False,
    )
    paused = _common.child(payload, "pauseStartDate")
    extra = (paused,) if isinstance(paused, int) and not isinstance(paused, bool) else ()
    return _common.plain_key(event_type, subscription, order.state, *extra)


def paise(value: object, field: str, *, strict: bool) -> int | None:
    """PhonePe amounts are integer paise."""
    return _common.paise_field(value, field, strict=strict, provider=_P)


def _text(value: object, field: str, *, strict: bool) -> str | None:
    return _common.text_field(value, field, strict=strict, provider=_P)


__all__ = [
    "AUTHORIZATION_HEADER",
    "CAPTURES",
    "FAILURES",
    "MAX_BODY_BYTES",
    "REFUNDED",
    "PhonePe",
    "authorization",
    "bank_reference",
    "event_id",
    "is_refund",
    "kind_of",
    "latest_attempt",
    "paise",
]
