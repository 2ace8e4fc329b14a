"""What a refund needs (the gateway order, the payment's ids, what was paid) is kept in the
core's payment record (``payhooks_payments``), which the purge keeps while a refund is
possible: a payment refunded after its deliveries were purged is refunded as on its first
day. Real PostgreSQL, the gateway doubles over a loopback socket."""

from __future__ import annotations

import pytest

from payhooks.events import Provider
from payhooks.intake import payments
from payhooks.intake.ingest import receive
from payhooks.plumbing.errors import InvalidRequest
from payhooks.refunding import refunds
from payhooks.refunding.refunds import RefundState
from payhooks.service import application, retention
from payhooks.service.shop import captures, orders
from tests.factories import ADAPTERS, deliver, purchase
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import sim

rig = reconciling.rig  # its fixture
gateway_api = reconciling.gateway_api

AGED = (
    "UPDATE processed_webhooks SET processed_at = now() - interval '100 days'",
    "UPDATE payhooks_payments SET applied_at = now() - interval '100 days'",
    "UPDATE payhooks_deliveries SET received_at = now() - interval '100 days'",
)


def aged_and_purged(conn) -> None:
    for sql in AGED:
        conn.execute(sql)
    retention.purge(conn, 90)
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone() == (0,)


def applied(conn, rig, buy, applied_by: str) -> None:
    """The payment applied by its webhook (the general path, or the reference shop's
    one-statement first capture) or by reconciliation."""
    if applied_by == "webhook":
        deliver(conn, buy.captured())
    elif applied_by == "first capture":
        delivery = buy.captured()
        received = receive(ADAPTERS[delivery.provider], delivery.body, delivery.headers)
        assert captures.first_capture(conn, received) is not None
    else:
        rig.run()


@pytest.mark.parametrize("applied_by", ["webhook", "first capture", "reconciliation"])
@pytest.mark.parametrize("provider", [Provider.RAZORPAY, Provider.CASHFREE, Provider.PAYU])
def test_a_payment_is_refunded_after_its_deliveries_are_purged(conn, rig, provider, applied_by):
    buy = purchase(conn, provider)
    rig.api.pay(sim(buy), buy.payment_id)
    applied(conn, rig, buy, applied_by)
    (order_id,) = [r[0] for r in conn.execute("SELECT id FROM orders WHERE cart_id = %s",
                                              (buy.cart_id,))]  # fmt: skip
    aged_and_purged(conn)
    asked = orders.refund(conn, order_id, 20_000, key="returned-1", reason="returned")
    assert asked.gateway_order_id == buy.reference
    application.send_refunds(rig.reconciler(), double_payments=False)
    (intent,) = refunds.of_payment(conn, provider, asked.payment_id)
    assert intent.state in (RefundState.SENT, RefundState.PROCESSED)  # PayU's: queued
    assert (intent.gateway_refund_id is not None, intent.last_error) == (True, None)
    books = rig.api.money
    # the double refunded the very payment (PayU: its mihpayid, not the txnid) of that amount
    assert books.refunded[(provider, buy.payment_id)] == 20_000
    assert books.made[(provider, buy.payment_id)] == 1
    if provider is Provider.CASHFREE:  # under its order
        assert (provider, f"{buy.reference}:{intent.idempotency_key}") in books.by_key


NAMED = {
    "nothing more": lambda buy: {},
    "its txnid as the order": lambda buy: {"gateway_order_id": buy.reference},
    "its mihpayid": lambda buy: {"attempt_id": buy.payment_id},
    "both": lambda buy: {"gateway_order_id": buy.reference, "attempt_id": buy.payment_id},
}


@pytest.mark.parametrize("named", list(NAMED))
@pytest.mark.parametrize("applied_by", ["webhook", "reconciliation"])
def test_a_payu_refund_asked_by_the_txnid_its_event_carries_refunds_its_mihpayid(
    conn, rig, applied_by, named
):
    """The obvious call: ``refunds.request(conn, "payu", event.payment_id, ...)``, the id
    payhooks' PayU event carries being the txnid. The payment's record names its order and
    (from a post) its ``mihpayid``; PayU is refunded that payment, by its ``mihpayid``, with
    or without the caller naming them. Reconciliation's record names the ``mihpayid`` of the
    payment ``verify_payment`` reported when it applied it."""
    buy = purchase(conn, Provider.PAYU)
    rig.api.pay(sim(buy), buy.payment_id)
    delivery = buy.captured()
    event = receive(ADAPTERS[Provider.PAYU], delivery.body, delivery.headers).event
    assert (event.payment_id, event.attempt_id) == (buy.reference, buy.payment_id)
    applied(conn, rig, buy, applied_by)
    asked = refunds.request(conn, "payu", event.payment_id, 20_000, key="returned-1",
                            captured_paise=buy.amount_paise, reason="returned",
                            requested_by="asha", **NAMED[named](buy))  # fmt: skip
    assert asked.state is RefundState.REQUESTED
    tally = application.send_refunds(rig.reconciler(), double_payments=False)
    assert (tally.sent[Provider.PAYU], tally.refused[Provider.PAYU]) == (1, 0), tally.summary()
    (intent,) = refunds.of_payment(conn, Provider.PAYU, buy.reference)
    assert (intent.state, intent.last_error) == (RefundState.SENT, None)  # PayU's: queued
    books = rig.api.money
    assert (books.made[(Provider.PAYU, buy.payment_id)],
            books.refunded[(Provider.PAYU, buy.payment_id)]) == (1, 20_000)  # fmt: skip


