"""A payment event applied once stays applied once after the retention purge took its delivery
record: the same signed capture sent again (a gateway's late replay, a PayU success form posted
again), a capture reconciliation or a confirmation applied and the status API reports again
under the same key, a refund an order's status lists again. Each is a copy, not a new event."""

from __future__ import annotations

import psycopg
import pytest

import payhooks
from payhooks import Applied, EventKind, Hooks, Outcome
from payhooks.events import Provider
from payhooks.operations import retention
from payhooks.reconcile import run
from payhooks.sim.deliveries import Paid
from payhooks.sim.gateway import Purchase
from payhooks.sim.gateways import juspay, payu, phonepe
from tests.factories import ADAPTERS, GATEWAY, delivery_of
from tests.reconcile.conftest import API_KEYS

AMOUNT = 49_900

hooks = Hooks()


@hooks.on(EventKind.PAYMENT_CAPTURED)
def shipped(conn: psycopg.Connection, event: payhooks.Event) -> None:
    conn.execute("INSERT INTO shipments VALUES (%s)", (event.payment_id,))


@hooks.on(EventKind.REFUND_PROCESSED)
def refunded(conn: psycopg.Connection, event: payhooks.Event) -> None:
    conn.execute(
        "INSERT INTO refunded VALUES (%s, %s)", (event.refund_id, event.refund_amount_paise)
    )


def shop(conn: psycopg.Connection, provider: Provider, order: str) -> None:
    conn.execute("CREATE TABLE shipments (payment_id text)")
    conn.execute("CREATE TABLE refunded (refund_id text, amount_paise bigint)")
    with conn.transaction():
        payhooks.expect(conn, provider.value, order, AMOUNT, "INR", "A-1")


def purged_a_hundred_days_on(conn: psycopg.Connection) -> None:
    """Every record 100 days old, then the purge with the default window."""
    for table, column in (
        ("processed_webhooks", "processed_at"),
        ("payhooks_payments", "applied_at"),
        ("payhooks_expectations", "created_at"),
        ("payhooks_deliveries", "received_at"),
    ):
        conn.execute(f"UPDATE {table} SET {column} = now() - interval '100 days'")
    purge = retention.purge(conn, retention.DEFAULT_RETENTION_DAYS)
    assert purge.deleted > 0


def shipments(conn: psycopg.Connection) -> list[str]:
    return [pid for (pid,) in conn.execute("SELECT payment_id FROM shipments").fetchall()]


SIGNED = {
    Provider.RAZORPAY: ("order_replay0000001", "pay_replay000000001"),
    Provider.CASHFREE: ("cf_order_replay1", "5114910000001"),
    Provider.PAYU: ("txnreplay00001", "403993715529100777"),
}


@pytest.mark.parametrize("provider", list(SIGNED))
def test_the_same_signed_capture_sent_after_the_purge_is_a_duplicate(database_url, provider):
    order, payment = SIGNED[provider]
    paid = Paid(what="captured", reference=order, payment_id=payment, amount_paise=AMOUNT)
    delivery = delivery_of(provider)(GATEWAY, paid)
    with psycopg.connect(database_url, autocommit=True) as conn:
        shop(conn, provider, order)
        first = payhooks.ingest(conn, ADAPTERS[provider], delivery.body, delivery.headers, hooks)
        assert first.outcome is Outcome.PROCESSED
        shipped = shipments(conn)
        purged_a_hundred_days_on(conn)
        late = payhooks.ingest(conn, ADAPTERS[provider], delivery.body, delivery.headers, hooks)
        assert late.outcome is Outcome.DUPLICATE
        again = payhooks.ingest(conn, ADAPTERS[provider], delivery.body, delivery.headers, hooks)
        assert again.outcome is Outcome.DUPLICATE
        assert shipments(conn) == shipped


def test_a_second_delivery_of_the_payment_sent_again_after_the_purge_is_a_duplicate(database_url):
    """Two deliveries of one payment under two keys (Razorpay's ``payment.captured`` and
    ``order.paid``, each its own event id): both reached the handler. The defect: after
    the purge, the second sent again was applied again, its handler called a third time; the
    payment's record names only the key that applied it first."""
    provider = Provider.RAZORPAY
    order, payment = SIGNED[provider]
    paid = Paid(what="captured", reference=order, payment_id=payment, amount_paise=AMOUNT)
    first, second = (delivery_of(provider)(GATEWAY, paid) for _ in range(2))
    assert first.headers["x-razorpay-event-id"] != second.headers["x-razorpay-event-id"]
    adapter = ADAPTERS[provider]
    with psycopg.connect(database_url, autocommit=True) as conn:
        shop(conn, provider, order)
        for delivery in (first, second):
            payhooks.ingest(conn, adapter, delivery.body, delivery.headers, hooks)
        shipped = shipments(conn)
        purged_a_hundred_days_on(conn)
        for delivery in (second, first, second):
            late = payhooks.ingest(conn, adapter, delivery.body, delivery.headers, hooks)
            assert late.outcome is Outcome.DUPLICATE
        assert shipments(conn) == shipped


