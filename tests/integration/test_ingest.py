"""Every row of the webhook table in docs/api.md, through the real ingest path on real
PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import replace

import psycopg
import pytest

from payhooks.events import Provider, Received
from payhooks.intake import idempotency
from payhooks.intake.ingest import Applied, Outcome, ingest, ingest_received
from payhooks.plumbing import db
from payhooks.plumbing.errors import HandlerCommitted, LockTimeout
from payhooks.service.shop import carts
from payhooks.service.shop.payments import get_payment
from tests.factories import ADAPTERS, GATEWAY, deliver, purchase
from tests.racing import blocked_by


def scalar(conn, sql, *params):
    return conn.execute(sql, params).fetchone()[0]


def stock_of(conn, sku):
    return scalar(conn, "SELECT stock FROM products WHERE sku = %s", sku)


def test_first_capture_pays_cart_creates_order_takes_stock_and_queues_email(conn):
    buy = purchase(conn, stock=5, quantity=2)
    receipt = deliver(conn, buy.captured())
    assert receipt.outcome is Outcome.PROCESSED
    assert carts.get_cart(conn, buy.cart_id).status == "paid"
    assert scalar(conn, "SELECT status FROM orders WHERE id = %s", receipt.order_id) == "confirmed"
    assert stock_of(conn, buy.sku) == 3
    assert (
        scalar(
            conn, "SELECT sum(delta) FROM inventory_movements WHERE order_id = %s", receipt.order_id
        )
        == -2
    )
    assert (
        scalar(
            conn,
            "SELECT count(*) FROM outbox WHERE dedupe_key = %s",
            f"order_confirmation:{receipt.order_id}",
        )
        == 1
    )


def test_order_remembers_the_delivery_that_created_it(conn):
    buy = purchase(conn)
    receipt = deliver(conn, buy.captured())
    assert (
        scalar(conn, "SELECT event_id FROM orders WHERE id = %s", receipt.order_id)
        == receipt.event.event_id
    )
    assert (
        scalar(
            conn,
            "SELECT order_ref FROM processed_webhooks WHERE event_id = %s",
            receipt.event.event_id,
        )
        == receipt.order_id
    )


def test_same_delivery_again_is_a_duplicate_with_no_effect(conn):
    buy = purchase(conn, stock=5)
    delivery = buy.captured()
    first = deliver(conn, delivery)
    again = deliver(conn, delivery)
    assert again.outcome is Outcome.DUPLICATE
    assert again.order_id == first.order_id
    assert scalar(conn, "SELECT count(*) FROM orders") == 1
    assert stock_of(conn, buy.sku) == 4


def test_same_key_different_body_is_duplicate_and_marked(conn):
    buy = purchase(conn)
    first = buy.captured()
    twisted = GATEWAY.razorpay(
        "payment.captured",
        payment_id=buy.payment_id,
        order_id=buy.reference,
        amount_paise=1,
        event_id=first.headers["x-razorpay-event-id"],
    )
    deliver(conn, first)
    receipt = deliver(conn, twisted)
    assert receipt.outcome is Outcome.DUPLICATE and receipt.mismatch
    assert (
        scalar(
            conn,
            "SELECT mismatches FROM processed_webhooks WHERE event_id = %s",
            receipt.event.event_id,
        )
        == 1
    )
    assert get_payment(conn, "razorpay", buy.payment_id).flags == ()


def test_order_paid_after_capture_is_recorded_without_new_effect(conn):
    buy = purchase(conn, stock=5)
    first = deliver(conn, buy.captured())
    receipt = deliver(conn, buy.delivery("captured", event="order.paid"))
    assert receipt.outcome is Outcome.PROCESSED
    assert receipt.order_id == first.order_id
    assert scalar(conn, "SELECT count(*) FROM orders") == 1
    assert stock_of(conn, buy.sku) == 4


def test_second_payment_for_paid_cart_needs_refund_and_makes_no_order(conn):
    buy = purchase(conn, stock=5)
    deliver(conn, buy.captured())
    receipt = deliver(conn, buy.captured(payment_id="pay_second00001"))
    assert receipt.outcome is Outcome.PROCESSED
    second = get_payment(conn, "razorpay", "pay_second00001")
    assert second.needs_refund and second.flags == ("duplicate_payment",)
    assert scalar(conn, "SELECT count(*) FROM orders") == 1
    assert stock_of(conn, buy.sku) == 4
    assert scalar(conn, "SELECT count(*) FROM outbox WHERE kind = 'alert'") == 1


def test_a_second_payments_events_name_no_order_in_the_answer_or_the_relays_message(conn):
    """A cart paid twice: the second payment's capture, its refund and a failed attempt after
    were answered, and relayed, with the order the first payment placed: a consumer shipping
    each captured order (examples/relay) shipped it twice, and one undoing an order on its
    refund would undo the order the first payment paid. Only the payment that paid an order
    names it; the first payment's refund still does."""
    conn.execute("INSERT INTO payhooks_relay_channels (channel) VALUES ('nats')")
    buy = purchase(conn, stock=5)
    first = deliver(conn, buy.captured())
    assert first.order_id is not None
    second = "pay_second00002"
    refunded = GATEWAY.razorpay(
        "refund.processed", payment_id=second, order_id=buy.reference,
        amount_paise=buy.amount_paise, refund_id="rfnd_SECOND0001",
    )  # fmt: skip
    answers = [
        deliver(conn, buy.captured(payment_id=second)),
        deliver(conn, refunded),
        deliver(conn, buy.delivery("failed", payment_id="pay_third000003")),
    ]
    assert [(a.outcome, a.order_id) for a in answers] == [(Outcome.PROCESSED, None)] * 3
    mine = GATEWAY.razorpay("refund.processed", payment_id=buy.payment_id, order_id=buy.reference,
                            amount_paise=100, refund_id="rfnd_FIRST00001")  # fmt: skip
    assert deliver(conn, mine).order_id == first.order_id
    relayed = {
        row[0]["payment_id"] + " " + row[0]["kind"]: row[0]["order_id"]
        for row in conn.execute("SELECT body::jsonb FROM payhooks_outbox WHERE kind = 'event'")
    }
    assert relayed == {
        f"{buy.payment_id} payment_captured": first.order_id,
        f"{second} payment_captured": None,
        f"{second} refund_processed": None,
        "pay_third000003 payment_failed": None,
        f"{buy.payment_id} refund_processed": first.order_id,
    }


