"""Payments authorised and not captured (manual capture) at a gateway payhooks captures for
(``Gateway.captures_authorized``: Razorpay), captured once by the worker when
``PAYHOOKS_CAPTURE_AUTHORIZED`` is on: within ``WINDOW``, while the cart is open and the
payment is for its amount. Any other is left to lapse: Razorpay refunds an authorisation
nobody captures (docs/providers.md, "Captures"). The capture's answer is the captured
payment, delivered under reconciliation's key: its order is placed once with the
``payment.captured`` webhook, whichever comes first; a second worker's capture is answered
"already captured" and changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from payhooks.events import Provider
from payhooks.plumbing.db import Connection

WINDOW = timedelta(days=3)
"""How long after its authorisation a payment is captured: well inside Razorpay's own window
before it releases an uncaptured payment."""

DUE = """
SELECT * FROM (
    SELECT DISTINCT ON (p.cart_id) p.payment_id, p.amount_paise, coalesce(p.currency, 'INR'),
           p.created_at
    FROM payments p JOIN carts c ON c.id = p.cart_id
    WHERE p.provider = %(provider)s AND p.status = 'authorized'
      AND p.created_at > now() - %(window)s
      AND c.status = 'open' AND p.amount_paise = c.amount_paise
      AND coalesce(p.currency, 'INR') = c.currency
      AND (p.capture_next_at IS NULL OR p.capture_next_at <= now())
    ORDER BY p.cart_id, p.created_at, p.payment_id
) first_of_each_cart
ORDER BY created_at LIMIT %(limit)s
"""
# Just before the call: the cart still open, and no payment of it captured meanwhile.
STILL_DUE = """
SELECT 1 FROM payments p JOIN carts c ON c.id = p.cart_id
WHERE p.provider = %s AND p.payment_id = %s AND p.status = 'authorized'
  AND c.status = 'open'
  AND NOT EXISTS (SELECT 1 FROM payments o WHERE o.cart_id = p.cart_id
                  AND o.status IN ('captured', 'refunded'))
"""


# A capture that failed is asked again after 30 s, doubling to an hour; from the fifth failure
# on it is an alert (``payhooks.service.alerting.captures_failing``).
FAILED = """
UPDATE payments SET capture_attempts = capture_attempts + 1, capture_error = %(error)s,
    capture_next_at = now() + least(interval '1 hour',
                                    interval '30 seconds' * 2 ^ least(capture_attempts, 12))
WHERE provider = %(provider)s AND payment_id = %(payment_id)s
"""
ALERTED_AFTER = 5
"""Failed captures of one payment past which a person hears of it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Authorised:
    payment_id: str
    amount_paise: int
    currency: str


def due(conn: Connection, provider: Provider, limit: int = 50) -> list[Authorised]:
    """The gateway's authorised payments to capture now, one per cart (the first authorised:
    a customer who paid twice is charged once): their cart open, for its amount."""
    params = {"provider": provider.value, "window": WINDOW, "limit": limit}
    rows = conn.execute(DUE, params).fetchall()
    return [Authorised(payment_id=r[0], amount_paise=int(r[1]), currency=r[2]) for r in rows]


def still_due(conn: Connection, provider: Provider, payment_id: str) -> bool:
    """Asked again just before the capture: its cart may have been paid meanwhile."""
    return conn.execute(STILL_DUE, (provider.value, payment_id)).fetchone() is not None


def failed(conn: Connection, provider: Provider, payment_id: str, error: str) -> None:
    """This payment's capture failed: kept with its error and backed off; the others go on."""
    params = {"provider": provider.value, "payment_id": payment_id, "error": error[:500]}
    conn.execute(FAILED, params)


__all__ = ["ALERTED_AFTER", "WINDOW", "Authorised", "due", "failed", "still_due"]