def test_a_new_delivery_of_the_payment_after_its_first_was_sent_again_is_a_duplicate(database_url):
    """After the purge, the first delivery sent again is a copy, recorded anew (``ignored``)
    under its key: that record was taken for the first's own, so a delivery of the payment
    under a key never seen (Razorpay's ``order.paid`` beside it) reached the handler again."""
    provider = Provider.RAZORPAY
    order, payment = SIGNED[provider]
    paid = Paid(what="captured", reference=order, payment_id=payment, amount_paise=AMOUNT)
    first = delivery_of(provider)(GATEWAY, paid)
    another = GATEWAY.razorpay(
        "order.paid", payment_id=payment, order_id=order, amount_paise=AMOUNT
    )
    adapter = ADAPTERS[provider]
    with psycopg.connect(database_url, autocommit=True) as conn:
        shop(conn, provider, order)
        payhooks.ingest(conn, adapter, first.body, first.headers, hooks)
        shipped = shipments(conn)
        purged_a_hundred_days_on(conn)
        for delivery in (first, another):
            late = payhooks.ingest(conn, adapter, delivery.body, delivery.headers, hooks)
            assert late.outcome is Outcome.DUPLICATE
        assert shipments(conn) == shipped


def test_a_copy_sent_after_the_purge_is_answered_with_the_order_it_made(database_url):
    """The payment's record keeps the order its handler answered (core 0036): a late copy is
    answered ``duplicate`` with that order, as before the purge, not with none."""
    order, payment = SIGNED[Provider.RAZORPAY]
    paid = Paid(what="captured", reference=order, payment_id=payment, amount_paise=AMOUNT)
    delivery = delivery_of(Provider.RAZORPAY)(GATEWAY, paid)
    ordering = Hooks()
    ordering.on(EventKind.PAYMENT_CAPTURED)(
        lambda conn, event: Applied(outcome=Outcome.PROCESSED, order_id="ORD-1")
    )
    adapter = ADAPTERS[Provider.RAZORPAY]
    with psycopg.connect(database_url, autocommit=True) as conn:
        shop(conn, Provider.RAZORPAY, order)
        first = payhooks.ingest(conn, adapter, delivery.body, delivery.headers, ordering)
        assert (first.outcome, first.order_id) == (Outcome.PROCESSED, "ORD-1")
        purged_a_hundred_days_on(conn)
        late = payhooks.ingest(conn, adapter, delivery.body, delivery.headers, ordering)
        assert (late.outcome, late.order_id) == (Outcome.DUPLICATE, "ORD-1")


def _phonepe_paid(api: object, purchase: Purchase, payment: str) -> object:
    return phonepe.delivery(
        GATEWAY,
        "checkout.order.completed",
        merchant_order_id=purchase.reference,
        amount_paise=AMOUNT,
        transaction_id=payment,
    )


def _juspay_paid(api: object, purchase: Purchase, payment: str) -> object:
    return juspay.delivery(
        GATEWAY, "ORDER_SUCCEEDED", order_id=purchase.reference, txn=payment, amount_paise=AMOUNT
    )


def _payu_refunded(api: object, purchase: Purchase, payment: str) -> object:
    """A refund made in PayU's dashboard: its callback, unsigned, is confirmed by asking."""
    refund = payu.refund_entity(
        mihpayid=payment, request_id="7000001", amount="100.00", status="success"
    )
    api.refund(purchase, "7000001", refund)  # type: ignore[attr-defined]
    return payu.refund_callback(
        GATEWAY, txnid=purchase.reference, mihpayid=payment, request_id="7000001", amount="100.00"
    )


# What brings the payment first (PayU: nothing, reconciliation finds it), and what makes the
# status API report it again after the purge, under the same key.
CONFIRMED = {
    Provider.PHONEPE: ("ordphonepe0001", "OM" + "1" * 18, _phonepe_paid, _phonepe_paid),
    Provider.JUSPAY: (
        "ordjuspay00001",
        juspay.txn_id("ordjuspay00001"),
        _juspay_paid,
        _juspay_paid,
    ),
    Provider.PAYU: ("ordpayu000001", "403993715529100001", None, _payu_refunded),
}


