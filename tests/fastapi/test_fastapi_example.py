"""The example shop (examples/fastapi_shop) served by real uvicorn, driven as a customer and a
gateway drive it: a checkout over HTTP, then signed deliveries (copies, two events of one
payment, a failure, a forgery, a short or foreign-currency payment, a second payment). An
order is paid once, by one payment of exactly what it costs, or not at all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from examples.fastapi_shop.app import adapters_from, create_app, migrate
from payhooks.sim.gateway import Delivery
from tests.conftest import released_together
from tests.factories import GATEWAY, KEYS
from tests.fastapi.conftest import Served, served
from tests.shops import REFUSED_SETTINGS, refused_at_start

REF = "order_shop000001"
SECRETS = {
    "RAZORPAY_WEBHOOK_SECRETS": json.dumps([KEYS.razorpay, "whsec_retired"]),
    "CASHFREE_CLIENT_SECRETS": KEYS.cashfree,
    "PAYU_MERCHANT_KEY": KEYS.payu_key,
    "PAYU_SALTS": KEYS.payu_salt,
}


@pytest.fixture
def merchant_url(shop_url: str) -> str:
    """The merchant's database, as the shop's ``migrate`` below leaves it (run again there: it
    applies nothing twice)."""
    return shop_url


@pytest.fixture
def shop(merchant_url: str) -> Iterator[Served]:
    migrate(merchant_url)
    with served(create_app(merchant_url, adapters_from(SECRETS))) as running:
        yield running


@pytest.fixture
def conn(merchant_url: str, shop: Served) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(merchant_url, autocommit=True) as connection:
        yield connection


def checkout(
    shop: Served,
    ref: str = REF,
    amount_paise: int = 49_900,
    currency: str = "INR",
    gateway: str = "razorpay",
):
    body = {"merchant_ref": ref, "amount_paise": amount_paise, "currency": currency}
    with shop.client() as client:
        response = client.post("/orders", json={**body, "gateway": gateway})
    assert response.status_code == 201, response.text
    return response.json()


def razorpay(
    event: str = "payment.captured",
    payment_id: str = "pay_shop0000001",
    amount_paise: int = 49_900,
    currency: str = "INR",
    order_id: str = REF,
) -> Delivery:
    return GATEWAY.razorpay(
        event,
        payment_id=payment_id,
        order_id=order_id,
        amount_paise=amount_paise,
        currency=currency,
    )


def post(shop: Served, delivery: Delivery) -> tuple[int, str | None]:
    with shop.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    if response.headers.get("content-type") != "application/json":
        return response.status_code, None  # the app's own 500 page: plain text
    return response.status_code, response.json().get("status")


def post_with(client, delivery: Delivery) -> str:
    response = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    return response.json()["status"]


def orders(conn) -> list[tuple[object, ...]]:
    """Each order's reference, status and the payment that paid it."""
    return conn.execute(
        "SELECT merchant_ref, status, payment_id FROM orders ORDER BY merchant_ref"
    ).fetchall()


PAID = [(REF, "paid", "pay_shop0000001")]
PENDING = [(REF, "pending", None)]


def claimed(conn) -> int:
    return conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0]


def test_fifty_concurrent_copies_of_one_delivery_pay_the_order_once(shop, conn):
    checkout(shop)
    delivery = razorpay()
    answers = released_together(
        list(range(50)),
        lambda _: shop.client(),
        lambda client, _: client.post(
            delivery.path, content=delivery.body, headers=delivery.headers
        ).json()["status"],
    )
    assert sorted(answers) == ["duplicate"] * 49 + ["processed"]
    assert orders(conn) == PAID


def test_payment_captured_and_order_paid_pay_the_order_once(shop, conn):
    checkout(shop)
    assert post(shop, razorpay("payment.captured")) == (200, "processed")
    paid_at = conn.execute("SELECT paid_at FROM orders").fetchone()[0]
    assert post(shop, razorpay("order.paid")) == (200, "processed")  # the same payment again
    assert orders(conn) == PAID
    assert conn.execute("SELECT paid_at FROM orders").fetchone()[0] == paid_at


