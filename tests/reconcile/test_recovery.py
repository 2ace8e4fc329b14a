"""A payment whose webhook never came gets its order from reconciliation, once, whichever of
the two arrives first or if both arrive at once."""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest

from payhooks.events import Provider
from payhooks.intake.ingest import Outcome
from payhooks.service.shop import carts
from tests.conftest import released_together
from tests.factories import deliver, purchase
from tests.reconcile.conftest import count, orders_of, paid_at_gateway, sim

ALERTS = "SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'alert:reconciled:%%'"
EMAILS = "SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'order_confirmation:%%'"
SALES = "SELECT coalesce(sum(-delta), 0) FROM inventory_movements WHERE reason = 'sale'"
CONFIRMED_BY_API = {Provider.PHONEPE, Provider.JUSPAY}
"""Their callbacks rest on a static credential: the status API decides (payhooks.confirmations)."""


@pytest.mark.parametrize("provider", list(Provider))
def test_a_payment_with_no_webhook_gets_its_order_from_reconciliation(conn, rig, provider):
    buy = purchase(conn, provider)
    payment_id = paid_at_gateway(rig.api, buy)
    tally = rig.run()
    assert orders_of(conn, buy.cart_id) == [(orders_of(conn, buy.cart_id)[0][0], payment_id)]
    assert tally.recovered[provider] == 1
    assert count(conn, ALERTS) == 1
    assert count(conn, EMAILS) == 1
    assert count(conn, SALES) == 1


@pytest.mark.parametrize("provider", list(Provider))
def test_the_webhook_arriving_after_reconciliation_changes_nothing(conn, rig, provider):
    buy = purchase(conn, provider)
    paid_at_gateway(rig.api, buy)
    rig.run()
    before = orders_of(conn, buy.cart_id)
    receipt = deliver(conn, buy.captured())
    if buy.captured().provider in CONFIRMED_BY_API:  # a claim, waiting for the API's word
        assert receipt.outcome is Outcome.CONFIRMING
        rig.run()  # which confirms it, changing nothing
        said = "SELECT outcome FROM processed_webhooks WHERE event_id = %s"
        assert conn.execute(said, (receipt.event.event_id,)).fetchone() == ("confirmed",)
    else:
        assert receipt.outcome is Outcome.DUPLICATE  # the payment reached the shop once already
        assert receipt.order_id == before[0][0]
    assert orders_of(conn, buy.cart_id) == before
    assert (count(conn, EMAILS), count(conn, SALES), count(conn, ALERTS)) == (1, 1, 1)


@pytest.mark.parametrize("provider", list(Provider))
def test_reconciliation_after_the_webhook_changes_nothing_and_alerts_no_one(conn, rig, provider):
    buy = purchase(conn, provider)
    deliver(conn, buy.captured())
    paid_at_gateway(rig.api, buy)
    tally = rig.run()
    # A captured PayU txnid is final; a Razorpay or Cashfree order may take another payment.
    assert sum(tally.examined.values()) == (provider is not Provider.PAYU)
    assert len(orders_of(conn, buy.cart_id)) == 1
    assert (count(conn, EMAILS), count(conn, SALES), count(conn, ALERTS)) == (1, 1, 0)


def test_a_webhook_and_reconciliation_at_the_same_moment_give_one_order(conn, rig, database_url):
    buy = purchase(conn, Provider.RAZORPAY)
    paid_at_gateway(rig.api, buy)
    report = rig.reconciler().clients[Provider.RAZORPAY].report(buy.reference)
    (reconciled,) = report.received
    webhook = buy.captured()

    def act(connection, which):
        if which == "webhook":
            return deliver(connection, webhook)
        from payhooks.reconcile.passes import _alert_unseen
        from payhooks.service import application
        from payhooks.service.reconcile.alerts import ALERTS

        return application.deliver(connection, reconciled, then=_alert_unseen([], ALERTS))

    receipts = released_together(
        ["webhook", "reconcile"],
        lambda _: psycopg.connect(database_url, autocommit=True),
        act,
    )
    # The second to commit finds the payment applied: a duplicate of it, or the shop's
    # state machine finding its payment row, both answered with the one order.
    outcomes = [r.outcome for r in receipts]
    assert Outcome.PROCESSED in outcomes and set(outcomes) <= {Outcome.PROCESSED, Outcome.DUPLICATE}
    assert len({r.order_id for r in receipts}) == 1
    assert len(orders_of(conn, buy.cart_id)) == 1
    assert (count(conn, EMAILS), count(conn, SALES)) == (1, 1)