@pytest.mark.parametrize("provider", list(CONFIRMED))
def test_a_capture_the_status_api_reports_again_after_the_purge_is_not_applied_again(
    database_url, gateway_api, provider
):
    api, url = gateway_api
    environ = API_KEYS.env(url)
    order, payment, first, again = CONFIRMED[provider]
    purchase = Purchase(
        provider=provider, cart_id="A-1", reference=order, amount_paise=AMOUNT, items={"TEA": 1}
    )
    with psycopg.connect(database_url, autocommit=True) as conn:
        shop(conn, provider, order)
        api.pay(purchase, payment)
        if first is not None:
            delivery = first(api, purchase, payment)
            payhooks.ingest(conn, ADAPTERS[provider], delivery.body, delivery.headers, hooks)
        run(database_url, hooks, environ=environ, after_s=0)
        shipped = shipments(conn)
        assert len(shipped) == 1
        purged_a_hundred_days_on(conn)
        delivery = again(api, purchase, payment)
        payhooks.ingest(conn, ADAPTERS[provider], delivery.body, delivery.headers, hooks)
        run(database_url, hooks, environ=environ, after_s=0)  # the confirmation pass
        assert shipments(conn) == shipped


def test_a_refund_an_orders_status_lists_again_after_the_purge_is_not_applied_again(
    database_url, gateway_api
):
    api, url = gateway_api
    environ = API_KEYS.env(url)
    order, payment, _, _ = CONFIRMED[Provider.JUSPAY]
    purchase = Purchase(
        provider=Provider.JUSPAY,
        cart_id="A-1",
        reference=order,
        amount_paise=AMOUNT,
        items={"TEA": 1},
    )

    def refunds(*listed: tuple[str, int]) -> object:
        entity = juspay._order(
            order_id=order,
            txn=payment,
            amount_paise=AMOUNT,
            status="CHARGED",
            created="2026-01-01T00:00:00Z",
            refunds=listed,
        )
        api.book(purchase, entity)
        return juspay.delivery(
            GATEWAY,
            "ORDER_REFUNDED",
            order_id=order,
            txn=payment,
            amount_paise=AMOUNT,
            refunds=listed,
        )

    with psycopg.connect(database_url, autocommit=True) as conn:
        shop(conn, Provider.JUSPAY, order)
        delivery = refunds(("rf_first", 10_000))
        payhooks.ingest(conn, ADAPTERS[Provider.JUSPAY], delivery.body, delivery.headers, hooks)
        run(database_url, hooks, environ=environ, after_s=0)
        assert conn.execute("SELECT * FROM refunded").fetchall() == [("rf_first", 10_000)]
        purged_a_hundred_days_on(conn)
        # a second refund, months later: Juspay's callback and its order status list both
        delivery = refunds(("rf_first", 10_000), ("rf_second", 5_000))
        payhooks.ingest(conn, ADAPTERS[Provider.JUSPAY], delivery.body, delivery.headers, hooks)
        run(database_url, hooks, environ=environ, after_s=0)
        listed = conn.execute("SELECT * FROM refunded ORDER BY refund_id").fetchall()
        assert listed == [("rf_first", 10_000), ("rf_second", 5_000)]
        assert len(shipments(conn)) == 1


def test_a_checkout_whose_capture_deliveries_were_purged_is_still_known_captured(
    database_url, gateway_api
):
    """Reconciliation asks the checkouts with no known capture first, and those captured only
    after them (for a second payment). Whether a capture is known was read through the
    capture's delivery record, which the purge removes: with a reconcile window longer than
    the retention window, a checkout whose capture was purged was enrolled as never paid. The
    payment's own record, kept past the purge, says it."""
    _, url = gateway_api
    provider = Provider.RAZORPAY
    order, payment = SIGNED[provider]
    paid = Paid(what="captured", reference=order, payment_id=payment, amount_paise=AMOUNT)
    delivery = delivery_of(provider)(GATEWAY, paid)
    with psycopg.connect(database_url, autocommit=True) as conn:
        shop(conn, provider, order)
        payhooks.ingest(conn, ADAPTERS[provider], delivery.body, delivery.headers, hooks)
        conn.execute("UPDATE processed_webhooks SET processed_at = now() - interval '20 days'")
        conn.execute("UPDATE payhooks_deliveries SET received_at = now() - interval '20 days'")
        assert retention.purge(conn, 15).deleted > 0  # the checkout, 1 s old, is kept
        assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone() == (0,)
        run(database_url, hooks, environ=API_KEYS.env(url), after_s=0)
        enrolled = conn.execute("SELECT captured FROM payhooks_reconcile").fetchall()
    assert enrolled == [(True,)]
