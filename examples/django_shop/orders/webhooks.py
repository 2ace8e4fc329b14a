"""What a payment means to the shop. payhooks.django imports this module at start-up (as the
admin imports admin.py); each handler runs at most once per delivery, inside the claim's
transaction, so its ORM writes commit with the claim or not at all."""

from django.utils import timezone

from payhooks import Applied, EventKind, Outcome
from payhooks.django import hooks

from .models import Order


@hooks.on(EventKind.PAYMENT_CAPTURED)
def mark_paid(conn, event):
    # Razorpay sends payment.captured and order.paid for one payment: two deliveries, one
    # effect. Locking the order and paying it only from pending makes the second a no-op.
    order = Order.objects.select_for_update().filter(reference=event.merchant_ref).first()
    if order is None:
        # No checkout with this reference (yet): payhooks keeps the delivery, parked, and the
        # admin's "replay" action applies it once the order exists.
        return Applied(outcome=Outcome.PARKED)
    if order.status == Order.Status.PENDING:
        order.status = Order.Status.PAID
        order.payment_id = event.payment_id or ""
        order.paid_at = timezone.now()
        order.save(update_fields=["status", "payment_id", "paid_at"])
    return Applied(outcome=Outcome.PROCESSED, order_id=order.reference)
