"""The double-payment policy (``PAYHOOKS_REFUND_DOUBLE_PAYMENTS``): the second payment of a
paid cart is refunded automatically, once, by the reference worker's pass; the payment that
made the order never is. Real PostgreSQL, the refund double over a loopback socket."""

from __future__ import annotations

import logging
import secrets
from dataclasses import replace
from datetime import UTC, datetime

import psycopg
import pytest

from payhooks.events import Provider
from payhooks.intake.ingest import Outcome
from payhooks.intake.stored import received_again
from payhooks.refunding import refunds, sending
from payhooks.refunding.refunds import RefundState
from payhooks.service import alerting, application
from payhooks.service.console import actions as console_actions
from payhooks.service.shop import carts, double_refunds
from payhooks.sim.deliveries import Disputed
from payhooks.sim.gateway import new_payment_id
from payhooks.sim.gateway_api import Fault
from payhooks.sim.gateways import razorpay as razorpay_sim
from tests.factories import GATEWAY, Purchase, deliver, purchase
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import paid_at_gateway

rig = reconciling.rig  # its fixture
gateway_api = reconciling.gateway_api

PAYMENT = "SELECT status, needs_refund, flags FROM payments WHERE provider = %s AND payment_id = %s"


def paid_twice(conn, rig, provider: Provider):
    """Two tabs paying one cart: two payments of its checkout (one gateway order)."""
    buy = purchase(conn, provider)
    other = carts.checkout(conn, buy.cart_id, provider)
    again = replace(buy, reference=other.gateway_order_id, payment_id=new_payment_id(provider))
    deliver(conn, buy.captured())
    deliver(conn, again.captured())
    paid_at_gateway(rig.api, buy)
    paid_at_gateway(rig.api, again)
    return buy, again.payment_id if provider is not Provider.PAYU else again.reference


@pytest.mark.parametrize("provider", [Provider.RAZORPAY, Provider.CASHFREE])
def test_the_second_payment_is_refunded_once_and_the_first_never(conn, rig, provider):
    buy, second = paid_twice(conn, rig, provider)
    assert conn.execute(PAYMENT, (provider.value, second)).fetchone()[1] is True  # flagged
    reconciler = rig.reconciler()
    tally = application.send_refunds(reconciler, double_payments=True)
    assert tally.sent[provider] == 1
    again = application.send_refunds(reconciler, double_payments=True)  # the next tick
    assert sum(again.sent.values()) == 0
    books = rig.api.money
    made = [books.made[(provider, p)] for p in (second, buy.payment_id)]
    if provider is Provider.RAZORPAY:  # refunds a payment
        assert made == [1, 0]
    else:  # Cashfree refunds an order: which of its payments it counts against is its own
        assert sum(made) == 1
    assert sum(books.refunded[(provider, p)] for p in (second, buy.payment_id)) == 49_900
    (intent,) = refunds.of_payment(conn, provider, second)
    assert (intent.state, intent.amount_paise) == (RefundState.PROCESSED, buy.amount_paise)
    assert intent.requested_by == double_refunds.REQUESTED_BY


def test_the_refund_webhook_then_marks_the_second_payment_refunded(conn, rig):
    buy, second = paid_twice(conn, rig, Provider.RAZORPAY)
    application.send_refunds(rig.reconciler(), double_payments=True)
    (intent,) = refunds.of_payment(conn, Provider.RAZORPAY, second)
    webhook = GATEWAY.razorpay("refund.processed", payment_id=second, order_id=buy.reference,
                               amount_paise=buy.amount_paise,
                               refund_id=intent.gateway_refund_id)  # fmt: skip
    deliver(conn, webhook)  # the gateway's refund webhook
    status, needs_refund, flags = conn.execute(PAYMENT, ("razorpay", second)).fetchone()
    assert (status, needs_refund, "duplicate_payment" in flags) == ("refunded", False, True)


