"""The reference shop's payments list: its own ``payments`` (every attempt, with its status,
amount, flags and whether it needs a refund), beside the core's payments parked for their
amount, which never reach the shop (``payhooks.console.lists``)."""

from __future__ import annotations

from datetime import datetime

from payhooks.console import lists
from payhooks.plumbing.db import Connection

STATUSES = {
    "created": "created",
    "authorized": "authorised",
    "captured": "captured",
    "refunded": "refunded",
    "failed": "failed",
    "mismatch": lists.STATUSES["mismatch"],
    "settled": lists.STATUSES["settled"],
}

# A failed attempt paid nothing: its amount is what it tried, not what was paid.
SHOP = """
    SELECT p.created_at AS at, 'p ' || p.provider || ' ' || p.payment_id AS key, p.provider,
           p.payment_id, c.gateway_order_id, NULL::text AS event_id, p.status,
           NULL::boolean AS reconciled, k.amount_paise AS expected_paise,
           k.currency AS expected_currency,
           CASE WHEN p.status <> 'failed' THEN p.amount_paise END AS paid_paise,
           CASE WHEN p.status <> 'failed' THEN p.currency END AS paid_currency,
           NULL::text AS resolution, p.flags, p.needs_refund
    FROM payments p
    LEFT JOIN carts k ON k.id = p.cart_id
    LEFT JOIN checkouts c ON c.cart_id = p.cart_id AND c.provider = p.provider
    WHERE p.created_at < %(end)s
      AND (%(start)s::timestamptz IS NULL OR p.created_at >= %(start)s)
      AND (%(provider)s::text IS NULL OR p.provider = %(provider)s)
      AND (NOT %(mismatch)s OR 'amount_mismatch' = ANY(p.flags))"""
# The shop refunds a payment that was not the amount expected (its alert says so) until a
# person settles it otherwise.
_PAYMENTS = lists.paged(SHOP, lists.mismatched(refunded_until_settled=True))

NOTE = (
    "Every payment attempt the shop recorded, with its cart's amount and what the gateway "
    "says was paid, and the payments parked because they were not the amount expected."
)


def read(
    conn: Connection,
    chosen: lists.PaymentFilter,
    before: tuple[datetime, str] | None = None,
    limit: int = lists.PAGE,
) -> list[lists.Payment]:
    return lists.read_payments(conn, _PAYMENTS, chosen, before, limit)


SHOP_PAYMENTS = lists.Payments(
    read=read,
    statuses=STATUSES,
    needs_refund="flagged for a refund: a double payment, an amount mismatch",
)

__all__ = ["NOTE", "SHOP_PAYMENTS", "STATUSES", "read"]
