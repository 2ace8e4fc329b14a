"""Handlers the tests swap in with ``PAYHOOKS["HANDLER"]``, on the example shop's orders."""

from __future__ import annotations

import contextlib

from django.db import IntegrityError, connection, connections, transaction
from orders.models import Order

import payhooks.django
from payhooks import EventKind, Hooks

creating = Hooks()
failing = Hooks()
notifying = Hooks()
notifying_then_failing = Hooks()
committing = Hooks()
committing_on_the_connection = Hooks()
committing_caught = Hooks()
committing_on_the_connection_caught = Hooks()
rolling_back_the_connection_caught = Hooks()
notified: list[str] = []
"""Delivery keys whose ``on_commit`` work ran (the server's threads append to it)."""


@creating.on(EventKind.PAYMENT_CAPTURED)
@failing.on(EventKind.PAYMENT_CAPTURED)
@committing.on(EventKind.PAYMENT_CAPTURED)
@committing_on_the_connection.on(EventKind.PAYMENT_CAPTURED)
@committing_caught.on(EventKind.PAYMENT_CAPTURED)
@committing_on_the_connection_caught.on(EventKind.PAYMENT_CAPTURED)
@rolling_back_the_connection_caught.on(EventKind.PAYMENT_CAPTURED)
def create_order(conn, event):
    Order.objects.create(
        reference=event.merchant_ref,
        amount_paise=event.amount_paise,
        status=Order.Status.PAID,
        payment_id=event.payment_id,
    )


@notifying.on(EventKind.PAYMENT_CAPTURED)
@notifying_then_failing.on(EventKind.PAYMENT_CAPTURED)
def notify_after_commit(conn, event):
    transaction.on_commit(lambda: notified.append(event.event_id))


@failing.on(EventKind.PAYMENT_CAPTURED)
@notifying_then_failing.on(EventKind.PAYMENT_CAPTURED)
def fail(conn, event):
    raise RuntimeError("the merchant's code failed after writing")


@committing.on(EventKind.PAYMENT_CAPTURED)
def commit(conn, event):
    transaction.commit()


@committing_on_the_connection.on(EventKind.PAYMENT_CAPTURED)
def commit_the_connection(conn, event):
    conn.commit()


# A merchant used to owning the transaction catches the refusal and carries on.
@committing_caught.on(EventKind.PAYMENT_CAPTURED)
def commit_caught(conn, event):
    with contextlib.suppress(transaction.TransactionManagementError):
        transaction.commit()


@committing_on_the_connection_caught.on(EventKind.PAYMENT_CAPTURED)
def commit_the_connection_caught(conn, event):
    with contextlib.suppress(Exception):
        conn.commit()


@rolling_back_the_connection_caught.on(EventKind.PAYMENT_CAPTURED)
def roll_back_the_connection_caught(conn, event):
    with contextlib.suppress(Exception):
        conn.rollback()


committing_as_sql = Hooks()
committing_as_sql_then_writing = Hooks()


@committing_as_sql.on(EventKind.PAYMENT_CAPTURED)
def commit_as_sql(conn, event):
    Order.objects.filter(reference=event.merchant_ref).update(status=Order.Status.PAID)
    with connection.cursor() as cursor:
        cursor.execute("COMMIT")  # past Django's guard: only seen after the fact


@committing_as_sql_then_writing.on(EventKind.PAYMENT_CAPTURED)
def commit_as_sql_then_write(conn, event):
    with connection.cursor() as cursor:
        cursor.execute("COMMIT")
    Order.objects.filter(reference=event.merchant_ref).update(status=Order.Status.PAID)


# docs/django.md's handlers with several databases: each names the claim's alias (``using=``).
notifying_on_the_claims_database = Hooks()
notifying_on_the_claims_database_then_failing = Hooks()
paying_once_in_a_savepoint = Hooks()


@notifying_on_the_claims_database.on(EventKind.PAYMENT_CAPTURED)
@notifying_on_the_claims_database_then_failing.on(EventKind.PAYMENT_CAPTURED)
def notify_after_the_claims_commit(conn, event):
    transaction.on_commit(lambda: notified.append(event.event_id), using=payhooks.django.alias())


@notifying_on_the_claims_database_then_failing.on(EventKind.PAYMENT_CAPTURED)
def fail_after_notifying(conn, event):
    raise RuntimeError("the merchant's code failed after leaving work to on_commit")


@paying_once_in_a_savepoint.on(EventKind.PAYMENT_CAPTURED)
def pay_once_in_a_savepoint(conn, event):
    """A write that may fail, caught: inside a savepoint of the claim's transaction, the
    failure is undone alone and the handler carries on."""
    try:
        with transaction.atomic(using=payhooks.django.alias()):
            Order.objects.create(reference=event.merchant_ref, amount_paise=event.amount_paise)
    except IntegrityError:
        pass  # the checkout made it already
    Order.objects.filter(reference=event.merchant_ref).update(
        status=Order.Status.PAID, payment_id=event.payment_id
    )


# The same handlers written for one database: ``transaction`` acts on ``default``.
notifying_on_default_then_failing = Hooks()
paying_once_in_a_savepoint_on_default = Hooks()


@notifying_on_default_then_failing.on(EventKind.PAYMENT_CAPTURED)
def notify_on_default_then_fail(conn, event):
    transaction.on_commit(lambda: notified.append(event.event_id))
    raise RuntimeError("the merchant's code failed after leaving work to on_commit")


@paying_once_in_a_savepoint_on_default.on(EventKind.PAYMENT_CAPTURED)
def pay_once_in_a_savepoint_on_default(conn, event):
    try:
        with transaction.atomic():
            Order.objects.create(reference=event.merchant_ref, amount_paise=event.amount_paise)
    except IntegrityError:
        pass
    Order.objects.filter(reference=event.merchant_ref).update(status=Order.Status.PAID)


reading_default_then_notifying_on_it = Hooks()
notifying_inside_a_transaction_on_default = Hooks()


@reading_default_then_notifying_on_it.on(EventKind.PAYMENT_CAPTURED)
def read_default_then_notify(conn, event):
    """``default`` connected by a read first (Django turns its autocommit on as it connects),
    then work left to ``on_commit`` with no ``using=``: it runs at once all the same."""
    connections["default"].ensure_connection()
    transaction.on_commit(lambda: notified.append(event.event_id))
    raise RuntimeError("the merchant's code failed after leaving work to on_commit")


@notifying_inside_a_transaction_on_default.on(EventKind.PAYMENT_CAPTURED)
def notify_inside_a_transaction_on_default(conn, event):
    """Work of ``default``'s own, in a transaction of ``default``: it runs once that commits,
    as Django promises; nothing to say."""
    connections["default"].close()  # connected afresh inside, as after a request's end
    with transaction.atomic(using="default"):
        transaction.on_commit(lambda: notified.append(event.event_id), using="default")
