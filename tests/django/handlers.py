"""Handlers the tests swap in with ``PAYHOOKS["HANDLER"]``, on the example shop's orders."""

from __future__ import annotations

from orders.models import Order

from payhooks import EventKind, Hooks

creating = Hooks()
failing = Hooks()


@creating.on(EventKind.PAYMENT_CAPTURED)
@failing.on(EventKind.PAYMENT_CAPTURED)
def create_order(conn, event):
    Order.objects.create(
        reference=event.merchant_ref,
        amount_paise=event.amount_paise,
        status=Order.Status.PAID,
        payment_id=event.payment_id,
    )


@failing.on(EventKind.PAYMENT_CAPTURED)
def fail(conn, event):
    raise RuntimeError("the merchant's code failed after writing")
