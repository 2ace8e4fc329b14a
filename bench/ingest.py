"""Ingest throughput and latency, side by side with PostgreSQL's own limit on the same SQL.

    .venv/bin/python bench/ingest.py [--clients 16] [--servers 2] [--seconds 10]
                                     [--max-rows 10000000] [--slots 8]

One run, one machine, one fresh database (DATABASE_URL's server when set, else embedded):
`payhooks serve` processes driven over loopback by a bounded load generator, and `pgbench`
running the same SQL transactions at the same concurrency. Every payhooks figure is printed
as a ratio to its pgbench baseline; absolute figures drift between runs, ratios much less.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import _pgbench
import psutil
import psycopg
from _load import KEYS, Http, Operation, Run, database, drive, post, servers

from payhooks.sim.gateway import Delivery, Gateway

SKUS = 1000
STOCK = 100_000_000
FLASH = {1: "FLASH-1", 8: "FLASH-8"}
TOKEN = {"authorization": "Bearer bench", "content-type": "application/json"}

SEED = [
    """INSERT INTO product_info (sku, name, price_paise)
       SELECT 'SKU' || g, 'bench', 100 FROM generate_series(1, %(skus)s) g""",
    """INSERT INTO product_stock (sku, slot, stock)
       SELECT 'SKU' || g, s, %(stock)s FROM generate_series(1, %(skus)s) g,
              generate_series(0, %(slots)s - 1) s""",
    """INSERT INTO carts (id, customer_email, amount_paise)
       SELECT 'cart_' || p || g, 'b@example.com', 100
       FROM generate_series(1, %(carts)s) g, unnest(ARRAY['b', 'p']) p""",
    """INSERT INTO cart_items (cart_id, sku, quantity, price_paise)
       SELECT 'cart_' || p || g, 'SKU' || (g %% %(skus)s + 1), 1, 100
       FROM generate_series(1, %(carts)s) g, unnest(ARRAY['b', 'p']) p""",
    """INSERT INTO checkouts (provider, gateway_order_id, cart_id)
       SELECT 'razorpay', 'order_' || p || g, 'cart_' || p || g
       FROM generate_series(1, %(carts)s) g, unnest(ARRAY['b', 'p']) p""",
]
SEED_FLASH = [
    "INSERT INTO product_info (sku, name, price_paise) VALUES (%(sku)s, 'flash sale', 100)",
    """INSERT INTO product_stock (sku, slot, stock)
       SELECT %(sku)s, s, %(stock)s FROM generate_series(0, %(slots)s - 1) s""",
]
SEED_DUPLICATES = """
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
                                payload_sha256, body, headers)
SELECT 'razorpay', 'evt_d' || g, 'payment.captured', 'processed', 'pay_d' || g, md5(g::text),
       convert_to(repeat('x', 700), 'UTF8'), '{}'
FROM generate_series(1, %s) g
"""
# Rows like a live delivery's: the same key shapes and a body of the same size.
PREFILL = """
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
                                payload_sha256, body, headers, order_ref)
SELECT 'razorpay', 'evt_' || md5('fill' || g), 'payment.captured', 'processed',
       'pay_fill' || g, md5(g::text), convert_to(repeat('x', 700), 'UTF8'), '{}',
       'ord_fill' || g
