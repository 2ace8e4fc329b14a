"""Factories with defaults: a product, a cart checked out with a provider, a signed delivery."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace

from payhooks.events import Provider
from payhooks.gateways import gateway
from payhooks.intake.ingest import Receipt, ingest
from payhooks.plumbing import db
from payhooks.service.config import Settings
from payhooks.service.shop import carts, catalog
from payhooks.service.shop.payments import apply_event
from payhooks.sim.deliveries import Paid
from payhooks.sim.gateway import Delivery, Gateway, GatewaySecrets, new_payment_id
from payhooks.sim.gateways import PaymentDelivery, simulator

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
        Razorpay "authorized"), built by its gateway's simulator (``payment_delivery``)."""
        paid = Paid(
            what=what,
            reference=self.reference,
            payment_id=payment_id or self.payment_id,
            amount_paise=self.amount_paise if amount_paise is None else amount_paise,
            event=event,
        )
        return delivery_of(self.provider)(GATEWAY, paid)


def delivery_of(provider: Provider) -> PaymentDelivery:
    """The gateway's builder, its simulator's: one the registry lacks is ``UnknownGateway``,
    one the registry has and the simulators lack ``NoSimulator``; never another gateway's."""
    gateway(provider)
    return simulator(provider).payment_delivery


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


def payu_authorised_post(txnid: str, mihpayid: str, amount: str = "499.00") -> Delivery:
    """PayU's post of a payment the bank authorised and debited and PayU has not captured
    (``unmappedstatus=auth`` under ``success``: outside the hash, docs/providers.md)."""
    post = GATEWAY.payu(txnid=txnid, mihpayid=mihpayid, amount=amount)
    return replace(post, body=post.body.replace(b"unmappedstatus=captured", b"unmappedstatus=auth"))
