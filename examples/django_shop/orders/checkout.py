"""The shop's checkout: the order and what payhooks must see it paid, in one transaction.

Call it with the gateway's order id once the gateway has created it (Razorpay's create-order
call; Cashfree's order id, PayU's txnid, PhonePe's merchantOrderId and Juspay's order_id are the
shop's own): from then on a capture of any other amount or currency is parked by payhooks for a
person and never reaches ``orders/webhooks.py``, and ``manage.py payhooks_reconcile`` asks the
gateway about the order if its webhook never comes.
"""

from django.db import transaction

import payhooks
from payhooks.django import alias, connection

from .models import Order


def create_order(gateway: str, reference: str, amount_paise: int) -> Order:
    with transaction.atomic(using=alias()):  # the database payhooks' tables are on
        order = Order.objects.create(reference=reference, amount_paise=amount_paise)
        payhooks.expect(connection(), gateway, reference, amount_paise, "INR", reference)
    return order
