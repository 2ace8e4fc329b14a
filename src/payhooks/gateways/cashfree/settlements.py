"""Cashfree's settlements, read: the settlement webhooks (``SETTLEMENT_INITIATED``,
``SETTLEMENT_SUCCESS``, ``SETTLEMENT_FAILED``, ``SETTLEMENT_REVERSED``) and the Settlement
Reconciliation API (``POST /pg/settlement/recon``, API version 2025-01-01: each item's
``event_details``, ``order_details``, ``payment_details``, ``settlement_details``), amounts in
rupees (JSON numbers, read exactly).

Pure: bytes in, values out (``payhooks.gateways._settlements``); the calls are the status
client's (``status.py``). Fields as Cashfree documents them (cashfree.com/docs, "Settlement
Webhooks" and "Settlement Reconciliation"; the schema of Cashfree's own generated SDK,
cashfree/cashfree-pg; docs/providers.md, "Settlements"). A recon item naming no settlement yet
is counted, not recorded: it belongs to no payout. One payhooks cannot read is kept as
unreadable, with why, and the rest of its page is read."""

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
    iso_time,
    loose_text,
    optional_rupees,
    optional_text,
    read_items,
    rupees,
    signed,
    text,
)
from payhooks.plumbing.errors import MalformedPayload

_P = Provider.CASHFREE
STATES: Mapping[str, SettlementState] = {
    "SETTLEMENT_INITIATED": SettlementState.PENDING,
    "SETTLEMENT_SUCCESS": SettlementState.SETTLED,
    "SETTLEMENT_FAILED": SettlementState.FAILED,
    "SETTLEMENT_REVERSED": SettlementState.REVERSED,
}
"""Each settlement webhook's type, and the state it says the payout is in."""
_KINDS: Mapping[str, LineKind] = {"PAYMENT": LineKind.PAYMENT, "REFUND": LineKind.REFUND}
_SALE_TYPES = ("CREDIT", "DEBIT")


def webhook(body: bytes) -> Settlement:
    """A verified settlement webhook: ``type`` says the state, ``data.settlement`` the
    payout: ``settlement_id`` (a JSON number), ``amount_settled``, ``service_charge``,
    ``service_tax``, ``utr`` (a number or a string), ``status``, ``settled_on``."""
    doc = _common.load_json_object(body, provider=_P)
    kind = doc.get("type")
    state = STATES.get(kind) if isinstance(kind, str) else None
    if state is None:
        raise MalformedPayload(_P, "the type is not a settlement webhook's")
    node = _common.child(doc, "data", "settlement")
    if not isinstance(node, dict):
        raise MalformedPayload(_P, "data.settlement is missing")
    settled = state is SettlementState.SETTLED
    amount = (rupees if settled else optional_rupees)(_P, node, "amount_settled")
    return Settlement(
        provider=_P,
        settlement_id=text(_P, node, "settlement_id"),
        state=state,
        status=optional_text(_P, node, "status") or str(kind),
        amount_paise=amount,
        fees_paise=optional_rupees(_P, node, "service_charge"),
        tax_paise=optional_rupees(_P, node, "service_tax"),
        currency="INR",  # settlements are to the merchant's Indian bank account
        utr=optional_text(_P, node, "utr"),
        settled_at=iso_time(_P, node, "settled_on")
        or iso_time(_P, node, "settlement_initiated_on"),
    )


def recon(body: bytes) -> Page:
    """``POST /pg/settlement/recon``: ``data`` (the items, each read on its own: one payhooks
    cannot read is kept as such), ``cursor`` (where the next page starts; null or empty on the
    last) and ``limit``."""
    doc = _common.load_json_object(body, provider=_P)
    items = doc.get("data")
    if not isinstance(items, list):
        raise MalformedPayload(_P, "the recon answer has no data list")
    cursor = doc.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise MalformedPayload(_P, "the recon answer's cursor is not a string")
    page = read_items(_P, items, settled=_settled, line=line, named=named)
    return replace(page, cursor=cursor or None)


def line(item: object) -> Line:
    """One recon item: ``event_details`` (``event_id``, ``event_type`` PAYMENT, REFUND or an
    adjustment's, ``sale_type`` CREDIT or DEBIT, ``event_amount``,
    ``event_settlement_amount``, ``event_service_charge``, ``event_service_tax``,
    ``event_currency``, ``event_time``), ``order_details.order_id``,
    ``payment_details.cf_payment_id`` and ``settlement_details`` (``cf_settlement_id``,
    ``utr``, ``settlement_date``). A charge or its tax missing or null says nothing of what
    Cashfree took: the item is unreadable, never read as charged nothing (0 is 0)."""
    event = _common.child(item, "event_details")
    entry_type = text(_P, event, "event_type")
    sale = text(_P, event, "sale_type")
    if sale not in _SALE_TYPES:
        raise MalformedPayload(_P, "event_details.sale_type is neither CREDIT nor DEBIT")
    debit = sale == "DEBIT"
    return Line(
        provider=_P,
        settlement_id=text(_P, item, "settlement_details", "cf_settlement_id"),
        entry_id=text(_P, event, "event_id"),
        kind=_KINDS.get(entry_type, LineKind.ADJUSTMENT),
        entry_type=entry_type,
        payment_id=optional_text(_P, item, "payment_details", "cf_payment_id"),
        gateway_order_id=optional_text(_P, item, "order_details", "order_id"),
        amount_paise=rupees(_P, event, "event_amount"),
        fee_paise=rupees(_P, event, "event_service_charge"),
        tax_paise=rupees(_P, event, "event_service_tax"),
        net_paise=signed(rupees(_P, event, "event_settlement_amount"), debit=debit),
        currency=optional_text(_P, event, "event_currency"),
        occurred_at=iso_time(_P, event, "event_time"),
        utr=optional_text(_P, item, "settlement_details", "utr"),
        settled_at=iso_time(_P, item, "settlement_details", "settlement_date"),
    )


def named(item: object) -> Named:
    """What a recon item payhooks cannot read names, as far as it reads: its
    ``cf_settlement_id``, its ``event_id`` and its ``cf_payment_id``."""
    return (
        loose_text(_P, item, "settlement_details", "cf_settlement_id"),
        loose_text(_P, item, "event_details", "event_id"),
        loose_text(_P, item, "payment_details", "cf_payment_id"),
    )


def _settled(item: object) -> bool:
    """Part of a payout: its ``settlement_details`` name one. An item naming no event (an
    error object among them) is no line at all, never one not settled yet."""
    if not isinstance(item, dict):
        raise MalformedPayload(_P, "a recon item is not an object")
    text(_P, item, "event_details", "event_id")
    return optional_text(_P, item, "settlement_details", "cf_settlement_id") is not None


__all__ = ["STATES", "line", "named", "recon", "webhook"]
