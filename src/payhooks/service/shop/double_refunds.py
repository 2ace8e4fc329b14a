"""The double-payment policy (``PAYHOOKS_REFUND_DOUBLE_PAYMENTS``, off by default): the
second payment of a cart already paid (flagged ``duplicate_payment``, ``needs_refund``) is
refunded automatically, once: an intent (``payhooks.refunds``) under the key
``double:<payment id>``, sent by the worker's sender like any other. A payment of a gateway
payhooks does not refund keeps its flag for a person."""

from __future__ import annotations

import logging

from payhooks import refunds
from payhooks.db import Connection
from payhooks.errors import Conflict, InvalidRequest
from payhooks.gateways import GATEWAYS

GATEWAY_ORDER = """(SELECT w.merchant_ref FROM processed_webhooks w
        WHERE w.provider = p.provider AND w.payment_id = p.payment_id
          AND w.merchant_ref IS NOT NULL LIMIT 1)"""
"""The gateway order payment ``p`` was made under (Cashfree refunds name it), read through
the records' payment index."""

DUE = f"""
SELECT p.provider, p.payment_id, p.amount_paise, p.currency, p.cart_id, {GATEWAY_ORDER}
FROM payments p
WHERE p.needs_refund AND p.provider = ANY(%s) AND 'duplicate_payment' = ANY(p.flags)
  AND p.refunded_paise = 0 AND p.amount_paise > 0 AND coalesce(p.currency, 'INR') ~ '^[A-Z]{{3}}$'
  AND NOT EXISTS (SELECT 1 FROM payhooks_refunds r
                  WHERE r.provider = p.provider AND r.payment_id = p.payment_id)
ORDER BY p.created_at LIMIT %s
"""
REQUESTED_BY = "payhooks (double-payment policy)"
log = logging.getLogger("payhooks.worker")


def key_of(payment_id: str) -> str:
    return f"double:{payment_id}"


def request_due(conn: Connection, *, limit: int = 50) -> int:
    """An intent for each double payment not yet refunded; how many were written. Each in a
    transaction of its own, keyed on the payment: two workers at once write one."""
    providers = [p.value for p, gateway in GATEWAYS.items() if gateway.sends_refunds]
    written = 0
    for provider, payment_id, amount, currency, cart_id, order_ref in conn.execute(
        DUE, (providers, limit)
    ).fetchall():
        try:
            with conn.transaction():
                refunds.request(
                    conn, provider, payment_id, int(amount), key=key_of(payment_id),
                    captured_paise=int(amount), reason=f"double payment of cart {cart_id}",
                    requested_by=REQUESTED_BY, currency=currency or "INR",
                    gateway_order_id=order_ref,
                )  # fmt: skip
        except (InvalidRequest, Conflict) as exc:  # one odd payment holds back no other
            log.warning("double_payment_not_refunded",
                        extra={"provider": provider, "payment_id": payment_id,
                               "detail": str(exc)})  # fmt: skip
            continue
        except Exception as exc:  # a row the database refuses: this payment only, asked again
            log.exception("double_payment_not_refunded",
                          extra={"provider": provider, "payment_id": payment_id,
                                 "detail": f"{type(exc).__name__}: {exc}"[:500]})  # fmt: skip
            continue
        written += 1
    return written


__all__ = ["GATEWAY_ORDER", "REQUESTED_BY", "key_of", "request_due"]
