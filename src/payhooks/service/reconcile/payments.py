"""What a gateway's status API says about an order's payments, as events: pure, no I/O.

Each payment the API reports becomes a ``Received`` whose ``Event`` carries what a webhook for
that payment would carry (provider, payment id, merchant reference, amounts, kind), under a
delivery key of its own, ``reconcile:<payment id>:<status>``. No webhook key can take it: key
headers holding a ':' are refused (``providers._common.key_header``) and no gateway derives a
key starting with ``reconcile:``. So the reconciled event and a late webhook are two deliveries
with one meaning, and the business keys (one payment row, one order per cart) make them take
effect once, whichever comes first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from payhooks.errors import GatewayApiError, MalformedPayload
from payhooks.events import Event, EventKind, Provider, Received
from payhooks.ingest import storable
from payhooks.providers import cashfree as cashfree_amounts
from payhooks.providers._common import child, reference, rupees_to_paise, sha256_hex
from payhooks.service.reconcile.errors import CredentialsRefused

KEY_PREFIX = "reconcile"
PAYU_NOT_FOUND = "Not Found"
MAX_SAID_CHARS = 200
_PAYU_CREDENTIALS = re.compile(r"\b(hash|key)\b", re.IGNORECASE)

_RAZORPAY_KINDS: Mapping[str, EventKind] = {
    "authorized": EventKind.PAYMENT_AUTHORIZED,
    "captured": EventKind.PAYMENT_CAPTURED,
    "failed": EventKind.PAYMENT_FAILED,
}
# The webhook acts on SUCCESS (capture), PENDING (late authorisation) and the failed and
# user-dropped webhooks; the API's other states (NOT_ATTEMPTED, VOID, CANCELLED) carry nothing.
_CASHFREE_KINDS: Mapping[str, EventKind] = {
    "SUCCESS": EventKind.PAYMENT_CAPTURED,
    "PENDING": EventKind.PAYMENT_PENDING,
    "FAILED": EventKind.PAYMENT_FAILED,
    "USER_DROPPED": EventKind.PAYMENT_FAILED,
}
_PAYU_KINDS: Mapping[str, EventKind] = {
    "success": EventKind.PAYMENT_CAPTURED,
    "failure": EventKind.PAYMENT_FAILED,
    "pending": EventKind.PAYMENT_PENDING,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """One answer of a status API about one checkout: its payments as deliveries to ingest,
    what was left aside (refunded payments, states that carry nothing), and whether the
    gateway says the checkout expired."""

    received: tuple[Received, ...] = ()
    skipped: tuple[str, ...] = ()
    expired: bool = False


def key(payment_id: str, status: str) -> str:
    return f"{KEY_PREFIX}:{payment_id}:{status}"


def canonical(entity: object) -> bytes:
    """The payment as the API returned it, serialised canonically (sorted keys, no spaces)."""
    return json.dumps(entity, sort_keys=True, separators=(",", ":"), default=str).encode()


def razorpay(order_id: str, body: bytes) -> Report:
    """``GET /v1/orders/{id}/payments``: a collection whose ``items`` are payment entities,
    amounts in integer paise. A ``refunded`` payment is left aside: its refund comes with the
    refund webhook, and a capture alone would place an order for money given back."""
    doc = _json(Provider.RAZORPAY, body)
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise MalformedPayload(Provider.RAZORPAY, "payments answer has no items list")
    received: list[Received] = []
    skipped: list[str] = []
    for entity in items:
        status = _text(Provider.RAZORPAY, entity, "status")
        kind = _RAZORPAY_KINDS.get(status)
        payment_id = _text(Provider.RAZORPAY, entity, "id")
        if kind is None or entity.get("order_id") != order_id:
            skipped.append(f"{payment_id}:{status}")
            continue
        amount = entity.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise MalformedPayload(Provider.RAZORPAY, f"payment {payment_id} amount is not paise")
        event = _event(
            Provider.RAZORPAY, entity, kind=kind, status=status, payment_id=payment_id,
            merchant_ref=order_id, amount_paise=amount, currency=entity.get("currency"),
            bank_ref=reference(
                child(entity, "acquirer_data", "rrn"),
                child(entity, "acquirer_data", "bank_transaction_id"),
            ),
        )  # fmt: skip
        received.append(event)
    return Report(received=tuple(received), skipped=tuple(skipped))


def cashfree(order_id: str, body: bytes) -> Report:
    """``GET /pg/orders/{id}/payments``: a JSON array of payment entities, amounts in rupees
    (JSON numbers, read exactly); ``cf_payment_id`` a string (an integer in older versions)."""
    doc = _json(Provider.CASHFREE, body)
    if not isinstance(doc, list):
        raise MalformedPayload(Provider.CASHFREE, "payments answer is not a list")
    received: list[Received] = []
    skipped: list[str] = []
    for entity in doc:
        status = _text(Provider.CASHFREE, entity, "payment_status")
        raw_id = entity.get("cf_payment_id")
        payment_id = (
            str(raw_id)
            if isinstance(raw_id, int)
            else _text(Provider.CASHFREE, entity, "cf_payment_id")
        )
        kind = _CASHFREE_KINDS.get(status)
        if kind is None or entity.get("order_id", order_id) != order_id:
            skipped.append(f"{payment_id}:{status}")
            continue
        ordered = entity.get("order_amount", entity.get("payment_amount"))
        paid = entity.get("payment_amount")
        paid_paise = None if paid is None else _rupees(Provider.CASHFREE, paid, "payment_amount")
        compared = cashfree_amounts.compared_paise(
            _rupees(Provider.CASHFREE, ordered, "order_amount"),
            paid_paise,
            entity.get("payment_offers"),
            entity.get("payment_surcharge"),
        )
        assert compared is not None  # the order amount was read
        event = _event(
            Provider.CASHFREE, entity, kind=kind, status=status, payment_id=payment_id,
            merchant_ref=order_id, amount_paise=compared, payment_amount_paise=paid_paise,
            currency=entity.get("order_currency") or entity.get("payment_currency"),
            bank_ref=reference(entity.get("bank_reference")),
        )  # fmt: skip
        received.append(event)
    return Report(received=tuple(received), skipped=tuple(skipped))


CASHFREE_EXPIRED = frozenset({"EXPIRED", "TERMINATED"})


def cashfree_order_expired(body: bytes) -> bool:
    """``GET /pg/orders/{id}``: the order's ``order_status``; EXPIRED or TERMINATED means no
    payment can come for it any more."""
    doc = _json(Provider.CASHFREE, body)
    return isinstance(doc, dict) and doc.get("order_status") in CASHFREE_EXPIRED


def payu(txnid: str, body: bytes) -> Report:
    """``verify_payment``: ``transaction_details`` keyed by txnid, ``amt`` a rupee string.
    A txnid PayU does not know comes back with its entry's ``status: Not Found``: nothing to
    report. Only that: an answer with no entry (``{"status":0,"msg":"Invalid Hash."}`` for a
    wrong salt) is PayU refusing the call, never "no payment yet"."""
    doc = _json(Provider.PAYU, body)
    details = doc.get("transaction_details") if isinstance(doc, dict) else None
    entity = details.get(txnid) if isinstance(details, dict) else None
    if not isinstance(entity, dict):
        if isinstance(doc, dict) and doc.get("status") == 0:
            raise _payu_refusal(doc)
        raise MalformedPayload(Provider.PAYU, "verify_payment answer has no transaction_details")
    status = _text(Provider.PAYU, entity, "status")
    if status == PAYU_NOT_FOUND:
        return Report()
    kind = _PAYU_KINDS.get(status)
    if kind is None or entity.get("txnid", txnid) != txnid:
        return Report(skipped=(f"{txnid}:{status}",))
    event = _event(
        Provider.PAYU, entity, kind=kind, status=status, payment_id=txnid, merchant_ref=txnid,
        amount_paise=_rupees(Provider.PAYU, entity.get("amt"), "amt"), currency="INR",
        bank_ref=reference(entity.get("bank_ref_num"), entity.get("bank_ref_no")),
    )  # fmt: skip
    return Report(received=(event,))


def _payu_refusal(doc: Mapping[str, Any]) -> GatewayApiError:
    """``status: 0`` with no entry for the txnid, in an HTTP 200: PayU's ``msg`` says why. A
    hash or key it refuses is the credentials (the salt), not this checkout."""
    said = printable(doc.get("msg")) or "no msg"
    error = CredentialsRefused if _PAYU_CREDENTIALS.search(said) else GatewayApiError
    return error(Provider.PAYU.value, f"refused: {said}", status=200)


def printable(value: object, limit: int = MAX_SAID_CHARS) -> str | None:
    """A gateway's own words for an operator's eyes and a text column: at most ``limit``
    characters, each control character, lone surrogate or other unprintable one a space."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = "".join(c if c.isprintable() else " " for c in value[: limit + 1])
    return text if len(text) <= limit else text[:limit] + "…"


