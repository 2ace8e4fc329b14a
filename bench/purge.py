"""How long a purge of N expired delivery records takes, and what it does to ingest latency.

    .venv/bin/python bench/purge.py [--rows 1000000] [--workers 8] [--baseline-seconds 15]

Seeds N records older than the retention window, measures ingest (new captures over real
HTTP against `payhooks serve`) alone, then again while `retention.purge` runs.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator

import psycopg
from _load import KEYS, database, load, service

from payhooks.service import retention
from payhooks.sim.gateway import Delivery, Gateway

SKUS = 1000

SEED_OLD = """
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
                                payload_sha256, body, headers, processed_at)
SELECT 'razorpay', 'evt_old_' || g, 'payment.captured', 'processed', 'pay_old_' || g,
       md5(g::text), convert_to(repeat('x', 600), 'UTF8'), '{}',
       now() - interval '120 days' - g * interval '1 second'
FROM generate_series(1, %s) AS g
"""
SEED_SHOP = [
    """INSERT INTO product_info (sku, name, price_paise)
       SELECT 'SKU' || g, 'bench', 100 FROM generate_series(1, %(skus)s) g""",
    """INSERT INTO product_stock (sku, slot, stock)
       SELECT 'SKU' || g, 0, 1000000000 FROM generate_series(1, %(skus)s) g""",
    """INSERT INTO carts (id, customer_email, amount_paise)
       SELECT 'cart_b' || g, 'b@example.com', 100 FROM generate_series(1, %(carts)s) g""",
    """INSERT INTO cart_items (cart_id, sku, quantity, price_paise)
       SELECT 'cart_b' || g, 'SKU' || (g %% %(skus)s + 1), 1, 100
       FROM generate_series(1, %(carts)s) g""",
    """INSERT INTO checkouts (provider, gateway_order_id, cart_id)
       SELECT 'razorpay', 'order_b' || g, 'cart_b' || g FROM generate_series(1, %(carts)s) g""",
]


def seed(url: str, rows: int, carts: int) -> float:
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SEED_OLD, (rows,))
        for sql in SEED_SHOP:
            conn.execute(sql, {"skus": SKUS, "carts": carts})
        conn.execute("VACUUM ANALYZE")
    return time.perf_counter() - started


def captures(first: int, last: int) -> Iterator[Delivery]:
    gateway = Gateway(KEYS)
    for n in range(first, last):
        yield gateway.razorpay(
            "payment.captured", payment_id=f"pay_b{n}", order_id=f"order_b{n}", amount_paise=100
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--baseline-seconds", type=float, default=15.0)
    parser.add_argument("--carts", type=int, default=200_000)
    args = parser.parse_args()
    with database() as url:
        print(
            f"seeded {args.rows:,} expired records and {args.carts:,} carts "
            f"in {seed(url, args.rows, args.carts):.1f} s"
        )
        with service(url) as base:
            half = args.carts // 2
            stop_at = time.monotonic() + args.baseline_seconds
            baseline = load(
                base,
                captures(1, half),
                workers=args.workers,
                until=lambda: time.monotonic() > stop_at,
            )
            print(f"ingest alone:        {baseline.summary()}")
            done = threading.Event()
            result: dict[str, object] = {}

            def purge() -> None:
                started = time.perf_counter()
                with psycopg.connect(url, autocommit=True) as conn:
                    result["purge"] = retention.purge(conn, 90)
                result["seconds"] = time.perf_counter() - started
                done.set()

            purger = threading.Thread(target=purge)
            purger.start()
            during = load(base, captures(half, args.carts), workers=args.workers, until=done.is_set)
            purger.join()
            purged = result["purge"]
            assert isinstance(purged, retention.PurgeResult)
            print(f"ingest during purge: {during.summary()}")
            seconds = float(str(result["seconds"]))
            print(
                f"purge: deleted {purged.deleted:,} of {purged.expired:,} expired records in "
                f"{seconds:.1f} s ({purged.deleted / seconds:,.0f} rows/s)"
            )
            print(f"p99 ratio during/alone: {during.percentile(99) / baseline.percentile(99):.2f}")


if __name__ == "__main__":
    main()