def test_amount_mismatch_is_parked_before_the_shop_and_alerted_once_with_both_amounts(conn):
    from payhooks.service import mismatches

    buy = purchase(conn)
    receipt = deliver(conn, buy.captured(amount_paise=buy.amount_paise - 100))
    assert receipt.outcome is Outcome.PARKED and receipt.order_id is None
    assert scalar(conn, "SELECT count(*) FROM payments") == 0  # never the shop's payment
    assert carts.get_cart(conn, buy.cart_id).status == "open"
    assert (mismatches.alert_new(conn), mismatches.alert_new(conn)) == (1, 0)
    body = scalar(conn, "SELECT body FROM outbox WHERE kind = 'alert'")
    assert f"paid {buy.amount_paise - 100} INR" in body and f"is {buy.amount_paise} INR" in body
    assert buy.cart_id in body


def test_currency_mismatch_is_parked_before_the_shop(conn):
    buy = purchase(conn)
    delivery = GATEWAY.razorpay(
        "payment.captured",
        payment_id=buy.payment_id,
        order_id=buy.reference,
        amount_paise=buy.amount_paise,
        currency="USD",
    )
    assert deliver(conn, delivery).outcome is Outcome.PARKED
    assert scalar(conn, "SELECT paid_currency FROM payhooks_amount_mismatches") == "USD"
    assert scalar(conn, "SELECT count(*) FROM orders") == 0


def test_capture_after_stock_ran_out_backorders_and_never_goes_below_zero(conn):
    buy = purchase(conn, stock=1, quantity=2)
    receipt = deliver(conn, buy.captured())
    assert receipt.outcome is Outcome.PROCESSED
    assert (
        scalar(conn, "SELECT status FROM orders WHERE id = %s", receipt.order_id) == "backordered"
    )
    assert carts.get_cart(conn, buy.cart_id).status == "paid"
    assert stock_of(conn, buy.sku) == 1
    assert (
        scalar(conn, "SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'alert:backorder:%%'") == 1
    )


