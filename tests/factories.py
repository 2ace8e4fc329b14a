"""Factories with defaults: a product, a cart checked out with a provider, a signed delivery."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from payhooks import db
from payhooks.events import Provider
from payhooks.gateways import gateway
from payhooks.ingest import Receipt, ingest
from payhooks.service.config import Settings
from payhooks.service.shop import carts, catalog
from payhooks.service.shop.payments import apply_event
from payhooks.sim.gateway import Delivery, Gateway, GatewaySecrets, new_payment_id

KEYS = GatewaySecrets()
SETTINGS = Settings.from_env(KEYS.env())
ADAPTERS = SETTINGS.adapters()
GATEWAY = Gateway(KEYS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Purchase:
    """A checked-out cart and the facts a gateway would report about paying it."""

    provider: Provider
    cart_id: str
    reference: str
    amount_paise: int
    sku: str
    payment_id: str

    def captured(self, **overrides: object) -> Delivery:
        return self.delivery("captured", **overrides)

    def delivery(
        self,
        what: str,
        *,
        payment_id: str | None = None,
        amount_paise: int | None = None,
        event: str | None = None,
    ) -> Delivery:
        """A signed delivery saying the payment is ``what`` ("captured", "failed", and on
        Razorpay "authorized"), built by its gateway's line in ``DELIVERIES``."""
        pid = payment_id or self.payment_id
        amount = self.amount_paise if amount_paise is None else amount_paise
        return delivery_of(self.provider)(self, what, pid, amount, event)


Build = Callable[[Purchase, str, str, int, str | None], Delivery]


def _razorpay(buy: Purchase, what: str, pid: str, amount: int, event: str | None) -> Delivery:
    names = {"captured": "payment.captured", "authorized": "payment.authorized",
             "failed": "payment.failed"}  # fmt: skip
    return GATEWAY.razorpay(
        event or names[what], payment_id=pid, order_id=buy.reference, amount_paise=amount
    )


def _cashfree(buy: Purchase, what: str, pid: str, amount: int, event: str | None) -> Delivery:
    kind, status = {
        "captured": ("PAYMENT_SUCCESS_WEBHOOK", "SUCCESS"),
        "failed": ("PAYMENT_FAILED_WEBHOOK", "FAILED"),
    }[what]
    return GATEWAY.cashfree(
        kind,
        order_id=buy.reference,
        cf_payment_id=pid,
        order_amount=Decimal(amount) / 100,
        payment_status=status,
    )


def _payu(buy: Purchase, what: str, pid: str, amount: int, event: str | None) -> Delivery:
    status = {"captured": "success", "failed": "failure"}[what]
    return GATEWAY.payu(
        txnid=buy.reference, mihpayid=pid, amount=f"{Decimal(amount) / 100:.2f}", status=status
    )


def _phonepe(buy: Purchase, what: str, pid: str, amount: int, event: str | None) -> Delivery:
    names = {"captured": "checkout.order.completed", "failed": "checkout.order.failed"}
    return GATEWAY.phonepe(
        event or names[what], merchant_order_id=buy.reference, amount_paise=amount,
        transaction_id=pid,
    )  # fmt: skip


def _juspay(buy: Purchase, what: str, pid: str, amount: int, event: str | None) -> Delivery:
    status = {"captured": "CHARGED", "failed": "AUTHORIZATION_FAILED"}[what]
    name = event or {"captured": "ORDER_SUCCEEDED", "failed": "ORDER_FAILED"}[what]
    return GATEWAY.juspay(name, order_id=buy.reference, txn=pid, amount_paise=amount, status=status)


DELIVERIES: Mapping[Provider, Build] = {
    Provider.RAZORPAY: _razorpay,
    Provider.CASHFREE: _cashfree,
    Provider.PAYU: _payu,
    Provider.PHONEPE: _phonepe,
    Provider.JUSPAY: _juspay,
}
"""Each gateway's delivery builder; ``tests/unit/test_factories.py`` checks it covers the
registry (``payhooks.gateways.GATEWAYS``)."""


def delivery_of(provider: Provider) -> Build:
    """The gateway's builder: one the registry lacks is ``UnknownGateway``, one the registry
    has and this file lacks a ``LookupError``; never another gateway's."""
    gateway(provider)
    try:
        return DELIVERIES[provider]
    except KeyError:
        raise LookupError(f"no delivery factory for {provider!r} in tests/factories.py") from None


def product(conn: db.Connection, *, stock: int = 10, price_paise: int = 49_900) -> catalog.Product:
    sku = "SKU-" + secrets.token_hex(4)
    return catalog.create_product(
        conn, catalog.Product(sku=sku, name="Tea", price_paise=price_paise, stock=stock)
    )


def purchase(
    conn: db.Connection,
    provider: Provider = Provider.RAZORPAY,
    *,
    stock: int = 10,
    quantity: int = 1,
    sku: str | None = None,
) -> Purchase:
    if sku is None:
        sku = product(conn, stock=stock).sku
    cart = carts.create_cart(
        conn, "buyer@example.com", [carts.LineItem(sku=sku, quantity=quantity)]
    )
    done = carts.checkout(conn, cart.cart_id, provider)
    return Purchase(
        provider=provider,
        cart_id=cart.cart_id,
        reference=done.gateway_order_id,
        amount_paise=cart.amount_paise,
        sku=sku,
        payment_id=new_payment_id(provider),
    )


def deliver(conn: db.Connection, delivery: Delivery) -> Receipt:
    return ingest(conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, apply_event)
