"""The database away and back, as `payhooks serve` sees it: how soon readiness says so, what
webhooks are answered meanwhile, how soon it is ready again, and what the first deliveries
after it are answered. Nothing is restarted.

    .venv/bin/python bench/database_away.py [--outage-s 5] [--rounds 3]

The server reaches PostgreSQL through a loopback proxy (``payhooks.sim.proxy``): a cut resets
every connection and refuses new ones; a restore listens again. The outage is quiet (no
delivery while it lasts), the case where every idle pooled connection is dead on return.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable

import httpx
import psycopg
from _load import KEYS, database, service

from payhooks.events import Provider
from payhooks.service.shop import carts, catalog
from payhooks.sim.gateway import Delivery, Gateway, new_payment_id
from payhooks.sim.proxy import Proxy

GATEWAY = Gateway(KEYS)


def capture(conn: psycopg.Connection[tuple[object, ...]], n: int) -> Delivery:
    sku = f"SKU-AWAY-{n}"
    catalog.create_product(conn, catalog.Product(sku=sku, name="Tea", price_paise=100, stock=5))
    cart = carts.create_cart(conn, "buyer@example.com", [carts.LineItem(sku=sku, quantity=1)])
    done = carts.checkout(conn, cart.cart_id, Provider.RAZORPAY)
    return GATEWAY.razorpay(
        "payment.captured",
        payment_id=new_payment_id(Provider.RAZORPAY),
        order_id=done.gateway_order_id,
        amount_paise=cart.amount_paise,
    )


def until(check: Callable[[], bool], limit_s: float = 60.0) -> float:
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > limit_s:
            raise SystemExit("no change within a minute")
        time.sleep(0.01)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--outage-s", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with database() as url, psycopg.connect(url, autocommit=True) as conn:
        proxy = Proxy(url)
        with service(proxy.url) as base, httpx.Client(base_url=base, timeout=10) as client:

            def ready() -> int:
                return client.get("/readyz").status_code

            def post(delivery: Delivery) -> int:
                sent = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
                return sent.status_code

            made = 0
            for round_ in range(1, args.rounds + 1):
                for _ in range(4):
                    made += 1
                    post(capture(conn, made))
                proxy.cut()
                down_s = until(lambda: ready() == 503)
                time.sleep(args.outage_s)
                queued = [capture(conn, made + i + 1) for i in range(8)]
                made += len(queued)
                proxy.restore()
                up_s = until(lambda: ready() == 200)
                answers = Counter(post(d) for d in queued)
                print(
                    f"round {round_}: readiness 503 {down_s * 1000:.0f} ms after the cut, "
                    f"200 again {up_s * 1000:.0f} ms after the restore; the 8 deliveries "
                    f"after it: {dict(sorted(answers.items()))}"
                )
        proxy.close()


if __name__ == "__main__":
    main()