FROM generate_series(%s, %s) g
"""


@dataclass
class Row:
    scenario: str
    ops: float
    p50: float
    p99: float
    baseline: str
    baseline_tps: float
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.ops / self.baseline_tps if self.baseline_tps else float("nan")


class Cpu:
    """CPU seconds used by PostgreSQL, the payhooks servers and this load generator.

    PostgreSQL backends come and go with their connections (pgbench's exit with it), so a
    thread samples every process a few times a second and keeps each one's last reading.
    """

    def __init__(self, server_pids: list[int]) -> None:
        self.pids = server_pids
        self.seen: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.stop = threading.Event()

    def __enter__(self) -> Cpu:
        self.started = self._mine()
        self._sample()
        self.first = dict(self.seen)
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
        self._sample()
        self.used = {
            "postgres": sum(t - self.first.get(p, 0.0) for p, t in self.seen.items() if p > 0),
            "payhooks": sum(self.seen[-p] - self.first.get(-p, 0.0) for p in self.pids),
            "loadgen": self._mine() - self.started,
        }

    def per_op(self, ops: int) -> dict[str, float]:
        return {k: v / max(ops, 1) * 1e6 for k, v in self.used.items()}

    def _watch(self) -> None:
        while not self.stop.wait(0.2):
            self._sample()

    def _sample(self) -> None:
        for process in psutil.process_iter(["name"]):
            if _is_postgres(process):
                self._read(process.pid, process)
        for pid in self.pids:
            self._read(-pid, psutil.Process(pid))

    def _read(self, key: int, process: psutil.Process) -> None:
        try:
            times = process.cpu_times()
        except psutil.Error:
            return
        self.seen[key] = times.user + times.system

    @staticmethod
    def _mine() -> float:
        mine = os.times()  # pgbench is a child: its CPU shows once it has been waited for
        return mine.user + mine.system + mine.children_user + mine.children_system


def _is_postgres(process: psutil.Process) -> bool:
    return str(process.info.get("name") or "").startswith("postgres")


class Bench:
    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.url = url
        self.args = args
        self.gateway = Gateway(KEYS)
        self.next_cart = 1
        self.sent: list[Delivery] = []
        self.rows: list[Row] = []
        self.bases: list[str] = []
        self.server_pids: list[int] = []

    # --- load ------------------------------------------------------------------------------

    def captures(self) -> Iterator[Delivery]:
        while self.next_cart <= self.args.carts:
            n = self.next_cart
            self.next_cart += 1
            delivery = self.gateway.razorpay(
                "payment.captured", payment_id=f"pay_b{n}", order_id=f"order_b{n}", amount_paise=100
            )
            self.sent.append(delivery)
            yield delivery

    def mixed(self, share: float) -> Iterator[Delivery]:
        chooser = random.Random(5)
        fresh = self.captures()
        while True:
            if self.sent and chooser.random() < share:
                yield chooser.choice(self.sent)
            elif (delivery := next(fresh, None)) is not None:
                yield delivery
            else:
                return

    def resent(self) -> Iterator[Delivery]:
        chooser = random.Random(7)
        known = list(self.sent)
        while True:
            yield chooser.choice(known)

    def probes(self) -> Iterator[Operation]:
        """The web stack alone: what one request costs before any database work."""
        while True:
            yield lambda client: client.request("GET", "/healthz")[0]

    def purchases(self, sku: str) -> Iterator[Operation]:
        while True:
            yield lambda client: self.purchase(client, sku)

    def purchase(self, client: Http, sku: str) -> int:
        """Cart, checkout, capture: the whole purchase over the API and the webhook."""
        item = json.dumps(
            {"customer_email": "b@example.com", "items": [{"sku": sku, "quantity": 1}]}
        )
        status, body = client.request("POST", "/api/carts", item.encode(), TOKEN)
        if status != 201:
            return status
        cart = json.loads(body)
        status, body = client.request(
            "POST", f"/api/carts/{cart['cart_id']}/checkout", b'{"provider": "razorpay"}', TOKEN
        )
        if status != 201:
            return status
        reference = json.loads(body)["gateway_order_id"]
        capture = self.gateway.razorpay(
            "payment.captured",
            payment_id="pay_" + reference.removeprefix("order_"),
            order_id=reference,
            amount_paise=cart["amount_paise"],
        )
        return client.request("POST", capture.path, capture.body, capture.headers)[0]

    def measure(
        self, scenario: str, operations: Iterator[Operation], *, pace: float | None = None
    ) -> Run:
        stop_at = time.monotonic() + self.args.seconds
        with Cpu(self.server_pids) as cpu:
            run = drive(
                self.bases,
                operations,
                workers=self.args.clients,
                until=lambda: time.monotonic() > stop_at,
                pace=pace,
            )
        per_op = cpu.per_op(len(run.latencies))
        self.rows.append(
            Row(
                scenario=scenario,
                ops=len(run.latencies) / run.seconds,
                p50=run.percentile(50),
                p99=run.percentile(99),
                baseline="",
                baseline_tps=0.0,
                cpu=per_op,
            )
        )
        bad = {s: n for s, n in run.statuses.items() if s >= 300}
        print(f"  {scenario}: {run.summary()}" + (f"  NOT OK: {bad}" if bad else ""), flush=True)
        return run

    # --- pgbench ---------------------------------------------------------------------------

    def pgbench(self, scenario: str, script: list[str], base: int = 0) -> Row:
        """Run ``script``; its n-th transaction uses cart (or creates cart) ``base + n``."""
        with Cpu(self.server_pids) as cpu:
            result = _pgbench.run(
                self.url, script, clients=self.args.clients, seconds=self.args.seconds, base=base
            )
        per_op = cpu.per_op(result.transactions)
        row = Row(
            scenario=scenario,
            ops=result.tps,
            p50=float("nan"),
            p99=float("nan"),
            baseline="",
            baseline_tps=0.0,
            cpu=per_op,
        )
        self.rows.append(row)
        failed = f", {result.failed} failed" if result.failed else ""
        print(
            f"  {scenario}: {result.transactions} transactions, {result.tps:.0f}/s, "
            f"mean latency {result.latency_ms:.1f} ms{failed}",
            flush=True,
        )
        return row

    def compare(self, scenario: str, baseline: Row) -> None:
        for row in self.rows:
            if row.scenario == scenario:
                row.baseline, row.baseline_tps = baseline.scenario, baseline.ops


def seed(url: str, args: argparse.Namespace) -> None:
    values = {"skus": SKUS, "stock": STOCK, "slots": 1, "carts": args.carts}
    with psycopg.connect(url, autocommit=True) as conn:
        for sql in SEED:
            conn.execute(sql, values)
        for slots, sku in FLASH.items():
            for sql in SEED_FLASH:
                conn.execute(sql, {"sku": sku, "stock": STOCK // slots, "slots": slots})
        conn.execute(SEED_DUPLICATES, (args.duplicates,))
        conn.execute("VACUUM ANALYZE")


def prefill(url: str, have: int, want: int) -> float:
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        step = 1_000_000
        for first in range(have + 1, want + 1, step):
            conn.execute(PREFILL, (first, min(want, first + step - 1)))
        conn.execute("VACUUM ANALYZE processed_webhooks")
    return time.perf_counter() - started


def fill_levels(args: argparse.Namespace) -> list[int]:
    return sorted({min(level, args.max_rows) for level in (1_000_000, 10_000_000)} - {0})


def run_all(bench: Bench, args: argparse.Namespace) -> None:
    print("pgbench baselines and payhooks, one after the other:", flush=True)
    capture = bench.pgbench(
        "pgbench: capture transaction", _pgbench.capture("p", _pgbench.slot_take())
    )
    new = bench.measure("new captures", map(post, bench.captures()))
    bench.compare("new captures", capture)
    bench.measure("30% duplicates", map(post, bench.mixed(0.3)))
    bench.compare("30% duplicates", capture)
    bench.measure("duplicates only", map(post, bench.resent()))
    bench.compare("duplicates only", capture)
    bench.pgbench("pgbench: duplicate transaction", _pgbench.duplicate("d", args.duplicates))
    bench.measure("GET /healthz: web stack, no database", bench.probes())
    half = len(new.latencies) / new.seconds / 2
    bench.measure("new captures at half that rate", map(post, bench.captures()), pace=half)
    bench.compare("new captures at half that rate", capture)
    flash_sale(bench, args)
    prefilled(bench, args, capture)


def flash_sale(bench: Bench, args: argparse.Namespace) -> None:
    one_row = bench.pgbench(
        "pgbench: flash purchase, one stock row",
        _pgbench.purchase(FLASH[1], _pgbench.one_row_take()),
        base=10_000_000,
    )
    bench.pgbench(
        f"pgbench: flash purchase, {args.slots} slots",
        _pgbench.purchase(FLASH[args.slots], _pgbench.slot_take()),
        base=20_000_000,
    )
    for slots in (1, args.slots):
        scenario = f"flash sale, one SKU, {slots} slot{'s' * (slots > 1)}"
        bench.measure(scenario, bench.purchases(FLASH[slots]))
        bench.compare(scenario, one_row)


def prefilled(bench: Bench, args: argparse.Namespace, capture: Row) -> None:
    have = 0
    for level in fill_levels(args):
        seconds = prefill(bench.url, have, level)
        print(f"  processed_webhooks pre-filled to {level:,} rows in {seconds:.0f} s", flush=True)
        have = level
        scenario = f"new captures, {level:,} rows"
        bench.measure(scenario, map(post, bench.captures()))
        bench.compare(scenario, capture)


def report(bench: Bench, args: argparse.Namespace) -> None:
    print()
    print(
        f"{'scenario':<40} {'ops/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'baseline/s':>10} "
        f"{'ratio':>6}   CPU µs/op: postgres payhooks loadgen"
    )
    for row in bench.rows:
        cpu = row.cpu
        print(
            f"{row.scenario:<40} {row.ops:>7.0f} {row.p50:>7.1f} {row.p99:>7.1f} "
            f"{row.baseline_tps or float('nan'):>10.0f} {row.ratio:>6.2f}   "
            f"{cpu['postgres']:>8.0f} {cpu['payhooks']:>8.0f} {cpu['loadgen']:>7.0f}"
        )
    targets(bench, args)


def targets(bench: Bench, args: argparse.Namespace) -> None:
    by = {row.scenario: row for row in bench.rows}
    new, dup = by["new captures"], by["duplicates only"]
    half = by["new captures at half that rate"]
    flash = by[f"flash sale, one SKU, {args.slots} slots"]
    one = by["flash sale, one SKU, 1 slot"]
    pg_one = by["pgbench: flash purchase, one stock row"]
    checks: list[tuple[str, float, float, Callable[[float, float], bool]]] = [
        ("new captures / pgbench capture", new.ratio, 0.8, lambda v, t: v >= t),
        ("duplicates only / new captures", dup.ops / new.ops, 3.0, lambda v, t: v >= t),
        ("p99 ms at half the max throughput", half.p99, 50.0, lambda v, t: v < t),
        ("flash sale slots / payhooks one row", flash.ops / one.ops, 2.0, lambda v, t: v >= t),
        ("flash sale slots / pgbench one row", flash.ops / pg_one.ops, 2.0, lambda v, t: v >= t),
    ]
    levels = fill_levels(args)
    if levels:
        most = by[f"new captures, {levels[-1]:,} rows"]
        checks.append((f"{levels[-1]:,} rows / none", most.ops / new.ops, 0.9, lambda v, t: v >= t))
    print()
    for name, value, target, ok in checks:
        verdict = "met" if ok(value, target) else "NOT met"
        print(f"{name:<42} {value:>8.2f}  target {target:<5}  {verdict}")


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--clients", type=int, default=16, help="concurrent requests and pgbench clients"
    )
    parser.add_argument("--servers", type=int, default=2, help="payhooks serve processes")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each measurement")
    parser.add_argument("--max-rows", type=int, default=10_000_000, help="largest pre-fill")
    parser.add_argument("--slots", type=int, default=8, choices=[8], help="stock slots per SKU")
    parser.add_argument("--carts", type=int, default=0, help="seeded carts (default: enough)")
    parser.add_argument(
        "--duplicates", type=int, default=100_000, help="keys for pgbench duplicates"
    )
    args = parser.parse_args()
    args.carts = args.carts or int(3000 * args.seconds * 5)
    return args


def main() -> None:
    args = options()
    started = time.perf_counter()
    with database() as url:
        seed(url, args)
        print(f"seeded {args.carts:,} carts in {time.perf_counter() - started:.0f} s", flush=True)
        with servers(url, args.servers, PAYHOOKS_POOL_SIZE=str(args.clients)) as running:
            bench = Bench(url, args)
            bench.bases = [server.base for server in running]
            bench.server_pids = [server.pid for server in running]
            run_all(bench, args)
        report(bench, args)
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
