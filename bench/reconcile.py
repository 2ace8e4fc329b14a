"""How long one reconciliation pass takes over checkouts whose webhook never came.

    .venv/bin/python bench/reconcile.py [--per-gateway 100]

Seeds N paid checkouts per gateway that the status API double (served on loopback) knows as
paid and no webhook ever reported, runs one pass (`Reconciler.run`, as the worker does), and
prints what it did, the time per checkout, and whether every checkout got exactly one order.
"""

from __future__ import annotations

import argparse
import logging
import time

import psycopg
from _load import KEYS, database

from payhooks.events import Provider
from payhooks.service import database as service_db
from payhooks.service.config import Settings
from payhooks.service.reconcile import Options, Reconciler
from payhooks.service.reconcile.clients import clients, http_client
from payhooks.service.shop import carts, catalog
from payhooks.sim.gateway import Purchase, new_payment_id
from payhooks.sim.gateway_api import ApiKeys, GatewayApi, serving


def seed(conn: psycopg.Connection, api: GatewayApi, per_gateway: int) -> int:
    catalog.create_product(
        conn, catalog.Product(sku="BENCH", name="bench", price_paise=100, stock=10**8)
    )
    for provider in Provider:
        for _ in range(per_gateway):
            cart = carts.create_cart(
                conn, "b@example.com", [carts.LineItem(sku="BENCH", quantity=1)]
            )
            done = carts.checkout(conn, cart.cart_id, provider)
            bought = Purchase(
                provider=provider,
                cart_id=cart.cart_id,
                reference=done.gateway_order_id,
                amount_paise=cart.amount_paise,
                items={"BENCH": 1},
            )
            api.pay(bought, new_payment_id(provider))
    return per_gateway * len(Provider)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-gateway", type=int, default=100)
    args = parser.parse_args()
    logging.getLogger("payhooks").setLevel(logging.ERROR)  # one alert line per payment, else
    api = GatewayApi(ApiKeys())
    with database() as url, serving(api) as api_url, psycopg.connect(url, autocommit=True) as conn:
        count = seed(conn, api, args.per_gateway)
        settings = Settings.from_env({**KEYS.env(), **ApiKeys().env(api_url)})
        pool = service_db.open_pool(url, settings, max_size=2, deadline=False)
        try:
            with http_client(10) as http:
                found = clients(settings.reconciled(), http)
                options = Options(after_s=0, window_s=3600, limit=count)
                started = time.perf_counter()
                tally = Reconciler(pool, found, options).run()
                seconds = time.perf_counter() - started
        finally:
            pool.close()
        orders = conn.execute("SELECT count(DISTINCT cart_id), count(*) FROM orders").fetchone()
    print(tally.summary())
    print(f"{count} checkouts in {seconds:.2f} s: {seconds / count * 1000:.1f} ms per checkout")
    once = orders == (count, count)
    print(f"orders: {orders[1]} for {orders[0]} carts (every checkout once: {once})")


if __name__ == "__main__":
    main()
