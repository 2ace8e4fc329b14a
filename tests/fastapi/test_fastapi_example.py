"""The example shop (examples/fastapi_shop) served by real uvicorn, driven as a gateway
drives it: signed deliveries over HTTP, copies, two events of one payment, a failure, a
forgery. The shop's own ``orders`` table must end with one row per paid reference."""

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

REF = "order_shop000001"
SECRETS = {
    "RAZORPAY_WEBHOOK_SECRETS": json.dumps([KEYS.razorpay, "whsec_retired"]),
    "CASHFREE_CLIENT_SECRETS": KEYS.cashfree,
    "PAYU_MERCHANT_KEY": KEYS.payu_key,
    "PAYU_SALTS": KEYS.payu_salt,
}


@pytest.fixture
def shop(merchant_url: str) -> Iterator[Served]:
    migrate(merchant_url)
    with served(create_app(merchant_url, adapters_from(SECRETS))) as running:
        yield running


@pytest.fixture
def conn(merchant_url: str, shop: Served) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(merchant_url, autocommit=True) as connection:
        yield connection


def razorpay(event: str = "payment.captured", payment_id: str = "pay_shop0000001") -> Delivery:
    return GATEWAY.razorpay(event, payment_id=payment_id, order_id=REF, amount_paise=49_900)


def post(shop: Served, delivery: Delivery) -> tuple[int, str | None]:
    with shop.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    if response.headers.get("content-type") != "application/json":
        return response.status_code, None  # the app's own 500 page: plain text
    return response.status_code, response.json().get("status")


def orders(conn) -> list[tuple[object, ...]]:
    return conn.execute("SELECT merchant_ref, payment_id, amount_paise FROM orders").fetchall()


def claimed(conn) -> int:
    return conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0]


def test_fifty_concurrent_copies_of_one_delivery_write_one_order(shop, conn):
    delivery = razorpay()
    answers = released_together(
        list(range(50)),
        lambda _: shop.client(),
        lambda client, _: client.post(
            delivery.path, content=delivery.body, headers=delivery.headers
        ).json()["status"],
    )
    assert sorted(answers) == ["duplicate"] * 49 + ["processed"]
    assert orders(conn) == [(REF, "pay_shop0000001", 49_900)]


def test_payment_captured_and_order_paid_write_one_order(shop, conn):
    captured, paid = razorpay("payment.captured"), razorpay("order.paid")
    assert post(shop, captured) == (200, "processed")
    assert post(shop, paid) == (200, "processed")  # another delivery, the same payment
    assert orders(conn) == [(REF, "pay_shop0000001", 49_900)]


def test_a_handler_that_raises_is_5xx_and_nothing_is_recorded(shop, conn):
    conn.execute("ALTER TABLE orders ADD CONSTRAINT closed CHECK (false) NOT VALID")
    status, _ = post(shop, razorpay())
    assert status >= 500
    assert orders(conn) == [] and claimed(conn) == 0


def test_the_retry_after_a_handler_raised_writes_the_order(shop, conn):
    conn.execute("ALTER TABLE orders ADD CONSTRAINT closed CHECK (false) NOT VALID")
    delivery = razorpay()
    post(shop, delivery)
    conn.execute("ALTER TABLE orders DROP CONSTRAINT closed")
    assert post(shop, delivery) == (200, "processed")
    assert orders(conn) == [(REF, "pay_shop0000001", 49_900)]


def test_a_forged_signature_is_401_and_writes_nothing(shop, conn):
    delivery = razorpay()
    forged = {**delivery.headers, "x-razorpay-signature": "f" * 64}
    with shop.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=forged)
    assert response.status_code == 401
    assert orders(conn) == [] and claimed(conn) == 0


def test_a_delivery_signed_with_a_retired_secret_still_in_the_list_is_accepted(shop, conn):
    old = GATEWAY.__class__(KEYS.__class__(razorpay="whsec_retired"))
    delivery = old.razorpay(
        "payment.captured", payment_id="pay_shop0000001", order_id=REF, amount_paise=49_900
    )
    assert post(shop, delivery) == (200, "processed")


def test_cashfree_and_payu_are_served_too(shop, conn):
    cashfree = GATEWAY.cashfree(
        "PAYMENT_SUCCESS_WEBHOOK", order_id="order_cf_shop", cf_payment_id="5114910", order_amount=1
    )
    payu = GATEWAY.payu(txnid="order_payu_shop", mihpayid="403993715", amount="1.00")
    assert [post(shop, cashfree), post(shop, payu)] == [(200, "processed")] * 2
    assert {row[0] for row in orders(conn)} == {"order_cf_shop", "order_payu_shop"}


def test_the_shop_shows_the_order_the_webhook_wrote(shop, conn):
    post(shop, razorpay())
    with shop.client() as client:
        order = client.get(f"/orders/{REF}").json()
    assert order == {
        "merchant_ref": REF,
        "provider": "razorpay",
        "payment_id": "pay_shop0000001",
        "amount_paise": 49_900,
        "currency": "INR",
    }
