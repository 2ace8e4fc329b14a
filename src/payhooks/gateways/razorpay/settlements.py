"""Razorpay's settlements, read: the ``settlement.processed`` webhook, the settlement entity
(``GET /v1/settlements/{id}``) and the settlement recon report
(``GET /v1/settlements/recon/combined?year=&month=&day=``), amounts in integer paise.

Pure: bytes in, values out (``payhooks.gateways._settlements``); the calls are the status
client's (``status.py``). Fields as Razorpay documents them (razorpay.com/docs/api/settlements,
razorpay/razorpay-python ``documents/settlement.md``; docs/providers.md, "Settlements"). A line
Razorpay lists as not settled yet (``settled`` false, or no ``settlement_id``) is counted, not
recorded: it belongs to no payout. One payhooks cannot read is kept as unreadable, with why,
and the rest of its page is read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from payhooks.events import Provider
from payhooks.gateways import _common
from payhooks.gateways._settlements import (
    Line,
    LineKind,
    Named,
    Page,
    Settlement,
    SettlementState,
    epoch,
    loose_text,
    optional_paise,
    optional_text,
    paise,
    read_items,
    text,
)
from payhooks.plumbing.errors import MalformedPayload

_P = Provider.RAZORPAY
PROCESSED = "settlement.processed"
"""The settlement webhook Razorpay documents (razorpay.com/docs/webhooks/settlements)."""
_STATES: Mapping[str, SettlementState] = {
    "created": SettlementState.PENDING,
    "processed": SettlementState.SETTLED,
    "failed": SettlementState.FAILED,
}
_KINDS: Mapping[str, LineKind] = {"payment": LineKind.PAYMENT, "refund": LineKind.REFUND}


def entity(node: object) -> Settlement:
    """A settlement entity: ``id`` (``setl_…``), ``amount``, ``fees``, ``tax``, ``status``
    (created, processed, failed), ``utr``, ``created_at``."""
    status = text(_P, node, "status")
    state = _STATES.get(status)
    if state is None:
        raise MalformedPayload(_P, f"settlement status {_common.shown(status)} is not documented")
    return Settlement(
        provider=_P,
        settlement_id=text(_P, node, "id"),
        state=state,
        status=status,
        amount_paise=paise(_P, node, "amount"),
        fees_paise=optional_paise(_P, node, "fees"),
        tax_paise=optional_paise(_P, node, "tax"),
        currency="INR",  # settlements are to the merchant's Indian bank account
        utr=optional_text(_P, node, "utr"),
        settled_at=epoch(_P, node, "created_at"),
    )


def webhook(body: bytes) -> Settlement:
    """A verified ``settlement.processed`` delivery: its ``payload.settlement.entity``."""
    doc = _common.load_json_object(body, provider=_P)
    found = _common.child(doc, "payload", "settlement", "entity")
    if not isinstance(found, dict):
        raise MalformedPayload(_P, "payload.settlement.entity is missing")
    return entity(found)


def answered(body: bytes, settlement_id: str) -> Settlement:
    """``GET /v1/settlements/{id}``: the settlement entity asked about, as it is now
    (``current``)."""
    doc = _common.load_json_object(body, provider=_P)
    if doc.get("entity") != "settlement":
        raise MalformedPayload(_P, "the answer is not a settlement entity")
    _common.naming(doc, "id", settlement_id, what="settlement", provider=_P)
    return replace(entity(doc), current=True)


def recon(body: bytes) -> Page:
    """``GET /v1/settlements/recon/combined``: a collection whose ``items`` are the day's
    transactions, each read on its own (one payhooks cannot read is kept as such). A page is
    the last when it lists fewer than were asked for: the caller pages with ``count`` and
    ``skip``."""
    doc = _common.load_json_object(body, provider=_P)
    items = doc.get("items")
    if doc.get("entity") != "collection" or not isinstance(items, list):
        raise MalformedPayload(_P, "the recon answer is not a collection with an items list")
    return read_items(_P, items, settled=_settled, line=line, named=named)


def line(item: object) -> Line:
    """One recon item: ``entity_id`` and ``type`` (payment, refund, transfer, adjustment),
    ``amount``, ``fee`` (Razorpay's fee, its tax included), ``tax``, ``credit`` and
    ``debit`` (what it adds to and takes from the payout), the ``settlement_id``, its
    ``settlement_utr`` and ``settled_at``, the ``order_id``, and for a refund or transfer the
    ``payment_id`` it is of (a payment's own ``payment_id`` is null: its ``entity_id`` is)."""
    entry_id = text(_P, item, "entity_id")
    entry_type = text(_P, item, "type")
    kind = _KINDS.get(entry_type, LineKind.ADJUSTMENT)
    payment_id = entry_id if kind is LineKind.PAYMENT else optional_text(_P, item, "payment_id")
    return Line(
        provider=_P,
        settlement_id=text(_P, item, "settlement_id"),
        entry_id=entry_id,
        kind=kind,
        entry_type=entry_type,
        payment_id=payment_id,
        gateway_order_id=optional_text(_P, item, "order_id"),
        amount_paise=paise(_P, item, "amount"),
        fee_paise=paise(_P, item, "fee"),
        tax_paise=paise(_P, item, "tax"),
        net_paise=paise(_P, item, "credit") - paise(_P, item, "debit"),
        currency=optional_text(_P, item, "currency"),
        occurred_at=epoch(_P, item, "created_at"),
        utr=optional_text(_P, item, "settlement_utr"),
        settled_at=epoch(_P, item, "settled_at"),
    )


def named(item: object) -> Named:
    """What a recon item payhooks cannot read names, as far as it reads: its
    ``settlement_id``, its ``entity_id``, and the payment (its own id for a payment)."""
    entry_id = loose_text(_P, item, "entity_id")
    if _common.child(item, "type") == "payment":
        return loose_text(_P, item, "settlement_id"), entry_id, entry_id
    return loose_text(_P, item, "settlement_id"), entry_id, loose_text(_P, item, "payment_id")


def _settled(item: object) -> bool:
    """Part of a payout: ``settled`` true and a ``settlement_id``."""
    if not isinstance(item, dict):
        raise MalformedPayload(_P, "a recon item is not an object")
    settled = item.get("settled")
    if not isinstance(settled, bool):
        raise MalformedPayload(_P, "a recon item's settled is not true or false")
    return settled and item.get("settlement_id") is not None


__all__ = ["PROCESSED", "answered", "entity", "line", "named", "recon", "webhook"]