def test_an_overpaid_capture_is_parked_and_leaves_the_order_unpaid(shop, conn):
    checkout(shop)
    assert post(shop, razorpay(amount_paise=49_901)) == (200, "parked")
    assert orders(conn) == PENDING


def test_a_capture_in_another_currency_is_parked_and_leaves_the_order_unpaid(shop, conn):
    checkout(shop)
    assert post(shop, razorpay(currency="USD")) == (200, "parked")
    assert orders(conn) == PENDING


def test_the_handler_ignores_a_short_capture_for_an_order_payhooks_was_not_told_of(shop, conn):
    """An order written before the checkout called expect(): the handler's own check."""
    placed = "INSERT INTO orders (merchant_ref, amount_paise, currency) VALUES (%s, 49900, 'INR')"
    conn.execute(placed, (REF,))
    assert post(shop, razorpay(amount_paise=100)) == (200, "ignored")
    assert orders(conn) == PENDING


def test_a_capture_of_the_right_amount_after_a_short_one_pays_the_order(shop, conn):
    checkout(shop)
    post(shop, razorpay(payment_id="pay_short000001", amount_paise=100))
    assert post(shop, razorpay()) == (200, "processed")
    assert orders(conn) == PAID


def test_a_capture_for_an_order_never_checked_out_is_parked(shop, conn):
    assert post(shop, razorpay()) == (200, "parked")
    outcome = conn.execute("SELECT outcome FROM processed_webhooks").fetchone()[0]
    assert (outcome, orders(conn)) == ("parked", [])


def test_a_second_payment_for_a_paid_order_does_not_replace_the_first(shop, conn):
    checkout(shop)
    post(shop, razorpay())
    assert post(shop, razorpay(payment_id="pay_shop0000002")) == (200, "ignored")
    assert orders(conn) == PAID


def test_ten_payments_at_once_for_one_order_pay_it_once(shop, conn):
    checkout(shop)
    payments = {f"pay_shop{n:07}": razorpay(payment_id=f"pay_shop{n:07}") for n in range(10)}
    answers = dict(
        released_together(
            list(payments),
            lambda _: shop.client(),
            lambda client, payment_id: (payment_id, post_with(client, payments[payment_id])),
        )
    )
    paid_by = [payment_id for payment_id, said in answers.items() if said == "processed"]
    assert len(paid_by) == 1 and list(answers.values()).count("ignored") == 9
    assert orders(conn) == [(REF, "paid", paid_by[0])]


def test_a_handler_that_raises_is_5xx_and_nothing_is_recorded(shop, conn):
    checkout(shop)
    conn.execute("ALTER TABLE orders ADD CONSTRAINT closed CHECK (false) NOT VALID")
    status, _ = post(shop, razorpay())
    assert status >= 500
    assert orders(conn) == PENDING and claimed(conn) == 0


def test_the_retry_after_a_handler_raised_pays_the_order(shop, conn):
    checkout(shop)
    conn.execute("ALTER TABLE orders ADD CONSTRAINT closed CHECK (false) NOT VALID")
    delivery = razorpay()
    post(shop, delivery)
    conn.execute("ALTER TABLE orders DROP CONSTRAINT closed")
    assert post(shop, delivery) == (200, "processed")
    assert orders(conn) == PAID


def test_a_forged_signature_is_401_and_writes_nothing(shop, conn):
    checkout(shop)
    delivery = razorpay()
    forged = {**delivery.headers, "x-razorpay-signature": "f" * 64}
    with shop.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=forged)
    assert response.status_code == 401
    assert orders(conn) == PENDING and claimed(conn) == 0