def test_one_payment_alerts_once_however_many_passes_report_it(conn, rig):
    buy = purchase(conn, Provider.RAZORPAY)
    paid_at_gateway(rig.api, buy, "authorized")
    rig.run()
    conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
    paid_at_gateway(rig.api, buy, "captured")
    rig.run()
    assert len(orders_of(conn, buy.cart_id)) == 1
    assert count(conn, ALERTS) == 1


def test_a_failed_payment_is_recorded_and_the_checkout_asked_again_later(conn, rig):
    buy = purchase(conn, Provider.CASHFREE)
    paid_at_gateway(rig.api, buy, "FAILED")
    rig.run()
    status = conn.execute(
        "SELECT status FROM payments WHERE payment_id = %s", (buy.payment_id,)
    ).fetchone()
    assert status == ("failed",)
    assert orders_of(conn, buy.cart_id) == []
    assert count(conn, ALERTS) == 0
    later = "SELECT count(*) FROM payhooks_reconcile WHERE next_attempt_at > now()"
    assert count(conn, later) == 1


UNREADABLE_ATTEMPT = {Provider.RAZORPAY: ("failed", "status"),
                      Provider.CASHFREE: ("FAILED", "payment_status")}  # fmt: skip


@pytest.mark.parametrize("provider", list(UNREADABLE_ATTEMPT))
def test_a_payment_the_answer_lists_unreadably_never_hides_the_orders_capture(conn, rig, provider):
    """An order's failed attempt the API lists in a shape payhooks cannot read (its status not
    text) is that attempt's trouble: the capture after it is applied all the same, and the
    checkout keeps the attempt's reason, counted and asked again, never passed over."""
    buy = purchase(conn, provider)
    failed, field = UNREADABLE_ATTEMPT[provider]
    rig.api.pay(sim(buy), "attempt_unreadable_1", failed)
    [entity] = rig.api.open_order(sim(buy)).payments
    rig.api.book(sim(buy), entity | {field: [failed]})
    payment_id = paid_at_gateway(rig.api, buy)
    tally = rig.run()
    assert [p for _, p in orders_of(conn, buy.cart_id)] == [payment_id]
    assert tally.unreadable[provider] == 1 and tally.failures == 1, tally.summary()
    assert "1 payment(s) the gateway reported unreadably" in tally.summary()
    assert "handler" not in tally.summary() + tally.trouble()  # no handler ran for it
    (error,) = conn.execute("SELECT last_error FROM payhooks_reconcile").fetchone()
    assert "attempt_unreadable_1" in error and field in error, error


@pytest.mark.parametrize("provider", list(UNREADABLE_ATTEMPT))
def test_an_orders_only_payment_listed_unreadably_is_counted_and_kept_as_its_error(
    conn, rig, provider
):
    """No payment captured, and the one the API lists unreadable: the checkout keeps its
    reason, counted and asked again. Cashfree's answer asks the order too when nothing is
    captured, and that second answer must not stand for the first's unreadable payment."""
    buy = purchase(conn, provider)
    failed, field = UNREADABLE_ATTEMPT[provider]
    rig.api.pay(sim(buy), "attempt_unreadable_2", failed)
    [entity] = rig.api.open_order(sim(buy)).payments
    rig.api.book(sim(buy), entity | {field: 5})
    tally = rig.run()
    assert orders_of(conn, buy.cart_id) == []
    assert tally.unreadable[provider] == 1 and tally.failures == 1, tally.summary()
    assert tally.trouble() == "1 payment(s) the gateway reported unreadably"
    (error,) = conn.execute("SELECT last_error FROM payhooks_reconcile").fetchone()
    assert "attempt_unreadable_2" in error and field in error, error


FLAGS = "SELECT flags, needs_refund FROM payments WHERE provider = %s AND payment_id = %s"


