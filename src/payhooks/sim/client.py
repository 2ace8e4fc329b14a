"""What every simulator shares: posting a delivery as a gateway does and reading the answer
as a gateway would, and the shop's API over HTTP with its bearer token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from payhooks.events import Provider
from payhooks.plumbing.errors import PayhooksError
from payhooks.sim.deliveries import Delivery, Purchase
from payhooks.sim.parts import GatewayBooks

ACKNOWLEDGED = ("processed", "duplicate", "ignored", "parked")


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What one HTTP attempt got back, as the gateway saw it."""

    outcome: str  # processed | duplicate | ignored | parked | http NNN | timeout | no connection
    event_id: str | None = None
    order_id: str | None = None

    @property
    def acknowledged(self) -> bool:
        """payhooks' own 200: the gateway stops sending it."""
        return self.outcome in ACKNOWLEDGED

    @property
    def retryable(self) -> bool:
        """Gateways retry what they did not get an answer to, and every 5xx."""
        return self.outcome in ("timeout", "no connection") or self.outcome.startswith("http 5")


def post(client: httpx.Client, delivery: Delivery, *, timeout: float | None = None) -> Answer:
    """The delivery's exact bytes and headers; never raises for what a gateway would see."""
    options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    try:
        response = client.post(
            delivery.path, content=delivery.body, headers=delivery.headers, **options
        )
    except httpx.TimeoutException:
        return Answer(outcome="timeout")
    except httpx.TransportError:
        return Answer(outcome="no connection")
    return _read(response)


def _read(response: httpx.Response) -> Answer:
    if response.status_code != 200:
        return Answer(outcome=f"http {response.status_code}")
    try:
        body = response.json()
        return Answer(
            outcome=str(body["status"]),
            event_id=str(body["event_id"]),
            order_id=body.get("order_id"),
        )
    except (ValueError, KeyError, TypeError, AttributeError):  # a 200 that is not payhooks'
        return Answer(outcome="http 200 unreadable")


class Shop:
    """The deployment's /api with its bearer token; anything but success raises ``error``."""

    def __init__(self, client: httpx.Client, error: type[PayhooksError] = PayhooksError) -> None:
        self.client = client
        self.error = error

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.send(method, path, **kwargs)
        if response.status_code >= 300:
            raise self.error(
                f"{method} {path} answered {response.status_code}: {response.text[:200]}"
            )
        return response.json()

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self.error(f"{method} {path}: {type(exc).__name__}") from exc

    def get(self, path: str, **params: str) -> Any:
        return self.call("GET", path, params=params)

    def add_product(self, sku: str, name: str, price_paise: int, stock: int) -> None:
        product = {"sku": sku, "name": name, "price_paise": price_paise, "stock": stock}
        self.call("POST", "/api/products", json=product)

    def stock(self, sku: str) -> int:
        return int(self.get(f"/api/products/{sku}")["stock"])

    def buy(self, provider: Provider, items: dict[str, int], email: str) -> Purchase:
        lines = [{"sku": sku, "quantity": qty} for sku, qty in items.items()]
        cart = self.call("POST", "/api/carts", json={"customer_email": email, "items": lines})
        path = f"/api/carts/{cart['cart_id']}/checkout"
        done = self.call("POST", path, json={"provider": provider.value})
        return Purchase(
            provider=provider,
            cart_id=cart["cart_id"],
            reference=done["gateway_order_id"],
            amount_paise=done["amount_paise"],
            items=items,
        )

    def orders(self, cart_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.get("/api/orders", cart_id=cart_id)["orders"]
        return found

    def payment(self, provider: Provider, payment_id: str) -> dict[str, Any] | None:
        """The payment as recorded, or None when payhooks has none."""
        return self._found(f"/api/payments/{provider.value}/{payment_id}")

    def dispute(self, provider: Provider, dispute_id: str) -> dict[str, Any] | None:
        """The dispute as the core holds it, or None when payhooks has none."""
        return self._found(f"/api/disputes/{provider.value}/{dispute_id}")

    def _found(self, path: str) -> dict[str, Any] | None:
        response = self.send("GET", path)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self.error(f"GET {path} answered {response.status_code}")
        found: dict[str, Any] = response.json()
        return found


class ShopAtGateway(Shop):
    """The shop, with every checkout also opened at the gateway, as the merchant's
    create-order call does: the status API double knows every order a merchant asks about."""

    def __init__(
        self, client: httpx.Client, error: type[PayhooksError], books: GatewayBooks
    ) -> None:
        super().__init__(client, error)
        self.books = books

    def buy(self, provider: Provider, items: dict[str, int], email: str) -> Purchase:
        purchase = super().buy(provider, items, email)
        self.books.open_order(purchase)
        return purchase
