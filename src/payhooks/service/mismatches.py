"""Payments of another amount or currency than the checkout's, parked by the core before the
shop's state machine (``payhooks.intake.expectations``), told to the merchant by email: one alert
per payment, queued in the transaction that marks the mismatch alerted, so none is sent twice and
none is lost if the worker stops between the two."""

from __future__ import annotations

import logging

from payhooks.gateways import title_of
from payhooks.plumbing.db import Connection
from payhooks.service import outbox

_UNALERTED = """
UPDATE payhooks_amount_mismatches m SET alerted_at = now()
WHERE (m.provider, m.event_id) IN (
    SELECT provider, event_id FROM payhooks_amount_mismatches
    WHERE alerted_at IS NULL ORDER BY found_at LIMIT %s FOR UPDATE SKIP LOCKED)
RETURNING m.provider, m.event_id, m.gateway_order_id, m.payment_id, m.expected_paise,
    m.expected_currency, m.paid_paise, m.paid_currency,
    (SELECT e.reference FROM payhooks_expectations e
     WHERE e.provider = m.provider AND e.gateway_order_id = m.gateway_order_id)
"""


_UNTOLD = """
UPDATE payhooks_amount_mismatches SET alerted_at = NULL WHERE provider = %s AND event_id = %s
"""
log = logging.getLogger("payhooks.service.worker")


def alert_new(conn: Connection, limit: int = 100) -> int:
    """Queue an alert for each mismatch not yet told; returns how many were. One whose alert
    cannot be queued (a row the database refuses) is left untold, for the next pass, and
    holds back no other."""
    told = 0
    with conn.transaction():
        rows = conn.execute(_UNALERTED, (limit,)).fetchall()
        for row in rows:
            try:
                with conn.transaction():
                    outbox.enqueue(conn, _alert(*row))
            except Exception as exc:
                conn.execute(_UNTOLD, (row[0], row[1]))
                error = f"{type(exc).__name__}: {exc}"[:500]
                fields = {"provider": row[0], "event_id": row[1], "error": error}
                log.exception("mismatch_alert_failed", extra=fields)
                continue
            told += 1
    return told


def _alert(
    provider: str,
    event_id: str,
    order_id: str,
    payment_id: str | None,
    expected: int,
    expected_currency: str,
    paid: int | None,
    paid_currency: str,
    cart_id: str | None,
) -> outbox.Message:
    payment = payment_id or event_id
    got = "an unknown amount" if paid is None else f"{paid} {paid_currency}"
    gateway = title_of(provider)
    return outbox.alert(
        f"alert:amount_mismatch:{provider}:{payment}",
        f"Refund needed: amount mismatch for {gateway} payment {payment}",
        f"{gateway} payment {payment} was paid {got} for checkout {order_id} "
        f"(cart {cart_id}), which is {expected} {expected_currency}. No order was placed; the "
        "delivery is parked. It needs a refund, or the customer must pay the difference.",
        provider=provider,
        payment_id=payment,
        flag="amount_mismatch",
        event_id=event_id,
    )


__all__ = ["alert_new"]
