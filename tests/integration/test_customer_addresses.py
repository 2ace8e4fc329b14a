"""Customer addresses are checked where carts are made, so no cart can hold one that would
break an email; the worker sends to the address as stored, normalised."""

from __future__ import annotations

import pytest

from payhooks.plumbing.errors import InvalidRequest
from payhooks.service.shop import carts
from tests.factories import product

NOT_ONE_PLAIN_ADDRESS = [
    "x@[y",
    "a@[b",
    "a@[",
    "postmaster,me@example.com",
    "a;b@c",
    "a b@example.com",
    "a@example.com\r\nBcc: evil@example.com",
    "a@example.com\nb@example.com",
    "Asha <asha@example.com>",
    '"quoted"@example.com',
    "a@[127.0.0.1]",
    "nobody@localhost",
]


def one_line(conn, email: str) -> carts.Cart:
    sku = product(conn).sku
    return carts.create_cart(conn, email, [carts.LineItem(sku=sku, quantity=1)])


@pytest.mark.parametrize("email", NOT_ONE_PLAIN_ADDRESS)
def test_a_cart_refuses_what_is_not_one_plain_deliverable_address(conn, email):
    with pytest.raises(InvalidRequest, match="customer_email is not a usable email address"):
        one_line(conn, email)


def test_a_refused_address_stores_no_cart(conn):
    with pytest.raises(InvalidRequest):
        one_line(conn, "x@[y")
    assert conn.execute("SELECT count(*) FROM carts").fetchone()[0] == 0


def test_a_cart_stores_the_normalised_address(conn):
    cart = one_line(conn, "Asha@Example.COM")
    assert cart.customer_email == "Asha@example.com"


def test_an_international_address_is_accepted(conn):
    assert one_line(conn, "आशा@उदाहरण.भारत").customer_email == "आशा@उदाहरण.भारत"


@pytest.mark.parametrize("email", ["x@[y", "postmaster,me@example.com", "a;b@c.example"])
def test_the_api_answers_422_saying_why_the_address_is_refused(service, email):
    with service.client() as client:
        sku = client.post(
            "/api/products", json={"sku": "TEA", "name": "Tea", "price_paise": 100, "stock": 5}
        ).json()["sku"]
        answer = client.post(
            "/api/carts", json={"customer_email": email, "items": [{"sku": sku, "quantity": 1}]}
        )
    assert answer.status_code == 422
    assert answer.json()["error"] == "invalid_request"
    assert "customer_email is not a usable email address" in answer.json()["detail"]
    assert "invalid characters" in answer.json()["detail"]
