"""The example shop's handler (examples/django_shop/orders/webhooks.py) written on the claim's
own connection, as an app without Django's ORM writes it: what ``payhooks replay --hooks``,
``payhooks reconcile --hooks`` and the console take, on the same orders table. ``unfilled`` is
a registry no module filled, as ``payhooks.django.hooks`` is outside Django."""

from __future__ import annotations

from payhooks import Applied, EventKind, Hooks, Outcome

hooks = Hooks()
unfilled = Hooks()
_ORDER = "SELECT reference, amount_paise FROM orders_order WHERE reference = %s FOR UPDATE"
_PAY = """
UPDATE orders_order SET status = 'paid', payment_id = %s, paid_at = now()
WHERE reference = %s AND status = 'pending'
"""


@hooks.on(EventKind.PAYMENT_CAPTURED)
def mark_paid(conn, event):
    row = conn.execute(_ORDER, (event.merchant_ref,)).fetchone()
    if row is None:
        return Applied(outcome=Outcome.PARKED)
    reference, amount_paise = row
    if (event.amount_paise, event.currency) != (amount_paise, "INR"):
        return Applied(outcome=Outcome.IGNORED, order_id=reference)
    conn.execute(_PAY, (event.payment_id or "", reference))
    return Applied(outcome=Outcome.PROCESSED, order_id=reference)