SENT_REFUND = "SELECT event_id, body FROM processed_webhooks WHERE provider = %s AND event_id = %s"
REFUNDED = "SELECT refunded_paise FROM payments WHERE provider = %s AND payment_id = %s"


@pytest.mark.parametrize("provider", [Provider.RAZORPAY, Provider.CASHFREE])
def test_the_refund_made_reads_refunded_with_no_webhook_and_its_webhook_changes_nothing(
    conn, rig, provider
):
    buy, second = paid_twice(conn, rig, provider)
    application.send_refunds(rig.reconciler(), double_payments=True)
    (intent,) = refunds.of_payment(conn, provider, second)
    status, needs_refund, _ = conn.execute(PAYMENT, (provider.value, second)).fetchone()
    assert (intent.state, status, needs_refund) == (RefundState.PROCESSED, "refunded", False)
    key = sending.processed_key(intent.gateway_refund_id)
    event_id, body = conn.execute(SENT_REFUND, (provider.value, key)).fetchone()
    again = received_again({}, provider=provider.value, event_id=event_id, body=bytes(body),
                           headers={})  # fmt: skip  # the console's and a replay's reading
    assert (again.event.refund_id, again.event.refund_amount_paise) == (
        intent.gateway_refund_id, buy.amount_paise)  # fmt: skip
    assert again.event.refund_key == intent.idempotency_key  # names its intent, as a webhook
    if provider is Provider.RAZORPAY:
        webhook = GATEWAY.razorpay("refund.processed", payment_id=second, order_id=buy.reference,
                                   amount_paise=buy.amount_paise,
                                   refund_id=intent.gateway_refund_id)  # fmt: skip
        deliver(conn, webhook)  # the gateway's own refund webhook, late: the same refund
    assert conn.execute(REFUNDED, (provider.value, second)).fetchone()[0] == buy.amount_paise


def test_a_refund_made_that_the_shop_could_not_take_is_settled_on_a_later_pass(conn, rig):
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    reconciler = rig.reconciler()
    with reconciler.connect() as own:
        double_refunds.request_due(own)
    found = {Provider.RAZORPAY: reconciler.clients[Provider.RAZORPAY]}

    def refused(refund) -> None:
        raise RuntimeError("the shop's database went away")

    tally = sending.send_due(reconciler.connect, found, settle=refused)
    (intent,) = refunds.of_payment(conn, Provider.RAZORPAY, second)
    assert (tally.sent[Provider.RAZORPAY], tally.processed[Provider.RAZORPAY]) == (1, 0)
    assert intent.state is RefundState.SENT  # made at the gateway, not yet taken: asked again
    conn.execute("UPDATE payhooks_refunds SET next_attempt_at = now()")
    application.send_refunds(reconciler, double_payments=True)
    (intent,) = refunds.of_payment(conn, Provider.RAZORPAY, second)
    status = conn.execute(PAYMENT, ("razorpay", second)).fetchone()[0]
    assert (intent.state, status) == (RefundState.PROCESSED, "refunded")
    assert rig.api.money.made[(Provider.RAZORPAY, second)] == 1


def test_off_by_default_the_second_payment_waits_for_a_person(conn, rig):
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    application.send_refunds(rig.reconciler(), double_payments=False)
    assert refunds.of_payment(conn, Provider.RAZORPAY, second) == []
    assert rig.api.money.made[(Provider.RAZORPAY, second)] == 0


def test_a_double_payment_at_a_gateway_payhooks_does_not_refund_keeps_its_flag(conn):
    """PhonePe: refunded by a person (payhooks sends no PhonePe refunds yet)."""
    buy = purchase(conn, Provider.RAZORPAY)
    deliver(conn, buy.captured())
    conn.execute(  # the payment as a PhonePe one, once its callback is confirmed, is kept
        "UPDATE payments SET provider = 'phonepe', needs_refund = true,"
        " flags = ARRAY['duplicate_payment']"
    )
    assert double_refunds.request_due(conn) == 0
    assert conn.execute("SELECT needs_refund FROM payments").fetchone() == (True,)