def test_event_for_unknown_reference_is_parked_with_its_raw_body(conn):
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_lost000000", order_id="order_nobody", amount_paise=100
    )
    receipt = deliver(conn, delivery)
    assert receipt.outcome is Outcome.PARKED
    assert (
        bytes(
            scalar(
                conn,
                "SELECT body FROM processed_webhooks WHERE event_id = %s",
                receipt.event.event_id,
            )
        )
        == delivery.body
    )
    assert scalar(conn, "SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'alert:parked:%%'") == 1


def test_parked_event_is_applied_when_redelivered_after_its_checkout_exists(conn):
    buy = purchase(conn)
    orphan = GATEWAY.razorpay(
        "payment.captured",
        payment_id="pay_late000001",
        order_id="order_later",
        amount_paise=buy.amount_paise,
    )
    assert deliver(conn, orphan).outcome is Outcome.PARKED
    assert deliver(conn, orphan).outcome is Outcome.PARKED
    other = carts.create_cart(conn, "b@example.com", [carts.LineItem(sku=buy.sku, quantity=1)])
    carts.checkout(conn, other.cart_id, Provider.RAZORPAY, "order_later")
    receipt = deliver(conn, orphan)
    assert receipt.outcome is Outcome.PROCESSED and receipt.order_id
    assert deliver(conn, orphan).outcome is Outcome.DUPLICATE
    assert (
        scalar(
            conn,
            "SELECT outcome FROM processed_webhooks WHERE event_id = %s",
            receipt.event.event_id,
        )
        == "processed"
    )


def test_event_type_not_acted_on_is_recorded_as_ignored(conn):
    delivery = GATEWAY.razorpay(
        "payment.downtime.started",
        payment_id="pay_x00000000001",
        order_id="order_x",
        amount_paise=100,
    )
    receipt = deliver(conn, delivery)
    assert receipt.outcome is Outcome.IGNORED
    assert (
        scalar(
            conn,
            "SELECT outcome FROM processed_webhooks WHERE event_id = %s",
            receipt.event.event_id,
        )
        == "ignored"
    )


def test_late_authorized_after_capture_never_moves_payment_backwards(conn):
    buy = purchase(conn)
    deliver(conn, buy.captured())
    receipt = deliver(conn, buy.delivery("authorized"))
    assert receipt.outcome is Outcome.PROCESSED
    assert get_payment(conn, "razorpay", buy.payment_id).status == "captured"


def test_failed_attempt_then_success_with_another_attempt_makes_one_order(conn):
    buy = purchase(conn)
    deliver(conn, buy.delivery("failed", payment_id="pay_failed00001"))
    receipt = deliver(conn, buy.captured())
    assert receipt.order_id
    assert get_payment(conn, "razorpay", "pay_failed00001").status == "failed"
    assert scalar(conn, "SELECT count(*) FROM orders") == 1


def test_failed_then_captured_for_the_same_payment_is_a_late_authorisation(conn):
    buy = purchase(conn)
    deliver(conn, buy.delivery("failed"))
    receipt = deliver(conn, buy.captured())
    assert receipt.order_id
    assert get_payment(conn, "razorpay", buy.payment_id).status == "captured"


def test_refund_processed_marks_payment_refunded_once(conn):
    buy = purchase(conn)
    deliver(conn, buy.captured())
    refund, again = refund_of(buy, "rfnd_0000000001"), refund_of(buy, "rfnd_0000000001")
    assert deliver(conn, refund).outcome is Outcome.PROCESSED
    deliver(conn, again)
    assert get_payment(conn, "razorpay", buy.payment_id).status == "refunded"
    assert scalar(conn, "SELECT refunded_paise FROM payments") == buy.amount_paise


@pytest.mark.parametrize("provider", [Provider.CASHFREE, Provider.PAYU])
def test_identical_posts_through_two_urls_make_one_order(conn, provider):
    buy = purchase(conn, provider, stock=3)
    delivery = buy.captured()
    outcomes = [deliver(conn, delivery).outcome for _ in range(2)]
    assert outcomes == [Outcome.PROCESSED, Outcome.DUPLICATE]
    assert stock_of(conn, buy.sku) == 2


