"""Payments authorised and not captured (manual capture) at a gateway payhooks captures for
(``Gateway.captures_authorized``: Razorpay), captured once by the worker when
``PAYHOOKS_CAPTURE_AUTHORIZED`` is on: within ``WINDOW``, while the cart is open and the
payment is for its amount. Any other is left to lapse: Razorpay refunds an authorisation
nobody captures (docs/providers.md, "Captures"). The capture's answer is the captured
payment, delivered under reconciliation's key: its order is placed once with the
``payment.captured`` webhook, whichever comes first. One payment of a cart is captured: it is
claimed just before the call, under its cart's lock, and marked attempted for good, so no
other payment of that cart is captured after it, whatever its capture comes to; one whose
capture failed or went unanswered is asked again after its backoff (Razorpay answers
"already captured", and the payment is read), for a day past the window
(``ATTEMPTED_WINDOW``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from payhooks.events import Provider
from payhooks.plumbing.db import Connection

WINDOW = timedelta(days=3)
"""How long after its authorisation a payment is captured: well inside Razorpay's own window
before it releases an uncaptured payment."""
ATTEMPTED_WINDOW = WINDOW + timedelta(days=1)
"""How long a payment whose capture was attempted (claimed, failed or unanswered) is asked
again: past ``WINDOW``, so that a worker that died holding its claim in the window's last
minutes, or a backoff ending after it, is not the last word (the gateway may have taken the
money, and asking again is safe: "already captured" is read as done)."""

# One payment per cart first (the one whose capture was attempted, else the first
# authorised), and only then the backoff: a cart whose chosen payment backs off waits, its
# twin never standing in for it. A cart with an attempted payment it did not choose (that
# one past the window, or a twin that reads as the first) waits too: the gateway may have
# taken the money.
DUE = """
SELECT f.payment_id, f.amount_paise, f.currency FROM (
    SELECT DISTINCT ON (p.cart_id) p.provider, p.payment_id, p.cart_id, p.amount_paise,
           coalesce(p.currency, 'INR') AS currency, p.created_at, p.capture_next_at
    FROM payments p JOIN carts c ON c.id = p.cart_id
    WHERE p.provider = %(provider)s AND p.status = 'authorized'
      AND (p.created_at > now() - %(window)s
           OR p.capture_next_at IS NOT NULL AND p.created_at > now() - %(attempted_window)s)
      AND c.status = 'open' AND p.amount_paise = c.amount_paise
      AND coalesce(p.currency, 'INR') = c.currency
    ORDER BY p.cart_id, p.capture_next_at IS NULL, p.created_at, p.payment_id
) f
WHERE (f.capture_next_at IS NULL OR f.capture_next_at <= now())
  AND NOT EXISTS (SELECT 1 FROM payments o WHERE o.cart_id = f.cart_id
                  AND o.status = 'authorized' AND o.capture_next_at IS NOT NULL
                  AND (o.provider, o.payment_id) <> (f.provider, f.payment_id))
ORDER BY f.created_at LIMIT %(limit)s
"""
# The claim just before the call takes the payment's row, then its cart's, as applying a
# capture takes them (``payments.apply_event``): a second worker claiming another payment of
# the cart waits for this claim to commit, and its next statement sees it.
LOCK_PAYMENT = """
SELECT cart_id FROM payments WHERE provider = %s AND payment_id = %s AND status = 'authorized'
FOR NO KEY UPDATE
"""
LOCK_CART = "SELECT 1 FROM carts WHERE id = %s AND status = 'open' FOR NO KEY UPDATE"
# Still due, no payment of the cart captured meanwhile and no other one attempted: marked
# attempted (capture_next_at, a lease against a second worker, replaced by the backoff when
# the capture fails), never to be unmarked.
CLAIM = """
UPDATE payments p SET capture_next_at = now() + %(lease)s
WHERE p.provider = %(provider)s AND p.payment_id = %(payment_id)s AND p.status = 'authorized'
  AND (p.capture_next_at IS NULL OR p.capture_next_at <= now())
  AND NOT EXISTS (SELECT 1 FROM payments o WHERE o.cart_id = p.cart_id
                  AND (o.status IN ('captured', 'refunded')
                       OR o.status = 'authorized' AND o.capture_next_at IS NOT NULL
                          AND (o.provider, o.payment_id) <> (p.provider, p.payment_id)))
RETURNING 1
"""
LEASE = timedelta(minutes=2)
"""How long a claimed capture is left to the worker calling the gateway with it: longer than
its calls and its apply take, so a second worker meets it only after the first has given up
or died."""


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
    """The gateway's authorised payments to capture now, one per cart (the first authorised,
    or the one a capture was attempted of: a customer who paid twice is charged once),
    their cart open, for its amount; a cart whose payment's capture backs off waits."""
    params = {
        "provider": provider.value,
        "window": WINDOW,
        "attempted_window": ATTEMPTED_WINDOW,
        "limit": limit,
    }
    rows = conn.execute(DUE, params).fetchall()
    return [Authorised(payment_id=r[0], amount_paise=int(r[1]), currency=r[2]) for r in rows]


def claim(conn: Connection, provider: Provider, payment_id: str) -> bool:
    """Just before the capture, in a transaction of its own: whether it is still due (its
    cart may have been paid meanwhile, or another payment of it attempted); if so, marked
    attempted, so no other payment of its cart is captured after it, whatever its capture
    comes to, and no second worker calls with it while it is in flight."""
    with conn.transaction():
        cart = conn.execute(LOCK_PAYMENT, (provider.value, payment_id)).fetchone()
        if cart is None or conn.execute(LOCK_CART, (cart[0],)).fetchone() is None:
            return False
        params = {"provider": provider.value, "payment_id": payment_id, "lease": LEASE}
        return conn.execute(CLAIM, params).fetchone() is not None


def failed(conn: Connection, provider: Provider, payment_id: str, error: str) -> None:
    """This payment's capture failed: kept with its error and backed off; the others go on."""
    params = {"provider": provider.value, "payment_id": payment_id, "error": error[:500]}
    conn.execute(FAILED, params)


__all__ = [
    "ALERTED_AFTER",
    "ATTEMPTED_WINDOW",
    "LEASE",
    "WINDOW",
    "Authorised",
    "claim",
    "due",
    "failed",
]