def test_a_delivery_signed_with_a_retired_secret_still_in_the_list_is_accepted(shop, conn):
    checkout(shop)
    old = GATEWAY.__class__(KEYS.__class__(razorpay="whsec_retired"))
    delivery = old.razorpay(
        "payment.captured", payment_id="pay_shop0000001", order_id=REF, amount_paise=49_900
    )
    assert post(shop, delivery) == (200, "processed")
    assert orders(conn) == PAID


def test_cashfree_and_payu_are_served_too(shop, conn):
    checkout(shop, "order_cf_shop", 100, gateway="cashfree")
    checkout(shop, "order_payu_shop", 100, gateway="payu")
    cashfree = GATEWAY.cashfree(
        "PAYMENT_SUCCESS_WEBHOOK", order_id="order_cf_shop", cf_payment_id="5114910", order_amount=1
    )
    payu = GATEWAY.payu(txnid="order_payu_shop", mihpayid="403993715", amount="1.00")
    assert [post(shop, cashfree), post(shop, payu)] == [(200, "processed")] * 2
    assert orders(conn) == [
        ("order_cf_shop", "paid", "5114910"),
        ("order_payu_shop", "paid", "order_payu_shop"),  # PayU's payment id is the txnid
    ]


def test_the_shop_shows_a_pending_order_then_the_payment_that_paid_it(shop, conn):
    placed = checkout(shop)
    assert {key: placed[key] for key in ("status", "payment_id", "paid_at")} == {
        "status": "pending",
        "payment_id": None,
        "paid_at": None,
    }
    post(shop, razorpay())
    with shop.client() as client:
        order = client.get(f"/orders/{REF}").json()
    assert order.pop("created_at") == placed["created_at"] and order.pop("paid_at")
    assert order == {
        "merchant_ref": REF,
        "amount_paise": 49_900,
        "currency": "INR",
        "status": "paid",
        "provider": "razorpay",
        "payment_id": "pay_shop0000001",
    }


def test_an_order_not_checked_out_is_404(shop):
    with shop.client() as client:
        assert client.get("/orders/order_nosuch").status_code == 404


def test_a_second_checkout_under_one_reference_is_409_and_keeps_the_first(shop, conn):
    checkout(shop)
    with shop.client() as client:
        again = {"merchant_ref": REF, "amount_paise": 100, "currency": "INR"}
        assert client.post("/orders", json=again).status_code == 409
    assert conn.execute("SELECT amount_paise FROM orders").fetchall() == [(49_900,)]


@pytest.mark.parametrize(
    "change",
    [
        {"amount_paise": 0},
        {"amount_paise": -100},
        {"amount_paise": 499.0},
        {"amount_paise": "49900"},
        {"amount_paise": True},
        {"amount_paise": 2**63},
        {"currency": "inr"},
        {"currency": "RUPEE"},
        {"currency": None},
        {"gateway": "stripe"},
        {"merchant_ref": ""},
        {"merchant_ref": "x" * 65},
        {"merchant_ref": "order/1"},
        {"merchant_ref": 12345},
        {"extra": "field"},
    ],
)
def test_checkout_refuses_bad_input_with_422(shop, conn, change):
    body = {"merchant_ref": REF, "amount_paise": 49_900, "currency": "INR", **change}
    with shop.client() as client:
        response = client.post("/orders", json=body)
    assert response.status_code == 422
    assert orders(conn) == []


def test_checkout_refuses_a_body_that_is_not_json_with_422(shop, conn):
    with shop.client() as client:
        response = client.post(
            "/orders", content=b"merchant_ref=x", headers={"content-type": "application/json"}
        )
    assert response.status_code == 422 and orders(conn) == []


@pytest.mark.parametrize(("variable", "value"), REFUSED_SETTINGS)
def test_a_webhook_setting_payhooks_refuses_stops_the_shop_at_start_naming_it(variable, value):
    refused_at_start("fastapi_shop", variable, value)