def test_a_second_payment_for_a_paid_cart_is_found_and_flagged_like_a_webhooks(conn, rig):
    """Paid on Razorpay (its webhook came) and on PayU (no webhook): reconciliation still
    asks the PayU checkout, records the capture and flags it for refund."""
    buy = purchase(conn, Provider.RAZORPAY)
    other = carts.checkout(conn, buy.cart_id, Provider.PAYU)
    deliver(conn, buy.captured())
    second = replace(buy, provider=Provider.PAYU, reference=other.gateway_order_id)
    paid_at_gateway(rig.api, second)
    tally = rig.run()
    assert tally.applied[Provider.PAYU] == 1
    assert len(orders_of(conn, buy.cart_id)) == 1
    flags = conn.execute(FLAGS, ("payu", second.reference)).fetchone()
    assert flags == (["duplicate_payment"], True)
    duplicate = "SELECT count(*) FROM outbox WHERE dedupe_key = 'alert:duplicate_payment:payu:%s'"
    assert count(conn, duplicate % second.reference) == 1


def test_every_checkout_of_a_cart_is_asked_whatever_the_carts_other_checkouts_did(conn, rig):
    buy = purchase(conn, Provider.CASHFREE)
    other = carts.checkout(conn, buy.cart_id, Provider.RAZORPAY)
    second = replace(buy, provider=Provider.RAZORPAY, reference=other.gateway_order_id)
    paid_at_gateway(rig.api, buy)
    rig.run()  # the Cashfree payment pays the cart; Razorpay knows the order, no payment yet
    rig.api.open_order(sim(second))
    assert len(orders_of(conn, buy.cart_id)) == 1
    conn.execute(DUE_NOW + " WHERE provider = 'razorpay'")
    asked = rig.run()
    assert (asked.examined[Provider.CASHFREE], asked.examined[Provider.RAZORPAY]) == (0, 1)
    paid_at_gateway(rig.api, second)
    conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
    rig.run()
    final = rig.run()
    assert sum(final.examined.values()) == 0  # both captured: asked again only much later
    flags = conn.execute(FLAGS, ("razorpay", second.payment_id)).fetchone()
    assert flags == (["duplicate_payment"], True)


SECOND = {Provider.RAZORPAY: "pay_S3condPaymnt1", Provider.CASHFREE: "9999999999"}
DUE_NOW = "UPDATE payhooks_reconcile SET next_attempt_at = now()"


@pytest.mark.parametrize("provider", [Provider.RAZORPAY, Provider.CASHFREE])
def test_a_second_payment_on_the_same_gateway_order_is_found_and_flagged_once(conn, rig, provider):
    """Payment A's webhook came; payment B on the same order (a retry, a second tab, a late
    UPI) was captured with no webhook: B is recorded and flagged as a webhook would flag
    it, once, however many passes ask."""
    buy = purchase(conn, provider)
    deliver(conn, buy.captured())
    rig.api.pay(sim(buy), buy.payment_id)
    rig.api.pay(sim(buy), SECOND[provider])
    for _ in range(3):
        rig.run()
        conn.execute(DUE_NOW)
    assert len(orders_of(conn, buy.cart_id)) == 1
    assert conn.execute(FLAGS, (provider.value, SECOND[provider])).fetchone() == (
        ["duplicate_payment"],
        True,
    )
    key = f"alert:duplicate_payment:{provider.value}:{SECOND[provider]}"
    assert count(conn, "SELECT count(*) FROM outbox WHERE dedupe_key = %s", key) == 1


@pytest.mark.parametrize("provider", [Provider.RAZORPAY, Provider.CASHFREE])
def test_a_captured_checkout_is_asked_again_at_growing_intervals(conn, rig, provider):
    buy = purchase(conn, provider)
    deliver(conn, buy.captured())
    rig.api.pay(sim(buy), buy.payment_id)
    waits = []
    for _ in range(4):
        assert rig.run().examined[provider] == 1
        waits.append(
            count(
                conn,
                "SELECT extract(epoch FROM next_attempt_at - now())::int FROM payhooks_reconcile",
            )
        )
        assert rig.run().examined[provider] == 0  # not due again yet
        conn.execute(DUE_NOW)
    assert waits == sorted(waits) and waits[0] >= 3600 - 60 and waits[-1] > waits[0]