def test_cashfree_versions_with_and_without_idempotency_key_make_one_order(conn):
    from decimal import Decimal

    buy = purchase(conn, Provider.CASHFREE)
    args = dict(
        order_id=buy.reference,
        cf_payment_id=buy.payment_id,
        order_amount=Decimal(buy.amount_paise) / 100,
    )
    new = GATEWAY.cashfree("PAYMENT_SUCCESS_WEBHOOK", version="2025-01-01", **args)
    old = GATEWAY.cashfree("PAYMENT_SUCCESS_WEBHOOK", version="2022-09-01", **args)
    assert deliver(conn, new).outcome is Outcome.PROCESSED
    assert deliver(conn, old).outcome is Outcome.PROCESSED
    assert scalar(conn, "SELECT count(*) FROM orders") == 1


def test_handler_failure_rolls_back_the_claim(conn):
    buy = purchase(conn)
    delivery = buy.captured()

    def broken(connection, event):
        connection.execute(
            "INSERT INTO outbox (kind, dedupe_key, subject, body) VALUES ('email', 'x', 's', 'b')"
        )
        raise RuntimeError("bug in apply")

    with pytest.raises(RuntimeError):
        ingest(conn, ADAPTERS[Provider.RAZORPAY], delivery.body, delivery.headers, broken)
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 0
    assert scalar(conn, "SELECT count(*) FROM outbox") == 0
    assert deliver(conn, delivery).outcome is Outcome.PROCESSED


def test_twin_stuck_behind_a_slow_first_attempt_times_out_instead_of_hanging(conn, database_url):
    import psycopg

    buy = purchase(conn)
    delivery = buy.captured()
    adapter = ADAPTERS[Provider.RAZORPAY]
    event = adapter.parse(delivery.body, delivery.headers)
    with psycopg.connect(database_url, autocommit=True) as slow, slow.transaction():
        idempotency.claim(slow, Received(event=event, body=delivery.body))
        conn.execute("SET lock_timeout = '200ms'")
        with pytest.raises(LockTimeout):
            deliver(conn, delivery)
    conn.execute("RESET lock_timeout")
    assert deliver(conn, delivery).outcome is Outcome.DUPLICATE


def test_custom_handler_runs_in_the_claim_transaction(conn):
    buy = purchase(conn)
    delivery = buy.captured()
    seen = []

    def handler(connection, event):
        seen.append(connection.info.transaction_status.name)
        return Applied(outcome=Outcome.PROCESSED, order_id="external-1")

    receipt = ingest(conn, ADAPTERS[Provider.RAZORPAY], delivery.body, delivery.headers, handler)
    assert seen == ["INTRANS"] and receipt.order_id == "external-1"


def refund_of(buy, refund_id="rfnd_0000000009"):
    return GATEWAY.razorpay(
        "refund.processed",
        payment_id=buy.payment_id,
        order_id=buy.reference,
        amount_paise=buy.amount_paise,
        refund_id=refund_id,
    )


def test_refund_that_overtakes_its_capture_is_recorded_and_the_capture_places_no_order(conn):
    buy = purchase(conn, stock=5)
    assert deliver(conn, refund_of(buy)).outcome is Outcome.PROCESSED
    receipt = deliver(conn, buy.captured())
    assert receipt.outcome is Outcome.PROCESSED and receipt.order_id is None
    assert get_payment(conn, "razorpay", buy.payment_id).status == "refunded"
    assert scalar(conn, "SELECT count(*) FROM orders") == 0
    assert stock_of(conn, buy.sku) == 5


def test_refund_for_an_unknown_payment_and_reference_is_parked(conn):
    orphan = GATEWAY.razorpay(
        "refund.processed",
        payment_id="pay_nobody000001",
        order_id="order_nobody",
        amount_paise=100,
        refund_id="rfnd_x",
    )
    assert deliver(conn, orphan).outcome is Outcome.PARKED


def test_refund_waits_for_a_capture_in_flight_instead_of_parking(conn, database_url):
    import psycopg

    buy = purchase(conn)
    result = {}
    refund = threading.Thread(
        target=lambda: result.setdefault("refund", deliver_on(database_url, refund_of(buy)))
    )
    with psycopg.connect(database_url, autocommit=True) as other:
        with other.transaction():
            first = deliver_in(other, buy.captured())
            refund.start()
            while refund.is_alive() and not blocked_by(conn, other.info.backend_pid):
                refund.join(timeout=0.05)  # until it waits on the held rows, or has finished
            assert refund.is_alive(), "the refund should wait on the uncommitted payment row"
        refund.join(timeout=10)
    assert first.order_id and result["refund"].outcome is Outcome.PROCESSED
    payment = get_payment(conn, "razorpay", buy.payment_id)
    assert payment.status == "refunded"
    assert scalar(conn, "SELECT refunded_paise FROM payments") == buy.amount_paise


