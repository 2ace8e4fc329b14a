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
the claim or not at all. With several databases that transaction is on ``alias()``: a handler's
own ``transaction.atomic()`` and ``transaction.on_commit()`` name it (``using=alias()``). This
module imports no Django model: Django imports it while loading its apps.
"""

from __future__ import annotations

from payhooks.intake.hooks import Hooks
from payhooks.plumbing.db import Connection

hooks = Hooks()
"""The handler the webhook view runs unless ``PAYHOOKS["HANDLER"]`` names another."""


def connection(using: str | None = None) -> Connection:
    """The psycopg connection under Django's (``PAYHOOKS["DATABASE"]`` unless ``using``), in
    the ``transaction.atomic()`` block open around the call, if any, for core calls that must
    commit with the ORM's writes: ``payhooks.expect(connection(), "razorpay", order_id, ...)``."""
    from payhooks.django import conf
    from payhooks.django.deliveries import raw_connection

    return raw_connection(using or conf.current().database)


def alias() -> str:
    """The database alias payhooks' tables are in (``PAYHOOKS["DATABASE"]``, ``default`` unless
    set), on which the claim's transaction runs: Django's ``transaction`` functions act on
    ``default`` unless told otherwise, so with several databases a handler's savepoint is
    ``transaction.atomic(using=alias())``, its after-commit work
    ``transaction.on_commit(..., using=alias())``, and a transaction of the merchant's own that
    a core call (``connection()``) must join is ``transaction.atomic(using=alias())``."""
    from payhooks.django import conf

    return conf.current().database


__all__ = ["alias", "connection", "hooks"]