def test_one_payment_the_policy_cannot_refund_holds_back_no_other(conn, rig):
    """A key already taken by another refund (a Conflict) is skipped, logged; the next double
    payment is still refunded."""
    _, first = paid_twice(conn, rig, Provider.RAZORPAY)
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    refunds.request(conn, "razorpay", first, 1, key=double_refunds.key_of(first),
                    captured_paise=49_900, reason="a person's", requested_by="asha")  # fmt: skip
    application.send_refunds(rig.reconciler(), double_payments=True)
    assert rig.api.money.made[(Provider.RAZORPAY, second)] == 1


def refusing_intents_of(conn, payment_id: str) -> None:
    """A real fault: a trigger refusing every refund intent of ``payment_id``."""
    conn.execute(
        "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_one BEFORE INSERT ON payhooks_refunds FOR EACH ROW"
        f" WHEN (NEW.payment_id = '{payment_id}') EXECUTE FUNCTION refuse_one()"
    )


def test_one_payment_whose_intent_the_database_refuses_holds_back_no_other(conn, rig):
    """A trigger refuses the first double payment's intent: the second is still refunded, and
    the first keeps its flag (the payments-to-refund alert) and is asked for again."""
    _, first = paid_twice(conn, rig, Provider.RAZORPAY)
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    refusing_intents_of(conn, first)
    tally = application.send_refunds(rig.reconciler(), double_payments=True)
    assert tally.sent[Provider.RAZORPAY] == 1
    assert rig.api.money.made[(Provider.RAZORPAY, second)] == 1
    assert conn.execute(PAYMENT, ("razorpay", first)).fetchone()[1] is True
    conn.execute("DROP TRIGGER refuse_one ON payhooks_refunds")
    application.send_refunds(rig.reconciler(), double_payments=True)
    assert rig.api.money.made[(Provider.RAZORPAY, first)] == 1


def test_double_payments_refused_every_tick_never_take_the_places_of_the_ones_after(conn, rig):
    """More payments refused every tick than a tick takes (``limit``) still let the next be
    asked for: a tick reads on past them, never only the first ``limit``."""
    _, first = paid_twice(conn, rig, Provider.RAZORPAY)
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    refusing_intents_of(conn, first)
    assert double_refunds.request_due(conn, limit=1) == 1
    assert [r.payment_id for r in refunds.of_payment(conn, "razorpay", second)] == [second]
    assert refunds.of_payment(conn, "razorpay", first) == []


def test_the_policy_failing_whole_holds_back_no_refund_of_anyone_else(
    conn, rig, database_url, caplog
):
    """The policy's own read of the shop's tables fails (here: their checkouts held under an
    exclusive lock, so the read meets the worker's ``lock_timeout``): logged, and a merchant's
    ordinary refund, which reads none of those, is still sent on that tick."""
    buy = purchase(conn, Provider.RAZORPAY)
    deliver(conn, buy.captured())
    paid_at_gateway(rig.api, buy)
    refunds.request(conn, "razorpay", buy.payment_id, 10_000, key="ticket-9",
                    captured_paise=buy.amount_paise, reason="a person's",
                    requested_by="asha")  # fmt: skip
    with psycopg.connect(database_url, autocommit=True) as holder, holder.transaction():
        holder.execute("LOCK TABLE checkouts IN ACCESS EXCLUSIVE MODE")
        with caplog.at_level(logging.INFO, logger="payhooks.worker"):
            tally = application.send_refunds(rig.reconciler(), double_payments=True)
    (failed,) = [r for r in caplog.records if r.getMessage() == "double_payment_policy_failed"]
    assert failed.error.startswith("LockTimeout")
    assert tally.sent[Provider.RAZORPAY] == 1
    assert rig.api.money.refunded[(Provider.RAZORPAY, buy.payment_id)] == 10_000
    (intent,) = refunds.of_payment(conn, Provider.RAZORPAY, buy.payment_id)
    # made; its hand-over to the shop's handlers, which find its order among the checkouts,
    # waits for their lock to go, and closes the intent on the next tick
    assert intent.state is RefundState.SENT
    conn.execute("UPDATE payhooks_refunds SET next_attempt_at = now()")
    application.send_refunds(rig.reconciler(), double_payments=True)
    (intent,) = refunds.of_payment(conn, Provider.RAZORPAY, buy.payment_id)
    assert intent.state is RefundState.PROCESSED
    assert rig.api.money.made[(Provider.RAZORPAY, buy.payment_id)] == 1