def deliver_in(conn, delivery):
    """Apply inside the caller's open transaction (to hold its locks)."""
    from payhooks.service.shop.payments import apply_event

    event = ADAPTERS[delivery.provider].parse(delivery.body, delivery.headers)
    idempotency.claim(conn, Received(event=event, body=delivery.body))
    return apply_event(conn, event)


def deliver_on(url, delivery):
    import psycopg

    with psycopg.connect(url, autocommit=True) as own:
        return deliver(own, delivery)


def test_payu_post_replayed_with_a_forged_mihpayid_changes_nothing(conn):
    from payhooks.gateways import payu

    buy = purchase(conn, Provider.PAYU, stock=5)
    genuine = buy.captured()
    forged_fields = dict(payu.decode_form(genuine.body), mihpayid="999999999")
    forged = replace(genuine, body=payu.encode(forged_fields))
    first = deliver(conn, forged)
    second = deliver(conn, genuine)  # another mihpayid: PayU's API decides (confirming)
    assert first.order_id and second.outcome is Outcome.CONFIRMING
    assert get_payment(conn, "payu", buy.reference).flags == ()
    assert scalar(conn, "SELECT count(*) FROM payments") == 1
    assert stock_of(conn, buy.sku) == 4


def test_ingest_refuses_a_connection_inside_an_open_transaction(database_url):
    import psycopg

    delivery = purchase_on(database_url).captured()
    with psycopg.connect(database_url) as open_tx:
        open_tx.execute("SELECT 1")
        with pytest.raises(ValueError, match="autocommit connection with no open transaction"):
            deliver(open_tx, delivery)


def purchase_on(url):
    import psycopg

    with psycopg.connect(url, autocommit=True) as own:
        return purchase(own)


def test_ingest_refuses_a_connection_that_is_not_autocommit(database_url):
    import psycopg

    delivery = purchase_on(database_url).captured()
    with psycopg.connect(database_url) as manual, pytest.raises(ValueError, match="autocommit"):
        deliver(manual, delivery)


# The claim's steps are written once (idempotency) and driven twice (db.run, db.run_async):
# every outcome of the claim, on both drivers.


@pytest.fixture(params=["sync", "async"])
def driven(request, conn):
    """Runs a step in a transaction of its own, on ``conn`` or on an async connection."""

    def run(steps):
        if request.param == "sync":
            with conn.transaction():
                return db.run(conn, steps)
        return asyncio.run(_run_async(conn.info.dsn, steps))

    return run


async def _run_async(dsn, steps):
    import psycopg

    connecting = psycopg.AsyncConnection.connect(dsn, autocommit=True)
    async with await connecting as on, on.transaction():
        return await db.run_async(on, steps)


def received_of(delivery, **changes):
    event = ADAPTERS[delivery.provider].parse(delivery.body, delivery.headers)
    return Received(event=replace(event, **changes), body=delivery.body)


def test_a_new_key_is_claimed_with_the_transaction_that_wrote_it(conn, driven):
    claim = driven(idempotency.claiming(received_of(purchase(conn).captured())))
    assert claim.state is idempotency.ClaimState.NEW and claim.xmin
    assert scalar(conn, "SELECT outcome FROM processed_webhooks") == "processed"


def test_a_settled_copy_is_seen_and_claimed_as_a_duplicate_with_its_order(conn, driven):
    delivery = purchase(conn).captured()
    order_id = deliver(conn, delivery).order_id
    seen = driven(idempotency.seeing(received_of(delivery).event))
    claimed = driven(idempotency.claiming(received_of(delivery)))
    for claim in (seen, claimed):
        assert (claim.state, claim.order_ref, claim.mismatch) == (
            idempotency.ClaimState.DUPLICATE,
            order_id,
            False,
        )


def test_another_body_under_a_claimed_key_is_a_duplicate_marked_once(conn, driven):
    buy = purchase(conn)
    first = buy.captured()
    deliver(conn, first)
    other = received_of(first, payload_sha256="0" * 64)
    assert driven(idempotency.seeing(other.event)) is None
    claim = driven(idempotency.claiming(other))
    assert claim.state is idempotency.ClaimState.DUPLICATE and claim.mismatch
    assert scalar(conn, "SELECT mismatches FROM processed_webhooks") == 1