def test_a_captured_payu_checkout_is_final(conn, rig):
    buy = purchase(conn, Provider.PAYU)
    paid_at_gateway(rig.api, buy)
    rig.run()
    conn.execute(DUE_NOW)
    assert rig.run().examined[Provider.PAYU] == 0  # a txnid is one payment


def test_a_cashfree_payment_short_of_its_order_amount_is_flagged_not_ordered(conn, rig):
    buy = purchase(conn, Provider.CASHFREE)
    rig.api.pay(sim(buy), buy.payment_id, payment_amount_paise=buy.amount_paise - 100)
    rig.run()
    assert orders_of(conn, buy.cart_id) == []
    held = conn.execute(
        "SELECT expected_paise, paid_paise FROM payhooks_amount_mismatches WHERE payment_id = %s",
        (buy.payment_id,),
    ).fetchone()
    assert held == (buy.amount_paise, buy.amount_paise - 100)  # parked for a person


def test_a_cashfree_payment_above_its_order_amount_a_service_fee_is_ordered(conn, rig):
    buy = purchase(conn, Provider.CASHFREE)
    rig.api.pay(sim(buy), buy.payment_id, payment_amount_paise=buy.amount_paise + 236)
    rig.run()
    assert len(orders_of(conn, buy.cart_id)) == 1


SHORT = 600
"""Paid for a checkout of ₹499: parked for its amount (``payhooks.expect``)."""
MISMATCHES = (
    "SELECT count(*) FILTER (WHERE resolved_at IS NULL), count(*) FROM payhooks_amount_mismatches"
)


@pytest.mark.parametrize("provider", list(Provider))
def test_a_payment_settled_by_hand_is_not_parked_again_when_reconciliation_reports_it(
    conn, rig, provider
):
    """Paid short, parked, refunded at the gateway and resolved before reconciliation asked:
    the gateway's API still says it was paid, and reconciliation's report of it, under a key
    of its own, is recorded ignored with the settlement named; no second mismatch asks a
    person to refund it again."""
    from payhooks.intake.expectations import resolve
    from payhooks.intake.idempotency import parked

    buy = purchase(conn, provider)
    rig.api.pay(replace(sim(buy), amount_paise=SHORT), buy.payment_id)
    delivered = deliver(conn, buy.captured(amount_paise=SHORT))
    if provider in CONFIRMED_BY_API:  # the callback is a claim: the API's report is parked
        assert delivered.outcome is Outcome.CONFIRMING
        rig.run()
    [held] = parked(conn)
    resolve(conn, provider, held.event_id, "refunded at the gateway")
    conn.execute(DUE_NOW)
    rig.run()
    assert parked(conn) == [] and orders_of(conn, buy.cart_id) == []
    assert conn.execute(MISMATCHES).fetchone() == (0, 1)
    notes = conn.execute("SELECT event_id, resolution FROM payhooks_resolutions").fetchall()
    if provider not in CONFIRMED_BY_API:  # reconciliation's report is a copy under its own key
        [(copy, note)] = notes
        assert copy.startswith("reconcile:") and held.event_id in note
        assert "refunded at the gateway" in note


def test_a_real_payu_second_payment_under_one_txnid_is_flagged_once_an_edited_copy_never(conn, rig):
    """PayU's hash does not cover ``mihpayid``: the shop hears of a second post under one
    txnid, and PayU's ``check_payment`` decides. Both real: the second is its own payment,
    flagged for refund like any double payment; an invented one changes nothing."""
    buy = purchase(conn, Provider.PAYU)
    second, invented = "403993715521000222", "403993715521000999"
    paid_at_gateway(rig.api, buy)
    rig.api.pay(sim(buy), second)
    assert deliver(conn, buy.captured()).outcome is Outcome.PROCESSED
    for mihpayid in (second, invented):
        assert deliver(conn, buy.captured(payment_id=mihpayid)).outcome is Outcome.CONFIRMING
    rig.run()
    assert [p for _, p in orders_of(conn, buy.cart_id)] == [buy.reference]
    assert conn.execute(FLAGS, ("payu", second)).fetchone() == (["duplicate_payment"], True)
    assert conn.execute(FLAGS, ("payu", invented)).fetchone() is None
    assert conn.execute(FLAGS, ("payu", buy.reference)).fetchone() == ([], False)