def refused_at_once(rig, provider: Provider = Provider.RAZORPAY) -> None:
    """The gateway refuses the next refund call (a 400 with its words)."""
    rig.api.fail_next(provider, Fault(status=400))


def waited(conn) -> None:
    """The wait before a refused or failed auto-refund is asked again, passed."""
    conn.execute("UPDATE payhooks_refunds SET settled_at = settled_at - %s",
                 (double_refunds.RETRY_WAIT,))  # fmt: skip


def test_a_refused_auto_refund_is_asked_again_under_a_fresh_key(conn, rig):
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    reconciler = rig.reconciler()
    refused_at_once(rig)
    application.send_refunds(reconciler, double_payments=True)
    assert [r.state for r in refunds.of_payment(conn, "razorpay", second)] == [RefundState.REFUSED]
    application.send_refunds(reconciler, double_payments=True)  # not at once: after a wait
    assert len(refunds.of_payment(conn, "razorpay", second)) == 1
    waited(conn)
    application.send_refunds(reconciler, double_payments=True)
    first, again = refunds.of_payment(conn, "razorpay", second)
    assert (first.state, again.state) == (RefundState.REFUSED, RefundState.PROCESSED)
    assert first.idempotency_key != again.idempotency_key
    assert rig.api.money.refunded[(Provider.RAZORPAY, second)] == 49_900


def test_a_failed_auto_refund_is_asked_again(conn, rig):
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    reconciler = rig.reconciler()
    rig.api.money.pending = True
    application.send_refunds(reconciler, double_payments=True)
    rig.api.settle(Provider.RAZORPAY, failed=True)
    conn.execute("UPDATE payhooks_refunds SET next_attempt_at = now()")
    application.send_refunds(reconciler, double_payments=True)
    assert [r.state for r in refunds.of_payment(conn, "razorpay", second)] == [RefundState.FAILED]
    rig.api.money.pending = False
    waited(conn)
    application.send_refunds(reconciler, double_payments=True)
    states = [r.state for r in refunds.of_payment(conn, "razorpay", second)]
    assert states == [RefundState.FAILED, RefundState.PROCESSED]


def test_an_auto_refund_refused_every_time_is_left_to_a_person_and_said(conn, rig):
    """Asked at most ``TRIES`` times; then the payment keeps its flag and the shop's alert
    says the worker gave up on it."""
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    reconciler = rig.reconciler()
    for _ in range(double_refunds.TRIES + 2):
        refused_at_once(rig)
        application.send_refunds(reconciler, double_payments=True)
        waited(conn)
    found = refunds.of_payment(conn, "razorpay", second)
    assert [r.state for r in found] == [RefundState.REFUSED] * double_refunds.TRIES
    assert conn.execute(PAYMENT, ("razorpay", second)).fetchone()[1] is True  # still flagged
    (alert,) = alerting.refunds_needed(conn, datetime.now(UTC))
    assert "1 of them refused or failed" in alert.body


