"""A refund is an intent before it is a call: written in the caller's transaction under a key
made from the caller's own, never more than the payment captured minus its live refunds,
however many ask at once. On real PostgreSQL, with real concurrent transactions."""

from __future__ import annotations

import re
import threading
from dataclasses import replace

import psycopg
import pytest

import payhooks
from payhooks.plumbing.errors import Conflict, InvalidRequest
from payhooks.refunding import refunds
from payhooks.refunding.refunds import RefundState, RefundTooLarge
from tests.conftest import run_threads
from tests.factories import ADAPTERS, GATEWAY

PAYMENT = "pay_rf000000000001"


@pytest.fixture
def core(database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        yield conn


def ask(conn, amount: int, key: str = "ticket-1", captured: int = 49_900, **more):
    return refunds.request(conn, "razorpay", PAYMENT, amount, key=key, captured_paise=captured,
                           reason="double payment", requested_by="asha", **more)  # fmt: skip


def test_an_intent_is_written_under_a_key_every_gateway_takes(core):
    made = ask(core, 49_900)
    assert made.state is RefundState.REQUESTED and made.attempts == 0
    assert re.fullmatch(r"ph[0-9a-f]{20}", made.idempotency_key)  # 22: PayU's token takes 23
    assert refunds.of_payment(core, "razorpay", PAYMENT) == [made]


def test_the_same_key_is_the_same_intent_and_never_another_refund(core):
    first = ask(core, 20_000)
    assert ask(core, 20_000) == first
    with pytest.raises(Conflict, match="already names a refund of 20000 paise"):
        ask(core, 30_000)
    assert len(refunds.of_payment(core, "razorpay", PAYMENT)) == 1


def test_another_key_is_another_refund_until_the_captured_amount_is_used_up(core):
    ask(core, 20_000, key="a")
    ask(core, 29_900, key="b")
    with pytest.raises(RefundTooLarge, match="1 paise is more than the 0 paise still refundable"):
        ask(core, 1, key="c")


def test_a_refund_the_gateway_refused_frees_its_amount(core):
    made = ask(core, 49_900, key="a")
    refunds.refused(core, made, "not captured")
    assert ask(core, 49_900, key="b").state is RefundState.REQUESTED


def test_in_the_callers_transaction_a_rollback_leaves_no_intent(core):
    with pytest.raises(RuntimeError), core.transaction():
        ask(core, 100)
        raise RuntimeError("the caller's own write failed")
    assert refunds.of_payment(core, "razorpay", PAYMENT) == []


@pytest.mark.parametrize(
    ("changes", "problem"),
    [({"amount": 0}, "amount_paise is a whole number"), ({"key": ""}, "key is 1 to 255"),
     ({"key": "a\nb"}, "key is 1 to 255"), ({"captured": True}, "captured_paise"),
     ({"currency": "inr"}, "three capital letters")],
)  # fmt: skip
def test_a_refund_asked_wrongly_is_refused_saying_why(core, changes, problem):
    args = {"amount": 100, "key": "k-1", "captured": 49_900, **changes}
    with pytest.raises(InvalidRequest, match=problem):
        ask(core, args.pop("amount"), key=args.pop("key"), captured=args.pop("captured"), **args)


def test_thirty_askers_at_once_never_take_more_than_was_captured(core, database_url):
    """Thirty transactions each ask for a tenth of the payment under their own key, all at
    once: ten are written, twenty refused, and the intents add up to the captured amount."""
    start = threading.Barrier(30)
    made: list[str] = []
    too_large: list[str] = []

    def asker(n: int) -> None:
        with psycopg.connect(database_url) as conn:
            start.wait(timeout=30)
            try:
                with conn.transaction():
                    ask(conn, 4_990, key=f"k{n}")
                made.append(f"k{n}")
            except RefundTooLarge:
                too_large.append(f"k{n}")

    threads = [threading.Thread(target=asker, args=(n,)) for n in range(30)]
    run_threads(threads)
    assert (len(made), len(too_large)) == (10, 20)
    total = core.execute("SELECT sum(amount_paise) FROM payhooks_refunds").fetchone()[0]
    assert total == 49_900


def at_repeatable_read(database_url: str) -> psycopg.Connection:
    conn = psycopg.connect(database_url)
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    return conn


def test_at_repeatable_read_an_intent_written_after_the_snapshot_still_counts(core, database_url):
    """Two overlapping REPEATABLE READ transactions, each snapshot taken before the other
    wrote: the first's intent is counted by the second, which is refused (its serialization
    fails, to be retried by the caller, who then finds too little left), never written."""
    with at_repeatable_read(database_url) as first, at_repeatable_read(database_url) as second:
        first.execute("SELECT 1")  # each snapshot taken now
        second.execute("SELECT 1")
        ask(first, 30_000, key="first")
        first.commit()
        with pytest.raises((psycopg.errors.SerializationFailure, RefundTooLarge)):
            ask(second, 30_000, key="second")
        second.rollback()
        with pytest.raises(RefundTooLarge):  # the caller's retry, in a fresh snapshot
            ask(second, 30_000, key="second")
    total = core.execute("SELECT sum(amount_paise) FROM payhooks_refunds").fetchone()[0]
    assert total == 30_000


def test_thirty_askers_at_repeatable_read_never_take_more_than_was_captured(core, database_url):
    """The thirty askers again, each at REPEATABLE READ retrying a serialization failure as
    such callers do: ten written, twenty refused, the intents adding up to what was captured."""
    start = threading.Barrier(30)
    made: list[str] = []
    too_large: list[str] = []

    def asker(n: int) -> None:
        with at_repeatable_read(database_url) as conn:
            conn.execute("SELECT 1")  # the snapshot, before the barrier
            start.wait(timeout=30)
            while True:
                try:
                    with conn.transaction():
                        conn.execute("SELECT 1")
                        ask(conn, 4_990, key=f"k{n}")
                    conn.commit()
                    made.append(f"k{n}")
                    return
                except RefundTooLarge:
                    too_large.append(f"k{n}")
                    return
                except psycopg.errors.SerializationFailure:
                    conn.rollback()

    threads = [threading.Thread(target=asker, args=(n,)) for n in range(30)]
    run_threads(threads)
    assert (len(made), len(too_large)) == (10, 20)
    total = core.execute("SELECT sum(amount_paise) FROM payhooks_refunds").fetchone()[0]
    assert total == 49_900


def sent_then_its_webhook(core, refund_id: str, webhook_paise: int) -> refunds.Refund:
    """An intent of 499.00 sent under ``refund_id``, then Razorpay's refund webhook for that
    id, of ``webhook_paise``: the intent as it stands after."""
    made = ask(core, 49_900)
    refunds.accepted(core, made, refund_id, processed=False)
    delivery = GATEWAY.razorpay("refund.processed", payment_id=PAYMENT, order_id="order_rf1",
                                amount_paise=webhook_paise, refund_id=refund_id)  # fmt: skip
    payhooks.ingest(core, ADAPTERS[delivery.provider], delivery.body, delivery.headers,
                    payhooks.Hooks())  # fmt: skip
    (after,) = refunds.of_payment(core, "razorpay", PAYMENT)
    return after


def test_the_refund_webhook_closes_the_intent_it_was_sent_for(core):
    closed = sent_then_its_webhook(core, "rfnd_closes00001", 49_900)
    assert (closed.state, closed.gateway_refund_id) == (RefundState.PROCESSED, "rfnd_closes00001")
    assert closed.settled_at is not None


def test_a_refund_event_of_another_amount_closes_no_intent(core):
    """A refund event closed the intent sent under its refund id whatever it refunded: PayU's
    confirmed callback carries the amount its API reports, which the sender refuses to take
    as the intent's. The intent stays sent, for the sender's check (and its alert)."""
    kept = sent_then_its_webhook(core, "rfnd_closes00002", 10_000)
    assert (kept.state, kept.settled_at) == (RefundState.SENT, None)


def test_on_an_async_connection_the_same_intent(core, database_url):
    import asyncio

    async def asked() -> refunds.Refund:
        aconn = await psycopg.AsyncConnection.connect(database_url, autocommit=True)
        async with aconn, aconn.transaction():
            return await refunds.request_async(
                aconn, "razorpay", PAYMENT, 100, key="ticket-1", captured_paise=49_900,
                reason="double payment", requested_by="asha",
            )  # fmt: skip

    made = asyncio.run(asked())
    assert ask(core, 100) == made  # the sync path finds the very intent


def test_a_gateway_payhooks_does_not_refund_is_refused_at_the_request(core):
    with pytest.raises(InvalidRequest, match="sends no refunds to phonepe yet"):
        refunds.request(core, "phonepe", "OM2501011234567890", 100, key="k-1", captured_paise=100,
                        reason="r", requested_by="asha")  # fmt: skip
    with pytest.raises(InvalidRequest, match="a Cashfree refund names its order"):
        refunds.request(core, "cashfree", "5114917039291", 100, key="k-1", captured_paise=100,
                        reason="r", requested_by="asha")  # fmt: skip


def test_a_cashfree_refund_naming_no_order_takes_it_from_the_payments_record(core):
    """Cashfree refunds under the order: one asked by the payment alone takes the order
    payhooks recorded for it, as a PayU one takes its txnid and mihpayid."""
    core.execute(
        "INSERT INTO payhooks_payments (provider, payment_id, kind, gateway_order_id, event_id,"
        " reconciled) VALUES ('cashfree', '5114917039291', 'payment_captured', 'cf_order_7',"
        " 'evt_1', false)"
    )
    made = refunds.request(core, "cashfree", "5114917039291", 100, key="k-1", captured_paise=100,
                           reason="r", requested_by="asha")  # fmt: skip
    assert made.gateway_order_id == "cf_order_7"
    with pytest.raises(InvalidRequest, match="a Cashfree refund names its order"):
        refunds.request(core, "cashfree", "5114917039999", 100, key="k-2", captured_paise=100,
                        reason="r", requested_by="asha")  # fmt: skip


def test_a_razorpay_refund_naming_no_order_takes_it_from_the_payments_record(core):
    """A refund asked by its payment alone (docs/fastapi.md's snippet names no order) is handed
    to the app's ``REFUND_PROCESSED`` handler by the sender as its refund webhook would be, and
    that webhook names the order: the handler finds the order by ``merchant_ref``. It came with
    none (the order was taken from the record only where the refund call needs it): a handler
    written from the docs recorded the refund against no order, the order stayed paid and its
    stock taken, and the webhook, a copy of the same refund, was answered ``ignored``."""
    from payhooks.gateways._refunds import processed_delivery

    core.execute(
        "INSERT INTO payhooks_payments (provider, payment_id, kind, gateway_order_id, event_id,"
        " reconciled) VALUES ('razorpay', %s, 'payment_captured', 'order_rz7', 'evt_1', false)",
        (PAYMENT,),
    )
    made = ask(core, 100)
    assert made.gateway_order_id == "order_rz7"
    done = processed_delivery(replace(made, gateway_refund_id="rfnd_rz000000000001"))
    assert (done.event.merchant_ref, done.event.payment_id) == ("order_rz7", PAYMENT)
    assert ask(core, 100, key="ticket-2", gateway_order_id="order_other").gateway_order_id == (
        "order_other"
    )  # what the caller names stands


def test_a_captured_figure_above_what_the_payment_record_says_was_paid_is_bounded_by_it(core):
    """The caller's ``captured_paise`` is a figure it read somewhere; payhooks' own record of
    the payment (``payhooks_payments.paid_paise``) is what the customer paid: the smaller
    bounds the refunds."""
    core.execute(
        "INSERT INTO payhooks_payments (provider, payment_id, kind, event_id, reconciled, "
        "paid_paise, currency) VALUES ('razorpay', %s, 'payment_captured', 'evt_1', false, "
        "30000, 'INR')",
        (PAYMENT,),
    )
    with pytest.raises(RefundTooLarge, match="more than the 30000 paise still refundable"):
        ask(core, 49_900, captured=49_900)
    assert ask(core, 30_000).amount_paise == 30_000
    with pytest.raises(RefundTooLarge, match="more than the 0 paise"):
        ask(core, 1, key="ticket-2", captured=49_900)


def test_a_captured_figure_below_the_payment_record_bounds_the_refunds_still(core):
    core.execute(
        "INSERT INTO payhooks_payments (provider, payment_id, kind, event_id, reconciled, "
        "paid_paise) VALUES ('razorpay', %s, 'payment_captured', 'evt_1', false, 49900)",
        (PAYMENT,),
    )
    with pytest.raises(RefundTooLarge, match="more than the 20000 paise"):
        ask(core, 20_001, captured=20_000)
