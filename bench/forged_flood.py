"""A forged-request flood against the delivery log: rows written and table size, every refusal a
line (as before ``repeats``) beside the refusals of a minute folded (as now).

    .venv/bin/python bench/forged_flood.py [--count 20000] [--workers 4] [--rate 2000]

One fresh database (DATABASE_URL's server when set, else embedded). For each way, a Starlette
app serving ``payhooks.starlette``'s webhook route under uvicorn on a loopback port, its
delivery log on a connection of its own, takes ``--count`` Razorpay deliveries signed with the
wrong secret (each answered 401) from ``--workers`` keep-alive clients; the app is stopped (its
log writes its last lines, the minute's summary among them), then the log is read: rows,
requests they stand for, table size with its indexes, and one health read of each kind. The
last lines scale what was measured to an hour of ``--rate`` forged requests a second. Prints
figures only.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
import psycopg_pool
import uvicorn
from _load import KEYS, Run, database, drive, free_port, post
from starlette.applications import Starlette

from payhooks import Hooks, starlette
from payhooks.console import health as console_health
from payhooks.gateways.razorpay import Razorpay
from payhooks.operations import deliverylog, health
from payhooks.operations.deliverylog import DeliveryLog, closed_at_exit, own_connection
from payhooks.sim.gateway import Delivery, Gateway, GatewaySecrets

FORGED_WITH = GatewaySecrets(razorpay="not the merchant's secret")


def forged() -> Delivery:
    """A Razorpay capture in the gateway's own format, signed with a secret not the app's."""
    return Gateway(FORGED_WITH).razorpay(
        "payment.captured", payment_id="pay_forged", order_id="order_forged", amount_paise=100
    )


def app(url: str, refusals_per_minute: int) -> Starlette:
    """The webhook route on a pool forged requests never take a connection of, its delivery
    log folding past ``refusals_per_minute`` refusals of a kind a minute."""
    pool = psycopg_pool.ConnectionPool(url, min_size=1, max_size=2, open=False)
    log = closed_at_exit(DeliveryLog(own_connection(url), refusals_per_minute=refusals_per_minute))
    deliver = starlette.delivery(Hooks(), pool, None)
    adapters = [Razorpay(secrets=(KEYS.razorpay,))]
    quiet = logging.getLogger("bench.forged_flood")
    quiet.setLevel(logging.ERROR)  # a line per refusal on the terminal would be the bench
    route = starlette.webhook_route("/webhooks/{provider}", adapters, quiet, deliver, log)

    @asynccontextmanager
    async def opens_the_pool(app: Starlette) -> AsyncIterator[None]:
        pool.open()
        try:
            yield
        finally:
            pool.close()

    return Starlette(routes=[route], lifespan=starlette.lifespan([route], around=opens_the_pool))


@contextmanager
def served(asgi: Any) -> Iterator[str]:
    """``asgi`` under uvicorn on a loopback port until the block ends, its lifespan run."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@dataclass(frozen=True, slots=True, kw_only=True)
class Written:
    rows: int
    requests: int
    minutes: int
    table_bytes: int
    health_ms: float
    console_ms: float


READ = """
SELECT count(*), coalesce(sum(repeats), 0),
       count(DISTINCT date_trunc('minute', received_at)),
       pg_total_relation_size('payhooks_deliveries')
FROM payhooks_deliveries
"""


def timed(read: Callable[[], object]) -> float:
    started = time.perf_counter()
    read()
    return (time.perf_counter() - started) * 1000


def written(url: str) -> Written:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE payhooks_deliveries")
        row = conn.execute(READ).fetchone()
        assert row is not None
        now = datetime.now(UTC)
        return Written(
            rows=int(row[0]),
            requests=int(row[1]),
            minutes=int(row[2]),
            table_bytes=int(row[3]),
            health_ms=timed(lambda: health.summary(conn, now)),
            console_ms=timed(lambda: console_health.health(conn, now)),
        )


def flood(url: str, label: str, refusals_per_minute: int, args: argparse.Namespace) -> Written:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE payhooks_deliveries")
        [(empty,)] = conn.execute("SELECT pg_total_relation_size('payhooks_deliveries')")
    operations = itertools.repeat(post(forged()), args.count)
    with served(app(url, refusals_per_minute)) as base:
        run: Run = drive([base], operations, workers=args.workers, until=lambda: False)
    found = written(url)
    print(f"{label}: {run.summary()}")
    print(
        f"    {found.rows:,} rows standing for {found.requests:,} requests over "
        f"{found.minutes} minute(s); table with indexes {empty:,} -> {found.table_bytes:,} bytes;"
        f" payhooks.health.summary {found.health_ms:.1f} ms, console health "
        f"{found.console_ms:.1f} ms"
    )
    return found


def megabytes(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000, help="forged requests per way")
    parser.add_argument("--workers", type=int, default=4, help="keep-alive clients")
    parser.add_argument("--rate", type=int, default=2_000, help="forged requests a second")
    args = parser.parse_args()
    with database() as url:
        before = flood(url, "every refusal a line", args.count, args)
        after = flood(url, "folded", deliverylog.REFUSALS_WRITTEN_PER_MINUTE, args)
    per_row = before.table_bytes / max(before.rows, 1)
    hour = args.rate * 3600
    folded_rows = (deliverylog.REFUSALS_WRITTEN_PER_MINUTE + 1) * 60
    print(
        f"an hour at {args.rate:,}/s ({hour:,} forged requests, one gateway, one answer), "
        f"at {per_row:,.0f} bytes a row: every refusal a line {hour:,} rows "
        f"~{megabytes(hour * per_row)}; folded {folded_rows:,} rows "
        f"~{megabytes(folded_rows * per_row)}"
    )
    print(f"rows written: {before.rows:,} -> {after.rows:,}")


if __name__ == "__main__":
    main()
