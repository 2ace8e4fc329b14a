"""Razorpay payments authorised and not captured (manual capture), captured once by the
worker when ``PAYHOOKS_CAPTURE_AUTHORIZED`` is on: within ``WINDOW``, while the cart is open
and the payment is for its amount. Any other is left to lapse: Razorpay refunds an
authorisation nobody captures (docs/providers.md, "Captures"). The capture's answer is the
captured payment, delivered under reconciliation's key: its order is placed once with the
``payment.captured`` webhook, whichever comes first; a second worker's capture is answered
"already captured" and changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from payhooks.db import Connection

WINDOW = timedelta(days=3)
"""How long after its authorisation a payment is captured: well inside Razorpay's own window
before it releases an uncaptured payment."""

DUE = """
SELECT p.payment_id, p.amount_paise, coalesce(p.currency, 'INR')
FROM payments p JOIN carts c ON c.id = p.cart_id
WHERE p.provider = 'razorpay' AND p.status = 'authorized' AND p.created_at > now() - %(window)s
  AND c.status = 'open' AND p.amount_paise = c.amount_paise
  AND coalesce(p.currency, 'INR') = c.currency
ORDER BY p.created_at LIMIT %(limit)s
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Authorised:
    payment_id: str
    amount_paise: int
    currency: str


def due(conn: Connection, limit: int = 50) -> list[Authorised]:
    """The authorised payments to capture now: their cart open, for its amount."""
    rows = conn.execute(DUE, {"window": WINDOW, "limit": limit}).fetchall()
    return [Authorised(payment_id=r[0], amount_paise=int(r[1]), currency=r[2]) for r in rows]


__all__ = ["WINDOW", "Authorised", "due"]