def test_the_consoles_refund_after_a_refused_one_is_a_new_refund(conn, rig):
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    reconciler = rig.reconciler()
    refused_at_once(rig)
    application.send_refunds(reconciler, double_payments=True)
    done = console_actions.request_refund(conn, "razorpay", second, operator="asha")
    assert done.done is console_actions.Done.REFUND_REQUESTED  # not "already asked for"
    again = console_actions.request_refund(conn, "razorpay", second, operator="ravi")
    assert again.done is console_actions.Done.REFUND_ALREADY_REQUESTED  # one is live now
    application.send_refunds(reconciler, double_payments=True)
    states = [r.state for r in refunds.of_payment(conn, "razorpay", second)]
    assert states == [RefundState.REFUSED, RefundState.PROCESSED]
    assert rig.api.money.made[(Provider.RAZORPAY, second)] == 1


def test_an_auto_refund_a_person_cancelled_is_never_asked_again_by_the_policy(conn, rig):
    """A person who cancels the policy's refund (refunding another way) has taken it over:
    the policy asking again would refund twice."""
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    with rig.reconciler().connect() as own:
        double_refunds.request_due(own)
    (made,) = refunds.of_payment(conn, "razorpay", second)
    refunds.cancel(conn, "razorpay", made.idempotency_key, reason="refunded by NEFT",
                   cancelled_by="asha")  # fmt: skip
    waited(conn)
    application.send_refunds(rig.reconciler(), double_payments=True)
    assert [r.state for r in refunds.of_payment(conn, "razorpay", second)] == [
        RefundState.CANCELLED
    ]
    assert rig.api.money.made[(Provider.RAZORPAY, second)] == 0


# --- lost disputes: what the card network already gave back is never asked for again -----------


def lost(conn, buy: Purchase, payment_id: str, paise: int) -> None:
    """A chargeback of ``paise`` of the payment, lost: Razorpay took that much back for the
    customer (``payment.dispute.lost``; the payment's record counts it)."""
    told = Disputed(what="lost", dispute_id="disp_" + secrets.token_hex(7), payment_id=payment_id,
                    reference=buy.reference, amount_paise=paise,
                    respond_by=GATEWAY.now + 86_400, reported_at=GATEWAY.now)  # fmt: skip
    delivery = razorpay_sim.dispute_delivery(GATEWAY, told)
    assert deliver(conn, delivery).outcome is Outcome.PROCESSED


def paid_twice_after_a_loss(conn, paise: int) -> tuple[Purchase, str]:
    """A cart paid twice whose second payment's loss was reported before its capture was
    applied: the payment's record is born counting it, and the capture flags it."""
    buy = purchase(conn, Provider.RAZORPAY)
    other = carts.checkout(conn, buy.cart_id, Provider.RAZORPAY)
    again = replace(buy, reference=other.gateway_order_id,
                    payment_id=new_payment_id(Provider.RAZORPAY))  # fmt: skip
    deliver(conn, buy.captured())
    lost(conn, again, again.payment_id, paise)
    deliver(conn, again.captured())
    assert conn.execute(PAYMENT, ("razorpay", again.payment_id)).fetchone()[1] is True
    return buy, again.payment_id


TAKEN_BACK = "taken_back_by_dispute"
"""The flag of a payment lost disputes left nothing to refund of."""
TAKEN_BACK_ALERT = "SELECT body FROM outbox WHERE dedupe_key = %s"


