"""A refund is bounded by what the customer paid for that payment, never by the amount
payhooks compares with the cart. Cashfree's two differ: under an offer Cashfree reports
redeemed the customer paid less than the order amount, with a service fee more
(docs/providers.md). Real PostgreSQL, the Cashfree double over a loopback socket."""

from __future__ import annotations

from dataclasses import replace

import pytest

from payhooks.events import Provider
from payhooks.plumbing.errors import InvalidRequest
from payhooks.refunding import refunds
from payhooks.refunding.refunds import RefundState, RefundTooLarge
from payhooks.service import application
from payhooks.service.console import actions
from payhooks.service.shop import carts, orders
from payhooks.sim.gateway import new_payment_id
from tests.factories import deliver, purchase
from tests.gateways.cashfree.test_amounts import _offer, success
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import sim

rig = reconciling.rig  # its fixture
gateway_api = reconciling.gateway_api

OFFER = 1_000  # paise an offer took off
FEE = 1_180  # paise of service charge and its tax the customer paid on top


def _fee() -> dict[str, object]:
    return {"payment_surcharge_service_charge": 10.0, "payment_surcharge_service_tax": 1.8}


def paid_under(conn, rig, how: str):
    """A Cashfree payment of a cart, paid under an offer or with a fee: the delivery, and
    what the customer paid."""
    buy = purchase(conn, Provider.CASHFREE)
    if how == "offer":
        paid = buy.amount_paise - OFFER
        delivery = success(buy, paid_paise=paid, offers=[_offer()], discount="10")
    else:
        paid = buy.amount_paise + FEE
        delivery = success(buy, paid_paise=paid, surcharge=_fee())
    return buy, delivery, paid


def paid_twice(conn, rig, how: str):
    """A cart paid from two tabs, the second payment under an offer or with a fee: it, and
    what the customer paid for it."""
    first = purchase(conn, Provider.CASHFREE)
    other = carts.checkout(conn, first.cart_id, Provider.CASHFREE)  # a second tab
    again = replace(first, reference=other.gateway_order_id,
                    payment_id=new_payment_id(Provider.CASHFREE))  # fmt: skip
    deliver(conn, first.captured())  # the double knows the second payment alone
    paid = again.amount_paise - OFFER if how == "offer" else again.amount_paise + FEE
    if how == "offer":
        delivery = success(again, paid_paise=paid, offers=[_offer()], discount="10")
    else:
        delivery = success(again, paid_paise=paid, surcharge=_fee())
    deliver(conn, delivery)
    rig.api.pay(sim(again), again.payment_id, payment_amount_paise=paid)
    return again, paid


@pytest.mark.parametrize("how", ["offer", "fee"])
def test_a_double_payment_is_refunded_what_the_customer_paid_for_it(conn, rig, how):
    again, paid = paid_twice(conn, rig, how)
    application.send_refunds(rig.reconciler(), double_payments=True)
    (intent,) = refunds.of_payment(conn, Provider.CASHFREE, again.payment_id)
    assert (intent.state, intent.amount_paise, intent.captured_paise) == (
        RefundState.PROCESSED, paid, paid,
    )  # fmt: skip
    assert rig.api.money.refunded[(Provider.CASHFREE, again.payment_id)] == paid


@pytest.mark.parametrize("how", ["offer", "fee"])
def test_the_shop_apis_refund_is_capped_at_what_the_customer_paid(conn, rig, how):
    buy, delivery, paid = paid_under(conn, rig, how)
    deliver(conn, delivery)
    (order_id,) = [r[0] for r in conn.execute("SELECT id FROM orders WHERE cart_id = %s",
                                              (buy.cart_id,))]  # fmt: skip
    with pytest.raises(RefundTooLarge):
        orders.refund(conn, order_id, paid + 1, key="too-much", reason="returned")
    made = orders.refund(conn, order_id, paid, key="all", reason="returned")
    assert (made.amount_paise, made.captured_paise, made.gateway_order_id) == (
        paid, paid, buy.reference,
    )  # fmt: skip


@pytest.mark.parametrize("how", ["offer", "fee"])
def test_the_consoles_refund_button_asks_for_what_the_customer_paid(conn, rig, how):
    again, paid = paid_twice(conn, rig, how)
    done = actions.request_refund(conn, "cashfree", again.payment_id, operator="asha")
    assert done.done is actions.Done.REFUND_REQUESTED
    (intent,) = refunds.of_payment(conn, Provider.CASHFREE, again.payment_id)
    assert (intent.amount_paise, intent.captured_paise, intent.gateway_order_id) == (
        paid, paid, again.reference,
    )  # fmt: skip


def test_a_refund_in_another_currency_than_the_payments_is_refused(conn):
    """The defect: no gateway's refund call names a currency, so a "USD" refund of an INR
    payment refunded rupees, and took from the same bound as the rupee refunds."""
    buy = purchase(conn, Provider.RAZORPAY)
    deliver(conn, buy.captured())
    with pytest.raises(InvalidRequest, match="paid in INR, not USD"):
        refunds.request(conn, Provider.RAZORPAY, buy.payment_id, 10_000, key="in dollars",
                        captured_paise=buy.amount_paise, reason="wrong currency",
                        requested_by="asha", currency="USD")  # fmt: skip
    assert refunds.of_payment(conn, Provider.RAZORPAY, buy.payment_id) == []
    refunds.request(conn, Provider.RAZORPAY, buy.payment_id, buy.amount_paise, key="in rupees",
                    captured_paise=buy.amount_paise, reason="the whole payment",
                    requested_by="asha")  # fmt: skip
