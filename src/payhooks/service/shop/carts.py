"""Carts and checkout: the reference a gateway will echo back for a cart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from payhooks.events import Provider
from payhooks.gateways import gateway
from payhooks.intake.expectations import expect
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import Conflict, InvalidRequest
from payhooks.service.errors import InvalidAddress
from payhooks.service.mail import checked_address
from payhooks.service.shop.ids import new_id, record


@dataclass(frozen=True, slots=True, kw_only=True)
class LineItem:
    sku: str
    quantity: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Cart:
    cart_id: str
    customer_email: str
    amount_paise: int
    currency: str
    status: str
    order_id: str | None
    items: tuple[LineItem, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkout:
    provider: Provider
    gateway_order_id: str
    cart_id: str
    amount_paise: int
    currency: str


_PRICES = "SELECT sku, price_paise FROM products WHERE sku = ANY(%s)"
_INSERT_CART = """
INSERT INTO carts (id, customer_email, amount_paise, currency) VALUES (%s, %s, %s, 'INR')
"""
_INSERT_ITEM = """
INSERT INTO cart_items (cart_id, sku, quantity, price_paise) VALUES (%s, %s, %s, %s)
"""
_GET_CART = """
SELECT c.id AS cart_id, c.customer_email, c.amount_paise, c.currency, c.status, o.id AS order_id
FROM carts c LEFT JOIN orders o ON o.cart_id = c.id WHERE c.id = %s
"""
_LOCK_CART = "SELECT 1 FROM carts WHERE id = %s FOR NO KEY UPDATE"
_ITEMS = "SELECT sku, quantity FROM cart_items WHERE cart_id = %s ORDER BY sku"
_INSERT_CHECKOUT = """
INSERT INTO checkouts (provider, gateway_order_id, cart_id) VALUES (%s, %s, %s)
ON CONFLICT DO NOTHING
"""
_CHECKOUT_OF_CART = """
SELECT gateway_order_id FROM checkouts WHERE cart_id = %s AND provider = %s
"""


def create_cart(conn: Connection, customer_email: str, items: Sequence[LineItem]) -> Cart:
    """A cart priced from the catalogue at this moment; prices are kept per line."""
    email = _customer_email(customer_email)
    merged = _merge(items)
    with conn.transaction():
        prices: dict[str, int] = dict(conn.execute(_PRICES, (list(merged),)).fetchall())
        unknown = sorted(set(merged) - set(prices))
        if unknown:
            raise InvalidRequest(f"unknown sku: {', '.join(unknown)}")
        cart_id = new_id("cart")
        amount = sum(prices[sku] * qty for sku, qty in merged.items())
        conn.execute(_INSERT_CART, (cart_id, email, amount))
        for sku, qty in merged.items():
            conn.execute(_INSERT_ITEM, (cart_id, sku, qty, prices[sku]))
    return get_cart(conn, cart_id)


def _customer_email(address: str) -> str:
    """The address the confirmation goes to, normalised; refused here rather than when the
    worker builds the email, where a bad one could only be dead-lettered."""
    try:
        return checked_address(address)
    except InvalidAddress as exc:
        raise InvalidRequest(f"customer_email is not a usable email address: {exc.reason}") from exc


def _merge(items: Sequence[LineItem]) -> dict[str, int]:
    if not items:
        raise InvalidRequest("a cart needs at least one item")
    merged: dict[str, int] = {}
    for item in items:
        if item.quantity <= 0:
            raise InvalidRequest(f"quantity of {item.sku!r} must be positive")
        merged[item.sku] = merged.get(item.sku, 0) + item.quantity
    return merged


def get_cart(conn: Connection, cart_id: str) -> Cart:
    found = record(conn, _GET_CART, (cart_id,), "cart")
    items = tuple(LineItem(sku=s, quantity=q) for s, q in conn.execute(_ITEMS, (cart_id,)))
    return Cart(**found, items=items)


def checkout(
    conn: Connection, cart_id: str, provider: Provider, gateway_order_id: str | None = None
) -> Checkout:
    """Register the reference the gateway will echo for this cart; idempotent per provider.

    In production the reference comes from the gateway's create-order call (Razorpay
    ``order_…``) or is the merchant's own id (Cashfree ``order_id``, PayU ``txnid``); without
    one, payhooks mints a unique reference in the gateway's format.
    """
    with conn.transaction():
        conn.execute(_LOCK_CART, (cart_id,))
        cart = get_cart(conn, cart_id)
        if cart.status != "open":
            raise Conflict(f"cart {cart_id!r} is {cart.status}")
        reference = gateway_order_id or _mint_reference(provider)
        conn.execute(_INSERT_CHECKOUT, (provider.value, reference, cart_id))
        row = conn.execute(_CHECKOUT_OF_CART, (cart_id, provider.value)).fetchone()
        if row is None:
            raise Conflict(f"reference {reference!r} belongs to another cart")
        if gateway_order_id and row[0] != gateway_order_id:
            raise Conflict(f"cart {cart_id!r} is checked out with {provider} as {row[0]!r}")
        # What the checkout must be paid, told to the core as any merchant's app tells it.
        expect(conn, provider, row[0], cart.amount_paise, cart.currency, reference=cart_id)
    return Checkout(
        provider=provider,
        gateway_order_id=row[0],
        cart_id=cart_id,
        amount_paise=cart.amount_paise,
        currency=cart.currency,
    )


def _mint_reference(provider: Provider) -> str:
    return new_id(gateway(provider).reference_prefix)