def test_a_double_payment_a_lost_dispute_took_part_of_is_refunded_the_rest(conn, rig):
    buy, second = paid_twice(conn, rig, Provider.RAZORPAY)
    lost(conn, buy, second, 10_000)
    application.send_refunds(rig.reconciler(), double_payments=True)
    (intent,) = refunds.of_payment(conn, Provider.RAZORPAY, second)
    assert (intent.state, intent.amount_paise) == (RefundState.PROCESSED, 39_900)
    assert rig.api.money.refunded[(Provider.RAZORPAY, second)] == 39_900
    status, needs_refund, _ = conn.execute(PAYMENT, ("razorpay", second)).fetchone()
    assert (status, needs_refund) == ("refunded", False)  # nothing is left to refund
    # Refunded, not taken back: the dispute took a part, payhooks refunded the rest. It was
    # flagged taken_back_by_dispute and an operator alerted "no refund is due; please check".
    (flags,) = conn.execute(
        "SELECT flags FROM payments WHERE provider = 'razorpay' AND payment_id = %s", (second,)
    ).fetchone()
    assert "taken_back_by_dispute" not in flags
    told = conn.execute("SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'alert:taken_back%%'")
    assert told.fetchone()[0] == 0


def test_the_consoles_refund_of_a_payment_a_lost_dispute_took_part_of_asks_for_the_rest(conn, rig):
    buy, second = paid_twice(conn, rig, Provider.RAZORPAY)
    lost(conn, buy, second, 10_000)
    done = console_actions.request_refund(conn, "razorpay", second, operator="asha")
    assert done.done is console_actions.Done.REFUND_REQUESTED
    (intent,) = refunds.of_payment(conn, "razorpay", second)
    assert (intent.amount_paise, intent.captured_paise) == (39_900, 39_900)


def record_purged(conn, payment_id: str) -> None:
    """The payment's core record gone, as the purge takes it a year on (``REFUNDABLE_DAYS``)."""
    conn.execute("DELETE FROM payhooks_payments WHERE payment_id = %s", (payment_id,))


def test_after_its_record_is_purged_the_policy_still_asks_for_only_the_rest(conn, rig, caplog):
    """The defect: the policy read what lost disputes took back from the payment's record,
    which the purge takes: it asked for the whole payment, the core refused it every tick
    (``double_payment_not_refunded``), and the payment was never refunded nor given up on."""
    buy, second = paid_twice(conn, rig, Provider.RAZORPAY)
    lost(conn, buy, second, 10_000)
    record_purged(conn, second)
    with caplog.at_level(logging.INFO, logger="payhooks.worker"):
        application.send_refunds(rig.reconciler(), double_payments=True)
    (intent,) = refunds.of_payment(conn, Provider.RAZORPAY, second)
    assert (intent.state, intent.amount_paise) == (RefundState.PROCESSED, 39_900)
    assert "double_payment_not_refunded" not in caplog.text


def test_after_its_record_is_purged_the_consoles_refund_asks_for_only_the_rest(conn, rig):
    buy, second = paid_twice(conn, rig, Provider.RAZORPAY)
    lost(conn, buy, second, 10_000)
    record_purged(conn, second)
    done = console_actions.request_refund(conn, "razorpay", second, operator="asha")
    assert done.done is console_actions.Done.REFUND_REQUESTED
    (intent,) = refunds.of_payment(conn, "razorpay", second)
    assert intent.amount_paise == 39_900


def test_after_its_record_is_purged_a_payment_lost_disputes_took_all_of_is_cleared(conn, rig):
    _, second = paid_twice_after_a_loss(conn, 49_900)
    conn.execute("UPDATE payments SET needs_refund = true WHERE payment_id = %s", (second,))
    record_purged(conn, second)
    done = console_actions.request_refund(conn, "razorpay", second, operator="asha")
    assert done.done == "refund_taken_back"
    assert refunds.of_payment(conn, "razorpay", second) == []


