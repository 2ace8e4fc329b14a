"""Cashfree reports what the order asked (``order_amount``) and what the customer paid
(``payment_amount``). They differ legitimately under an offer Cashfree reports redeemed
(lower) and with a service fee the customer paid (higher); a shortfall nothing explains is
parked as an amount mismatch for an operator (``payhooks_amount_mismatches``), never an order
(docs/providers.md)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from payhooks.events import Provider
from payhooks.gateways import cashfree
from payhooks.gateways.cashfree import status
from payhooks.plumbing.errors import MalformedPayload
from payhooks.sim.gateway import Delivery
from tests.factories import ADAPTERS, KEYS, deliver, purchase

FLAGS = "SELECT flags, needs_refund FROM payments WHERE provider = 'cashfree' AND payment_id = %s"
ORDERS = "SELECT count(*) FROM orders WHERE cart_id = %s"
HELD = "SELECT expected_paise, paid_paise FROM payhooks_amount_mismatches WHERE payment_id = %s"


def held(conn, payment_id: str) -> bool:
    """Parked as a mismatch, with the amount Cashfree's figures come to, never the shop's."""
    row = conn.execute(HELD, (payment_id,)).fetchone()
    paid = conn.execute(FLAGS, (payment_id,)).fetchone()
    return row is not None and row[0] != row[1] and paid is None


def _offer(status: str = "SUCCESS") -> dict[str, object]:
    return {
        "offer_id": "0f05e1d0-fbf8-4c9c-a1f0-814c7b2abdba",
        "offer_type": "DISCOUNT",
        "offer_meta": {"offer_title": "50% off on UPI", "offer_code": "UPI50"},
        "offer_redemption": {
            "redemption_status": status, "discount_amount": "@D@", "cashback_amount": 0,
        },
    }  # fmt: skip


def success(buy, *, paid_paise: int | None, offers: list[dict[str, object]] | None = None,
            discount: str = "0", surcharge: object = None) -> Delivery:  # fmt: skip
    """A signed PAYMENT_SUCCESS_WEBHOOK (2025-01-01) with the amounts written as Cashfree
    writes them (``170.00``); ``paid_paise`` None leaves ``payment_amount`` out."""
    payment = {
        "cf_payment_id": buy.payment_id, "payment_status": "SUCCESS",
        "payment_amount": "@P@", "payment_currency": "INR", "payment_surcharge": surcharge,
    }  # fmt: skip
    if paid_paise is None:
        del payment["payment_amount"]
    data: dict[str, object] = {
        "order": {"order_id": buy.reference, "order_amount": "@O@", "order_currency": "INR"},
        "payment": payment,
    }
    if offers is not None:
        data["payment_offers"] = offers
    text = json.dumps({"data": data, "type": "PAYMENT_SUCCESS_WEBHOOK"})
    text = text.replace('"@O@"', f"{Decimal(buy.amount_paise) / 100:.2f}")
    text = text.replace('"@P@"', f"{Decimal(paid_paise or 0) / 100:.2f}").replace('"@D@"', discount)
    body = text.encode()
    headers = {
        "x-webhook-timestamp": "1746427759733",
        "x-webhook-signature": cashfree.sign(body, "1746427759733", KEYS.cashfree),
        "x-webhook-version": "2025-01-01",
    }
    return Delivery(provider=Provider.CASHFREE, body=body, headers=headers, label="cf")


def test_a_success_webhook_paying_less_than_the_order_with_no_offer_is_flagged(conn):
    buy = purchase(conn, Provider.CASHFREE)
    deliver(conn, success(buy, paid_paise=buy.amount_paise - 1))
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (0,)
    assert held(conn, buy.payment_id)


def test_a_shortfall_an_offer_redeemed_explains_places_the_order(conn):
    buy = purchase(conn, Provider.CASHFREE)
    delivery = success(buy, paid_paise=buy.amount_paise - 1000, offers=[_offer()], discount="10")
    deliver(conn, delivery)
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (1,)
    assert conn.execute(FLAGS, (buy.payment_id,)).fetchone() == ([], False)


@pytest.mark.parametrize(
    ("offers", "discount"),
    [([], "0"), (None, "0"), ([_offer()], "5"), ([_offer("FAILED")], "10"),
     ([_offer()], '"10"'), ([_offer()], "null")],
)  # fmt: skip
def test_a_shortfall_the_offers_do_not_explain_is_flagged(conn, offers, discount):
    buy = purchase(conn, Provider.CASHFREE)
    deliver(conn, success(buy, paid_paise=buy.amount_paise - 1000, offers=offers,
                          discount=discount))  # fmt: skip
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (0,)
    assert held(conn, buy.payment_id)


def test_a_payment_above_the_order_amount_a_service_fee_places_the_order(conn):
    buy = purchase(conn, Provider.CASHFREE)
    deliver(conn, success(buy, paid_paise=buy.amount_paise + 236))
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (1,)


PAYMENTS = "SELECT count(*) FROM payhooks_payments WHERE provider = 'cashfree' AND payment_id = %s"


def test_a_success_webhook_saying_nothing_of_what_was_paid_is_refused_and_applies_nothing(conn):
    """A capture with no ``payment_amount`` was counted paid in full: the order's amount
    compared, and recorded as what the customer paid, the bound on its refunds. It is
    malformed now (400, naming the field), as one with no ``order_amount`` is: nothing is
    recorded of the payment or under the delivery's key, so the delivery that says what was
    paid (Cashfree's next, reconciliation's report) is applied, once."""
    buy = purchase(conn, Provider.CASHFREE)
    with pytest.raises(MalformedPayload, match="payment_amount is missing"):
        deliver(conn, success(buy, paid_paise=None))
    assert conn.execute(PAYMENTS, (buy.payment_id,)).fetchone() == (0,)
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (0,)
    deliver(conn, success(buy, paid_paise=buy.amount_paise))
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (1,)


def test_a_reported_capture_saying_nothing_of_what_was_paid_is_unreadable():
    """Reconciliation reads the status API's payment entity with the same rule: a SUCCESS
    with no ``payment_amount`` is that payment's trouble (unreadable), never a capture of the
    order's amount. A failed payment names no money paid, and reads without it."""
    entity = {"cf_payment_id": "1453002795", "order_id": "ph_x", "payment_status": "SUCCESS",
              "order_amount": 200.00, "payment_currency": "INR"}  # fmt: skip
    report = status.payments("ph_x", json.dumps([entity]).encode())
    assert report.received == ()
    assert report.unreadable == ("payment 1453002795 unreadable: payment_amount is missing",)
    failed = status.payments("ph_x", json.dumps([entity | {"payment_status": "FAILED"}]).encode())
    assert [r.event.kind.value for r in failed.received] == ["payment_failed"]