def test_the_same_bytes_under_another_key_are_the_first_ones_duplicate(conn, driven):
    delivery = purchase(conn).captured()
    order_id = deliver(conn, delivery).order_id
    claim = driven(idempotency.claiming(received_of(delivery, event_id="evt_rekeyed0001")))
    assert (claim.state, claim.order_ref, claim.mismatch) == (
        idempotency.ClaimState.DUPLICATE,
        order_id,
        False,
    )
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 1


def test_a_parked_record_is_taken_under_its_lock_and_not_seen(conn, driven):
    orphan = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_orphan000002", order_id="order_nowhere", amount_paise=1
    )
    assert deliver(conn, orphan).outcome is Outcome.PARKED
    assert driven(idempotency.seeing(received_of(orphan).event)) is None
    assert driven(idempotency.claiming(received_of(orphan))).state is idempotency.ClaimState.PARKED


def test_unclaiming_deletes_only_the_record_its_claim_inserted(conn, driven):
    received = received_of(purchase(conn).captured())
    claim = driven(idempotency.claiming(received))
    other = replace(claim, xmin=str(int(claim.xmin) + 1))
    driven(idempotency.unclaiming(received.event, other, idle=True, autocommit=True))
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 1
    driven(idempotency.unclaiming(received.event, claim, idle=True, autocommit=True))
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 0


async def _ingest_async(dsn, received, handler):
    import psycopg

    from payhooks.aio import claims

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as on:
        return await claims.ingest_received(on, received, handler)


def commits(connection, event):
    connection.execute("COMMIT")
    return Applied(outcome=Outcome.PROCESSED)


async def commits_async(connection, event):
    await connection.execute("COMMIT")
    return Applied(outcome=Outcome.PROCESSED)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_handler_that_commits_as_sql_is_refused_and_its_claim_deleted(conn, driver):
    from payhooks.aio.hooks import guarded as guarded_async
    from payhooks.intake.hooks import guarded

    delivery = purchase(conn).captured()
    with pytest.raises(HandlerCommitted):
        if driver == "sync":
            ingest_received(conn, received_of(delivery), guarded(commits))
        else:
            asyncio.run(
                _ingest_async(conn.info.dsn, received_of(delivery), guarded_async(commits_async))
            )
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 0
    assert deliver(conn, delivery).outcome is Outcome.PROCESSED


NOTE = "INSERT INTO merchant_notes VALUES (%s)"


def swallowing(call: str):
    """A handler that writes, then commits or rolls back the claim's connection, catches
    psycopg's refusal and carries on, as a merchant used to owning the transaction might."""

    def handler(connection, event):
        connection.execute(NOTE, (event.event_id,))
        with contextlib.suppress(psycopg.ProgrammingError):
            getattr(connection, call)()
        return Applied(outcome=Outcome.PROCESSED)

    return handler


def swallowing_async(call: str):
    async def handler(connection, event):
        await connection.execute(NOTE, (event.event_id,))
        with contextlib.suppress(psycopg.ProgrammingError):
            await getattr(connection, call)()
        return Applied(outcome=Outcome.PROCESSED)

    return handler


@pytest.mark.parametrize("call", ["commit", "rollback"])
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_handler_that_catches_the_refusal_of_its_commit_is_refused_all_the_same(
    conn, driver, call
):
    """psycopg refuses ``commit()`` and ``rollback()`` inside the claim's transaction; a
    handler that catches the refusal and returns is answered ``handler_committed`` as one that
    let it raise: nothing it or the claim wrote is kept, and the gateway's retry applies it."""
    from payhooks.aio.hooks import guarded as guarded_async
    from payhooks.intake.hooks import guarded

    conn.execute("CREATE TABLE merchant_notes (event_id text)")
    delivery = purchase(conn).captured()
    with pytest.raises(HandlerCommitted, match=rf"{call}\(\)"):
        if driver == "sync":
            ingest_received(conn, received_of(delivery), guarded(swallowing(call)))
        else:
            handler = guarded_async(swallowing_async(call))
            asyncio.run(_ingest_async(conn.info.dsn, received_of(delivery), handler))
    assert scalar(conn, "SELECT count(*) FROM merchant_notes") == 0
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 0
    assert deliver(conn, delivery).outcome is Outcome.PROCESSED
