"""Authentic deliveries and API requests whose bytes spell text that is not Unicode text (the
JSON escape "\\ud800", a lone surrogate; a form escape that is not UTF-8), over a real socket:
a clear 400 or 422, the field left out where an odd value never refuses a payment, and the
delivery log written on for the requests that follow."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from payhooks.events import Provider
from payhooks.gateways import cashfree, razorpay
from payhooks.sim.gateway import Delivery, bank_reference
from tests.factories import KEYS, Purchase, purchase
from tests.integration.test_delivery_log import logged
from tests.integration.test_web import post, stored

LONE_SURROGATE = "\ud800"


def tainted(delivery: Delivery, value: str) -> Delivery:
    """The delivery with the first JSON string ``value`` ending in a lone surrogate, signed
    again with the gateway's secret: authentic bytes, as a gateway could send them."""
    quoted = json.dumps(value).encode()
    assert quoted in delivery.body
    body = delivery.body.replace(quoted, json.dumps(value + LONE_SURROGATE).encode(), 1)
    assert b"\\ud800" in body
    headers = dict(delivery.headers)
    if delivery.provider is Provider.RAZORPAY:
        headers["x-razorpay-signature"] = razorpay.sign(body, KEYS.razorpay)
    else:
        timestamp = headers["x-webhook-timestamp"]
        headers["x-webhook-signature"] = cashfree.sign(body, timestamp, KEYS.cashfree)
    return replace(delivery, body=body, headers=headers)


# Where each gateway's body carries the field: the value the factory's delivery holds.
FIELDS = {
    (Provider.RAZORPAY, "payment id"): lambda buy: buy.payment_id,
    (Provider.RAZORPAY, "order id"): lambda buy: buy.reference,
    (Provider.RAZORPAY, "currency"): lambda buy: "INR",
    (Provider.RAZORPAY, "event name"): lambda buy: "payment.captured",
    (Provider.CASHFREE, "payment id"): lambda buy: buy.payment_id,
    (Provider.CASHFREE, "order id"): lambda buy: buy.reference,
    (Provider.CASHFREE, "currency"): lambda buy: "INR",
    (Provider.CASHFREE, "event name"): lambda buy: "PAYMENT_SUCCESS_WEBHOOK",
    (Provider.CASHFREE, "payment status"): lambda buy: "SUCCESS",
}


@pytest.mark.parametrize(("provider", "field"), FIELDS, ids=[" ".join(k) for k in FIELDS])
def test_a_lone_surrogate_in_a_field_is_refused_as_malformed(service, conn, provider, field):
    buy = purchase(conn, provider)
    response = post(service, tainted(buy.captured(), FIELDS[provider, field](buy)))
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_payload"
    assert "not valid text" in response.json()["detail"]
    assert stored(service.database_url) == 0


def bank_reference_of(buy: Purchase) -> str:
    return bank_reference(buy.payment_id)


@pytest.mark.parametrize("provider", [Provider.RAZORPAY, Provider.CASHFREE])
def test_a_lone_surrogate_in_the_bank_reference_leaves_it_out(service, conn, provider):
    buy = purchase(conn, provider)
    response = post(service, tainted(buy.captured(), bank_reference_of(buy)))
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    refs = conn.execute("SELECT bank_ref FROM processed_webhooks").fetchall()
    assert refs == [(None,)]


@pytest.mark.parametrize("provider", [Provider.RAZORPAY, Provider.CASHFREE])
def test_the_delivery_log_is_written_on_after_a_lone_surrogate(service, conn, provider):
    first, then = purchase(conn, provider), purchase(conn, provider)
    post(service, tainted(first.captured(), first.payment_id))
    assert post(service, then.captured()).status_code == 200
    rows = logged(service.database_url, 2)
    assert [(r["status"], r["outcome"]) for r in rows] == [
        (400, "malformed_payload"),
        (200, "processed"),
    ]
    assert rows[1]["merchant_ref"] == then.reference


def payu_post_with(buy: Purchase, field: bytes) -> Delivery:
    """A genuine PayU post whose unhashed ``bank_ref_num`` is replaced by ``field``."""
    delivery = buy.captured()
    original = b"bank_ref_num=" + bank_reference(buy.payment_id).encode()
    assert original in delivery.body
    return replace(delivery, body=delivery.body.replace(original, field))


@pytest.mark.parametrize("escape", [b"%ED%A0%80", b"%FF", b"12%C3"])
def test_a_payu_bank_reference_that_is_not_utf8_is_left_out(service, conn, escape):
    buy = purchase(conn, Provider.PAYU)
    response = post(service, payu_post_with(buy, b"bank_ref_num=" + escape))
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert conn.execute("SELECT bank_ref FROM processed_webhooks").fetchall() == [(None,)]


def test_a_payu_field_payhooks_does_not_read_may_hold_any_bytes(service, conn):
    buy = purchase(conn, Provider.PAYU)
    delivery = buy.captured()
    body = delivery.body.replace(b"error_Message=No+Error", b"error_Message=%FF%FE")
    assert body != delivery.body
    response = post(service, replace(delivery, body=body))
    assert (response.status_code, response.json()["status"]) == (200, "processed")


def api_post(service, path: str, text: str):
    """JSON as a client can write it: ``text`` is sent as is, escapes and all."""
    with service.client() as client:
        return client.post(path, content=text, headers={"content-type": "application/json"})


PRODUCT = '{"sku": "%s", "name": "%s", "price_paise": 1, "stock": 1}'
CHECKOUT = "/api/carts/c1/checkout"
CART = '{"customer_email": "%s", "items": [{"sku": "%s", "quantity": 1}]}'
API_REQUESTS = {
    "product sku": ("/api/products", PRODUCT % ("a\\ud800", "Tea")),
    "product name": ("/api/products", PRODUCT % ("a", "T\\ud800")),
    "cart sku": ("/api/carts", CART % ("a@b.c", "\\ud800")),
    "customer email": ("/api/carts", CART % ("\\ud800@b.c", "a")),
    "checkout reference": (CHECKOUT, '{"provider": "payu", "gateway_order_id": "\\udfff"}'),
    "provider": (CHECKOUT, '{"provider": "payu\\ud800"}'),
}


@pytest.mark.parametrize(("path", "text"), API_REQUESTS.values(), ids=API_REQUESTS)
def test_an_api_field_holding_a_lone_surrogate_is_422_without_echoing_it(service, path, text):
    response = api_post(service, path, text)
    assert response.status_code == 422
    body = response.json()
    assert body["detail"] and all("input" not in error for error in body["detail"])
    assert "\\ud" not in response.text.lower() and "\ud800" not in response.text


def test_an_api_error_still_echoes_input_that_is_text(service):
    response = api_post(service, "/api/carts", '{"customer_email": "nobody", "items": []}')
    assert response.status_code == 422
    assert "nobody" in [error.get("input") for error in response.json()["detail"]]