def test_a_payu_refund_whose_mihpayid_payhooks_cannot_know_is_refused_when_asked(conn, rig):
    """A txnid payhooks keeps no record of, asked with neither its order nor its
    ``mihpayid``: never an intent accepted and then refused by the sender. The request is
    refused saying what to pass; asked so, it is sent (the txnid named as the order: PayU's
    ``verify_payment`` names its ``mihpayid``). A txnid is never sent as a ``mihpayid``."""
    buy = purchase(conn, Provider.PAYU)
    deliver(conn, buy.captured())
    rig.api.pay(sim(buy), buy.payment_id)
    conn.execute("DELETE FROM payhooks_payments")  # a payment payhooks keeps no record of
    asking = {"key": "k", "captured_paise": 49_900, "reason": "returned", "requested_by": "asha"}
    with pytest.raises(InvalidRequest) as refused:
        refunds.request(conn, "payu", buy.reference, 20_000, **asking)
    said = str(refused.value)
    assert all(word in said for word in ("mihpayid", "gateway_order_id", "attempt_id")), said
    assert refunds.of_payment(conn, Provider.PAYU, buy.reference) == []
    refunds.request(conn, "payu", buy.reference, 20_000, gateway_order_id=buy.reference,
                    **asking)  # fmt: skip
    application.send_refunds(rig.reconciler(), double_payments=False)
    (intent,) = refunds.of_payment(conn, Provider.PAYU, buy.reference)
    assert intent.state is RefundState.SENT
    assert rig.api.money.refunded[(Provider.PAYU, buy.payment_id)] == 20_000
    assert rig.api.money.refunded[(Provider.PAYU, buy.reference)] == 0


@pytest.mark.parametrize("applied_by", ["webhook", "reconciliation"])
@pytest.mark.parametrize("provider", list(Provider))
def test_every_gateways_payment_record_keeps_its_order_its_ids_and_what_was_paid(
    conn, rig, provider, applied_by
):
    buy = purchase(conn, provider)
    rig.api.pay(sim(buy), buy.payment_id)
    if applied_by == "webhook" and provider not in (Provider.PHONEPE, Provider.JUSPAY):
        deliver(conn, buy.captured())
    else:  # PhonePe's and Juspay's callbacks take effect as their APIs confirm them
        rig.run()
    keyed = buy.reference if provider is Provider.PAYU else buy.payment_id
    found = payments.find(conn, provider, keyed)
    assert found is not None and found.captured
    assert (found.gateway_order_id, found.paid_paise, found.currency) == (
        buy.reference, buy.amount_paise, "INR",
    )  # fmt: skip
    if provider is Provider.PAYU:  # the txnid keys it; PayU refunds its mihpayid, which the
        assert found.attempt_id == buy.payment_id  # post or verify_payment's entry named


@pytest.mark.parametrize("applied_by", ["webhook", "reconciliation"])
def test_a_payu_refund_by_the_txnid_goes_to_the_payment_applied_when_payu_names_another_later(
    conn, rig, applied_by
):
    """Two successful payments of one txnid (payhooks applies the second under its own
    ``mihpayid``). The first was applied, by its post or by reconciliation (whose
    ``verify_payment`` named it then); days later ``verify_payment`` names the second. A refund
    asked by the txnid is the first payment's: it goes to the ``mihpayid`` its record names,
    never to the one ``verify_payment`` names at send time."""
    buy = purchase(conn, Provider.PAYU)
    rig.api.pay(sim(buy), buy.payment_id)
    applied(conn, rig, buy, applied_by)
    second = "403993715529188888"
    assert second != buy.payment_id
    rig.api.pay(sim(buy), second)
    rig.api.pay(sim(buy), buy.payment_id)  # PayU's verify_payment now names the second
    asked = refunds.request(conn, "payu", buy.reference, 20_000, key="returned-1",
                            captured_paise=buy.amount_paise, reason="returned",
                            requested_by="asha")  # fmt: skip
    tally = application.send_refunds(rig.reconciler(), double_payments=False)
    assert tally.sent[Provider.PAYU] == 1, tally.summary()
    books = rig.api.money
    assert books.refunded[(Provider.PAYU, second)] == 0
    assert books.refunded[(Provider.PAYU, buy.payment_id)] == 20_000
    assert asked.attempt_id == buy.payment_id  # from the payment's record


@pytest.mark.parametrize("paid_by", ["edited post alone", "PayU's own post after it"])
def test_a_payu_refund_never_goes_to_a_mihpayid_edited_into_the_first_post(conn, rig, paid_by):
    """``mihpayid`` is outside PayU's hash: a customer's browser can post their signed success
    first under another customer's ``mihpayid``. The record keeps what the post named, but the
    refund of their order goes to their own payment (the one PayU reports for the txnid),
    never to the other customer's."""
    other = purchase(conn, Provider.PAYU)
    rig.api.pay(sim(other), other.payment_id)
    buy = purchase(conn, Provider.PAYU)
    rig.api.pay(sim(buy), buy.payment_id)
    deliver(conn, buy.captured(payment_id=other.payment_id))  # the edited post, first
    if paid_by != "edited post alone":
        deliver(conn, buy.captured())
        rig.reconciler().confirm_due()
    (order_id,) = [r[0] for r in conn.execute("SELECT id FROM orders WHERE cart_id = %s",
                                              (buy.cart_id,))]  # fmt: skip
    orders.refund(conn, order_id, 20_000, key="returned-1", reason="returned")
    application.send_refunds(rig.reconciler(), double_payments=False)
    books = rig.api.money
    assert books.refunded[(Provider.PAYU, other.payment_id)] == 0
    assert books.refunded[(Provider.PAYU, buy.payment_id)] == 20_000