def test_a_double_payment_a_lost_dispute_took_all_of_needs_no_refund_and_says_why(
    conn, rig, caplog
):
    """The dispute's report clears the flag, whether or not the policy is on, and tells the
    operators once; the policy then asks for nothing."""
    buy, second = paid_twice(conn, rig, Provider.RAZORPAY)
    lost(conn, buy, second, 49_900)
    _, needs_refund, flags = conn.execute(PAYMENT, ("razorpay", second)).fetchone()
    assert (needs_refund, TAKEN_BACK in flags) == (False, True)
    key = f"alert:{TAKEN_BACK}:razorpay:{second}"
    (body,) = [row[0] for row in conn.execute(TAKEN_BACK_ALERT, (key,))]
    assert "lost disputes took back 49900 of the 49900 paise it paid" in body
    with caplog.at_level(logging.INFO, logger="payhooks.worker"):
        application.send_refunds(rig.reconciler(), double_payments=True)
    assert refunds.of_payment(conn, "razorpay", second) == []
    assert "double_payment_not_refunded" not in caplog.text
    assert alerting.refunds_needed(conn, datetime.now(UTC)) == []


def test_a_double_payment_born_with_a_loss_of_all_of_it_is_cleared_by_the_policy_once(
    conn, rig, caplog
):
    _, second = paid_twice_after_a_loss(conn, 49_900)
    reconciler = rig.reconciler()
    with caplog.at_level(logging.INFO, logger="payhooks.worker"):
        application.send_refunds(reconciler, double_payments=True)
        application.send_refunds(reconciler, double_payments=True)  # the next tick
    assert refunds.of_payment(conn, "razorpay", second) == []
    _, needs_refund, flags = conn.execute(PAYMENT, ("razorpay", second)).fetchone()
    assert (needs_refund, TAKEN_BACK in flags) == (False, True)
    said = [r for r in caplog.records if r.getMessage() == "double_payment_taken_back"]
    assert len(said) == 1 and "took back 49900 of the 49900 paise" in said[0].detail
    assert "double_payment_not_refunded" not in caplog.text
    assert alerting.refunds_needed(conn, datetime.now(UTC)) == []


def test_the_consoles_refund_of_a_payment_a_lost_dispute_took_all_of_says_so(conn, rig):
    """The policy off: the operator's Refund finds nothing to refund, says why, and clears
    the flag."""
    _, second = paid_twice_after_a_loss(conn, 49_900)
    done = console_actions.request_refund(conn, "razorpay", second, operator="asha")
    assert done.done == "refund_taken_back"
    assert refunds.of_payment(conn, "razorpay", second) == []
    _, needs_refund, flags = conn.execute(PAYMENT, ("razorpay", second)).fetchone()
    assert (needs_refund, TAKEN_BACK in flags) == (False, True)
    (result,) = [row[0] for row in conn.execute(
        "SELECT result FROM payhooks_console_actions WHERE target = %s", (second,))]  # fmt: skip
    assert result.startswith("refund_taken_back: ") and "took back 49900" in result


def test_the_consoles_refund_past_what_is_still_refundable_says_what_is(conn, rig, caplog):
    """Part of the double payment refunded under another key and closed by ``payhooks refunds
    send`` (which leaves the shop to the gateway's refund webhook, not come yet): the
    console's Refund asks for more than is still refundable, and the operator and the log
    are told what is."""
    _, second = paid_twice(conn, rig, Provider.RAZORPAY)
    refunds.request(conn, "razorpay", second, 10_000, key="ticket-7", captured_paise=49_900,
                    reason="a person's", requested_by="asha")  # fmt: skip
    reconciler = rig.reconciler()
    found = {Provider.RAZORPAY: reconciler.clients[Provider.RAZORPAY]}
    sending.send_due(reconciler.connect, found, settle=lambda refund: None)
    with caplog.at_level(logging.INFO, logger="payhooks.console"):
        done = console_actions.request_refund(conn, "razorpay", second, operator="ravi")
    assert done.done == "refund_too_large"
    (result,) = [row[0] for row in conn.execute(
        "SELECT result FROM payhooks_console_actions WHERE operator = 'ravi'")]  # fmt: skip
    assert result.startswith("refund_too_large: ") and "39900 paise still refundable" in result
    logged = [getattr(r, "result", "") for r in caplog.records]
    assert any("39900 paise still refundable" in line for line in logged)
