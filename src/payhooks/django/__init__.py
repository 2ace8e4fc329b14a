"""payhooks inside a Django project: an app with the webhook view, the delivery records as a
model, an admin that replays parked deliveries, and management commands (docs/django.md).

Handlers are registered on ``hooks`` from an app's ``webhooks.py``, which the app imports at
start-up as the admin imports ``admin.py``::

    from payhooks import EventKind
    from payhooks.django import hooks

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        Order.objects.filter(reference=event.merchant_ref).update(status="paid")

They run inside the claim's transaction, on Django's own connection, so ORM writes commit with
the claim or not at all. This module imports no Django model: Django imports it while loading
its apps.
"""

from __future__ import annotations

from payhooks.events import Provider
from payhooks.expectations import Expectation
from payhooks.expectations import expect as _expect
from payhooks.hooks import Hooks

hooks = Hooks()
"""The handler the webhook view runs unless ``PAYHOOKS["HANDLER"]`` names another."""


def expect(
    gateway: Provider | str,
    gateway_order_id: str,
    amount_paise: int,
    currency: str = "INR",
    reference: str | None = None,
    *,
    using: str | None = None,
) -> Expectation:
    """``payhooks.expect`` on Django's connection (``PAYHOOKS["DATABASE"]`` unless ``using``),
    in the ``transaction.atomic()`` block open around it, if any: call it where the order is
    created, so both commit together."""
    from payhooks.django import conf
    from payhooks.django.deliveries import raw_connection

    conn = raw_connection(using or conf.current().database)
    return _expect(conn, gateway, gateway_order_id, amount_paise, currency, reference)


__all__ = ["expect", "hooks"]