def test_the_workers_pass_for_cron_sends_the_refunds_due(conn, rig):
    """``payhooks worker --once`` does every duty once: the refund intents due are sent (it
    retried parked deliveries and reconciled only, so a cron-run worker never refunded)."""
    from payhooks.refunding import refunds

    payment_id = refund_asked(conn, rig)
    assert worker_once(rig) == []
    [intent] = refunds.of_payment(conn, "razorpay", payment_id)
    assert intent.state.value == "processed" and intent.gateway_refund_id


def refund_asked(conn, rig) -> str:
    """A Razorpay payment captured and applied, and a refund of part of it asked for: its id."""
    from payhooks.refunding import refunds

    buy = purchase(conn, Provider.RAZORPAY)
    payment_id = paid_at_gateway(rig.api, buy)
    rig.run()
    refunds.request(conn, "razorpay", payment_id, 100, key="once", captured_paise=buy.amount_paise,
                    reason="cron", requested_by="test")  # fmt: skip
    return payment_id


def worker_once(rig) -> list[str]:
    """``payhooks worker --once``'s pass (no purge, no settlements): what it says failed."""
    from payhooks.service.worker import Worker, WorkerOptions

    options = WorkerOptions(purge_every_seconds=None, settlements_every_seconds=None)
    runner = Worker(rig.pool, replace(rig.settings, smtp_url=None), options, jitter=lambda: 0.0)
    try:
        return runner.once()[1]
    finally:
        runner.close()


def test_the_workers_pass_for_cron_says_what_the_gateways_api_left_undone(conn, rig):
    """A refund the gateway's API failed (500 at every call) is left to try again, and a
    checkout it could not be asked about is asked again later: ``payhooks worker --once``
    counted neither, and a cron-run worker exited 0 while nothing was refunded, as ``refunds
    send --once`` and ``reconcile`` (exit 1) do not. Each duty's trouble is said."""
    from payhooks.refunding import refunds
    from payhooks.sim.gateway_api import Fault

    payment_id = refund_asked(conn, rig)
    rig.api.fail_next(Provider.RAZORPAY, *[Fault(status=500)] * 20)
    failed = worker_once(rig)
    [intent] = refunds.of_payment(conn, "razorpay", payment_id)
    assert intent.state.value == "requested" and "500" in (intent.last_error or "")
    assert any("1 refund(s) to try again (razorpay: 1)" in said for said in failed), failed


def test_the_workers_pass_for_cron_names_a_callback_its_api_failed_once(conn, rig):
    """A PhonePe callback whose status API answers 503: the worker's reconciliation pass
    (which confirms the callbacks due too) and its confirm duty each said it, the second as a
    callback waiting after an earlier error. Said once a pass: the error, then what waits."""
    from payhooks.sim.gateway_api import Fault
    from tests.factories import deliver

    buy = purchase(conn, Provider.PHONEPE)
    paid_at_gateway(rig.api, buy)
    assert deliver(conn, buy.captured()).outcome is Outcome.CONFIRMING
    rig.api.fail_next(Provider.PHONEPE, *[Fault(status=503)] * 20)
    first = worker_once(rig)
    assert [said for said in first if "phonepe" in said] == [
        "reconcile: 1 gateway API error(s) (phonepe 1)"
    ], first
    second = worker_once(rig)
    assert [said for said in second if "phonepe" in said] == [
        "reconcile: 1 callback(s) waiting to be asked again after an error (phonepe 1)"
    ], second


def test_the_workers_pass_for_cron_says_the_outbox_failed_rather_than_raise(conn, rig):
    """The outbox's drain raising (the database gone mid-pass) was the one step of ``--once``
    not guarded: it raised, and the duties that had failed before it were never said."""
    from dataclasses import replace

    from payhooks.service.worker import Worker, WorkerOptions

    class Broken:
        unavailable = False

        def drain(self) -> int:
            raise RuntimeError("the outbox broke")

    options = WorkerOptions(purge_every_seconds=None, settlements_every_seconds=None)
    runner = Worker(rig.pool, replace(rig.settings, smtp_url=None), options, jitter=lambda: 0.0)
    runner.sender = Broken()
    try:
        handled, failed = runner.once()
    finally:
        runner.close()
    assert (handled, failed) == (0, ["outbox"])
