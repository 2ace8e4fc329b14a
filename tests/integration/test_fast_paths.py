"""The hot path's shortcuts answer exactly what the claim path answers.

Each claim test that applies to a first capture runs through every path the service takes for
one (``PATHS``): the pipelined claim path, and the one-statement first capture on a sync and an
async connection. A path that drifts from the claim fails here."""

from __future__ import annotations

import threading

import psycopg
import pytest

from payhooks.intake import idempotency
from payhooks.intake.ingest import Applied, Outcome, Receipt, ingest_received, receive
from payhooks.service.shop.payments import apply_event
from tests.conftest import run_threads
from tests.factories import ADAPTERS, GATEWAY, purchase
from tests.integration.test_concurrency import OPTIONS, THREADS, count, outcomes
from tests.integration.test_first_capture import first, first_async, reconciled


def pipelined(conn, delivery, handler=apply_event) -> Receipt:
    received = receive(ADAPTERS[delivery.provider], delivery.body, delivery.headers)
    return ingest_received(conn, received, handler, pipeline=True)


PATHS = {
    "claim": lambda conn, delivery: pipelined(conn, delivery),
    "first_capture": lambda conn, delivery: first(conn, delivery)[0],
    "first_capture_async": lambda conn, delivery: first_async(conn, delivery)[0],
}


@pytest.fixture(params=list(PATHS))
def path(request):
    return PATHS[request.param]


def event_of(delivery):
    return ADAPTERS[delivery.provider].parse(delivery.body, delivery.headers)


def test_a_settled_delivery_is_seen_with_its_order(conn, path):
    buy = purchase(conn)
    delivery = buy.captured()
    order_id = path(conn, delivery).order_id
    seen = idempotency.seen(conn, event_of(delivery))
    assert seen is not None
    assert (seen.state, seen.order_ref) == (idempotency.ClaimState.DUPLICATE, order_id)


def test_an_unseen_delivery_is_not_seen(conn):
    assert idempotency.seen(conn, event_of(purchase(conn).captured())) is None


def test_a_parked_delivery_is_not_seen_so_its_redelivery_can_apply_it(conn, path):
    orphan = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_orphan000001", order_id="order_nowhere", amount_paise=1
    )
    assert path(conn, orphan).outcome is Outcome.PARKED
    assert idempotency.seen(conn, event_of(orphan)) is None


def test_the_same_key_with_another_body_is_not_seen_so_it_is_marked(conn, path):
    buy = purchase(conn)
    first = buy.captured()
    path(conn, first)
    other = GATEWAY.razorpay(
        "payment.captured",
        payment_id=buy.payment_id,
        order_id=buy.reference,
        amount_paise=buy.amount_paise + 1,
        event_id=first.headers["x-razorpay-event-id"],
    )
    assert idempotency.seen(conn, event_of(other)) is None
    assert path(conn, other).mismatch


def test_a_pipelined_capture_has_every_effect_of_a_plain_one(conn, path):
    buy = purchase(conn, stock=5, quantity=2)
    receipt = path(conn, buy.captured())
    assert receipt.outcome is Outcome.PROCESSED
    assert count(conn, "SELECT status FROM orders WHERE id = %s", receipt.order_id) == "confirmed"
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 3
    assert count(conn, "SELECT count(*) FROM outbox WHERE kind = 'email'") == 1
    assert (
        count(conn, "SELECT order_ref FROM processed_webhooks WHERE order_ref IS NOT NULL")
        == receipt.order_id
    )
    # The same bytes under another event id are the same delivery.
    assert path(conn, buy.captured()).outcome is Outcome.DUPLICATE
    paid = buy.delivery("captured", event="order.paid")
    assert path(conn, paid).outcome is Outcome.PROCESSED
    assert path(conn, paid).outcome is Outcome.DUPLICATE


def test_a_pipelined_handler_that_fails_leaves_nothing_behind(conn):
    buy = purchase(conn)

    def failing(connection, event) -> Applied:
        apply_event(connection, event)
        connection.execute("SELECT 1 / 0")
        return Applied(outcome=Outcome.PROCESSED)

    with pytest.raises(psycopg.errors.DivisionByZero):
        pipelined(conn, buy.captured(), failing)
    assert count(conn, "SELECT count(*) FROM processed_webhooks") == 0
    assert count(conn, "SELECT count(*) FROM orders") == 0
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 10


def test_fifty_pipelined_copies_at_once_make_one_order(conn, database_url, path):
    # A copy on the async path holds two connections (its thread's and its event loop's): 25
    # of them at once stay within the test server's 100 connections; 50 did not, always.
    copies = THREADS // 2 if path is PATHS["first_capture_async"] else THREADS
    delivery = purchase(conn, stock=100).captured()
    barrier = threading.Barrier(copies)
    receipts: list[Receipt] = []
    lock = threading.Lock()

    def run() -> None:
        with psycopg.connect(database_url, autocommit=True, options=OPTIONS) as connection:
            barrier.wait()
            receipt = path(connection, delivery)
        with lock:
            receipts.append(receipt)

    threads = [threading.Thread(target=run) for _ in range(copies)]
    run_threads(threads)
    assert outcomes(receipts) == {"processed": 1, "duplicate": copies - 1}
    assert {r.order_id for r in receipts} == {count(conn, "SELECT id FROM orders")}
    assert count(conn, "SELECT sum(delta) FROM inventory_movements") == 99


def test_a_capture_then_reconciliations_delivery_of_it_is_a_duplicate(conn, path):
    """The payment's own key is claimed on every path: reconciliation's delivery of a payment
    a webhook applied answers duplicate with its order, never processed again."""
    buy = purchase(conn)
    applied = path(conn, buy.captured())
    again = ingest_received(conn, _reconciled_of(buy), apply_event)
    assert (again.outcome, again.order_id) == (Outcome.DUPLICATE, applied.order_id)
    assert count(conn, "SELECT count(*) FROM orders") == 1


def test_a_capture_and_reconciliations_delivery_at_once_make_one_order(conn, database_url, path):
    buy = purchase(conn)
    barrier = threading.Barrier(2)
    receipts: list[Receipt] = []

    def run(deliver_one) -> None:
        with psycopg.connect(database_url, autocommit=True, options=OPTIONS) as connection:
            barrier.wait()
            receipts.append(deliver_one(connection))

    webhook = threading.Thread(target=run, args=(lambda c: path(c, buy.captured()),))
    api = threading.Thread(
        target=run, args=(lambda c: ingest_received(c, _reconciled_of(buy), apply_event),)
    )
    for thread in (webhook, api):
        thread.start()
    for thread in (webhook, api):
        thread.join(timeout=60)
    assert outcomes(receipts) == {"processed": 1, "duplicate": 1}
    assert count(conn, "SELECT count(*) FROM orders") == 1


def _reconciled_of(buy):
    return reconciled(payment=buy.payment_id, amount=buy.amount_paise, order=buy.reference)
