"""Reconciliation against the status API double over a loopback socket, on real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import psycopg_pool
import pytest

from payhooks.events import Provider
from payhooks.plumbing import db
from payhooks.service import application, database
from payhooks.service.config import Settings
from payhooks.service.reconcile import Options
from payhooks.service.reconcile.clients import clients, http_client
from payhooks.sim.gateway import Purchase as SimPurchase
from payhooks.sim.gateway_api import ApiKeys, GatewayApi, serving
from tests.factories import KEYS, Purchase

API_KEYS = ApiKeys()


@pytest.fixture
def gateway_api() -> Iterator[tuple[GatewayApi, str]]:
    api = GatewayApi(API_KEYS)
    with serving(api) as url:
        yield api, url


def settings_for(url: str, **extra: str) -> Settings:
    return Settings.from_env({**KEYS.env(), **API_KEYS.env(url), **extra})


@dataclass
class Rig:
    """The double, a pool on the test's database, and a reconciler asking the double."""

    api: GatewayApi
    url: str
    pool: psycopg_pool.ConnectionPool
    settings: Settings
    http: httpx.Client

    def reconciler(
        self,
        *,
        limit: int = 100,
        providers: tuple[Provider, ...] = tuple(Provider),
        http: httpx.Client | None = None,
    ):
        """``http``: another client than the rig's (one with event hooks, say)."""
        found = clients(
            {p: c for p, c in self.settings.reconciled().items() if p in providers},
            http or self.http,
        )
        options = Options(after_s=0, window_s=3600, limit=limit)
        return application.shop_reconciler(self.pool, found, options)

    def run(self, **kwargs):
        return self.reconciler(**kwargs).run()


@pytest.fixture
def rig(database_url: str, gateway_api: tuple[GatewayApi, str]) -> Iterator[Rig]:
    api, url = gateway_api
    settings = settings_for(url, DATABASE_URL=database_url)
    pool = database.open_pool(database_url, settings, max_size=6, deadline=False)
    with http_client(5.0) as http:
        try:
            yield Rig(api=api, url=url, pool=pool, settings=settings, http=http)
        finally:
            pool.close()


def sim(purchase: Purchase) -> SimPurchase:
    """The factories' purchase as the gateway double knows it."""
    return SimPurchase(
        provider=purchase.provider,
        cart_id=purchase.cart_id,
        reference=purchase.reference,
        amount_paise=purchase.amount_paise,
        items={purchase.sku: 1},
    )


def paid_at_gateway(api: GatewayApi, purchase: Purchase, status: str | None = None) -> str:
    """The customer paid; the gateway knows; no webhook is sent. Returns the payment id
    payhooks will know it by (PayU: the txnid)."""
    api.pay(sim(purchase), purchase.payment_id, status)
    return purchase.reference if purchase.provider is Provider.PAYU else purchase.payment_id


def orders_of(conn: db.Connection, cart_id: str) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT id, payment_id FROM orders WHERE cart_id = %s", (cart_id,)
    ).fetchall()


def count(conn: db.Connection, sql: str, *params: object) -> int:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])
