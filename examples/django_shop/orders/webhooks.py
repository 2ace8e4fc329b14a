"""What a payment means to the shop. payhooks.django imports this module at start-up (as the
admin imports admin.py); each handler runs at most once per delivery, inside the claim's
transaction, so its ORM writes commit with the claim or not at all."""

import logging

from django.utils import timezone

from payhooks import Applied, EventKind, Outcome
from payhooks.django import hooks

from .models import Order

log = logging.getLogger("orders")
CURRENCY = "INR"  # the shop charges every order in rupees


@hooks.on(EventKind.PAYMENT_CAPTURED)
def mark_paid(conn, event):
    # Razorpay sends payment.captured and order.paid for one payment: two deliveries, one
    # effect. Locking the order and paying it only from pending makes the second a no-op.
    order = Order.objects.select_for_update().filter(reference=event.merchant_ref).first()
    if order is None:
        # No checkout with this reference (yet): payhooks keeps the delivery, parked, and the
        # admin's "replay" action applies it once the order exists.
        return Applied(outcome=Outcome.PARKED)
    if (event.amount_paise, event.currency) != (order.amount_paise, CURRENCY):
        # Captured, but not what the order costs: never mark it paid. The order stays pending
        # and a person decides: refund the payment, or collect the difference.
        log.warning(
            "payment_amount_mismatch",
            extra={
                "order": order.reference,
                "paid": event.amount_paise,
                "currency": event.currency,
            },
        )
        return Applied(outcome=Outcome.IGNORED, order_id=order.reference)
    if order.status == Order.Status.PENDING:
        order.status = Order.Status.PAID
        order.payment_id = event.payment_id or ""
        order.paid_at = timezone.now()
        order.save(update_fields=["status", "payment_id", "paid_at"])
    elif order.payment_id and event.payment_id and event.payment_id != order.payment_id:
        # Paid twice (a second tab): this payment paid nothing and must go back. Tell a
        # person, who refunds it (or asks payhooks to: orders/refunds.py).
        log.warning(
            "order_paid_twice", extra={"order": order.reference, "payment_id": event.payment_id}
        )
        return Applied(outcome=Outcome.IGNORED, order_id=order.reference)
    return Applied(outcome=Outcome.PROCESSED, order_id=order.reference)