def _event(
    provider: Provider,
    entity: Mapping[str, Any],
    *,
    kind: EventKind,
    status: str,
    payment_id: str,
    merchant_ref: str,
    amount_paise: int,
    currency: object,
    payment_amount_paise: int | None = None,
    bank_ref: str | None = None,
) -> Received:
    body = canonical(entity)
    event = Event(
        provider=provider,
        kind=kind,
        event_type=f"{KEY_PREFIX}.payment.{status}",
        event_id=key(payment_id, status),
        payment_id=payment_id,
        merchant_ref=merchant_ref,
        amount_paise=amount_paise,
        payment_amount_paise=payment_amount_paise,
        currency=currency if isinstance(currency, str) and currency else None,
        bank_ref=bank_ref,
        payload_sha256=sha256_hex(body),
    )
    return Received(event=storable(event), body=body, headers={})


def restored(provider: Provider, event_id: str, body: bytes) -> Received:
    """A reconciled payment as it was stored (its canonical body), read again under its key:
    for a replay or the console, like ``ingest.restored`` for a webhook."""
    entity = _json(provider, body)
    if not isinstance(entity, dict):
        raise MalformedPayload(provider, "stored payment is not an object")
    if provider is Provider.RAZORPAY:
        report = razorpay(str(entity.get("order_id")), canonical({"items": [entity]}))
    elif provider is Provider.CASHFREE:
        report = cashfree(str(entity.get("order_id")), canonical([entity]))
    else:
        txnid = event_id.removeprefix(KEY_PREFIX + ":").rsplit(":", 1)[0]  # PayU's payment id
        report = payu(txnid, canonical({"transaction_details": {txnid: entity}}))
    found = [r for r in report.received if r.event.event_id == event_id]
    if not found:
        raise MalformedPayload(provider, f"stored payment does not read as {event_id}")
    return found[0]


def is_reconciled(event_id: str) -> bool:
    return event_id.startswith(KEY_PREFIX + ":")


def _json(provider: Provider, body: bytes) -> Any:
    try:
        return json.loads(body, parse_float=Decimal)
    except (ValueError, RecursionError) as exc:
        raise MalformedPayload(provider, "status API answer is not JSON") from exc


def _text(provider: Provider, entity: object, name: str) -> str:
    value = entity.get(name) if isinstance(entity, dict) else None
    if not isinstance(value, str) or value == "":
        raise MalformedPayload(provider, f"payment {name} is missing or not a string")
    return value


def _rupees(provider: Provider, value: object, name: str) -> int:
    if isinstance(value, float):  # never: parsed as Decimal; refused rather than rounded
        raise MalformedPayload(provider, f"{name} is not exact")
    return rupees_to_paise(value, provider=provider, field=name)


__all__ = [
    "KEY_PREFIX",
    "Report",
    "canonical",
    "cashfree",
    "cashfree_order_expired",
    "is_reconciled",
    "key",
    "payu",
    "printable",
    "razorpay",
    "restored",
]