def test_the_shortfall_is_what_the_event_compares_on_every_path():
    """The amount compared is computed by the adapter, so the general path and the
    one-statement first capture (which compares ``amount_paise`` with the cart) agree."""
    from tests.factories import Purchase

    buy = Purchase(provider=Provider.CASHFREE, cart_id="c", reference="ph_x", amount_paise=
                   20_000, sku="s", payment_id="123")  # fmt: skip
    delivery = success(buy, paid_paise=15_000)
    event = ADAPTERS[Provider.CASHFREE].parse(delivery.body, delivery.headers)
    assert (event.amount_paise, event.payment_amount_paise) == (15_000, 15_000)


FEE = {"payment_surcharge_service_charge": 0.36, "payment_surcharge_service_tax": 0.06}


def test_a_payment_of_the_order_amount_that_includes_a_service_fee_is_flagged(conn):
    """Cashfree took its 42 paise fee out of what the customer paid: the order got less."""
    buy = purchase(conn, Provider.CASHFREE)
    deliver(conn, success(buy, paid_paise=buy.amount_paise, surcharge=FEE))
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (0,)
    assert held(conn, buy.payment_id)


def test_a_payment_of_the_order_amount_plus_its_reported_fee_places_the_order(conn):
    buy = purchase(conn, Provider.CASHFREE)
    deliver(conn, success(buy, paid_paise=buy.amount_paise + 42, surcharge=FEE))
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (1,)
    assert conn.execute(FLAGS, (buy.payment_id,)).fetchone() == ([], False)


@pytest.mark.parametrize(
    "surcharge",
    [None, {}, {"payment_surcharge_service_charge": 0, "payment_surcharge_service_tax": 0},
     {"payment_surcharge_service_charge": "0.36"}, "0.42"],
)  # fmt: skip
def test_no_readable_fee_takes_nothing_off_a_full_payment(conn, surcharge):
    buy = purchase(conn, Provider.CASHFREE)
    deliver(conn, success(buy, paid_paise=buy.amount_paise, surcharge=surcharge))
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (1,)


def test_reconciliation_reads_the_fee_off_the_payment_entity_too():
    entity = {
        "cf_payment_id": "1453002795", "order_id": "ph_x", "payment_status": "SUCCESS",
        "order_amount": 200.00, "payment_amount": 200.00, "payment_currency": "INR",
        "payment_surcharge": FEE,
    }  # fmt: skip
    report = status.payments("ph_x", json.dumps([entity]).encode())
    event = report.received[0].event
    assert (event.amount_paise, event.payment_amount_paise) == (20_000 - 42, 20_000)
