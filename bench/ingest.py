"""Ingest throughput and latency, side by side with PostgreSQL's own limit on the same SQL.

    .venv/bin/python bench/ingest.py [--clients 16] [--servers 2] [--seconds 10]
                                     [--max-rows 10000000] [--slots 8] [--quick]

Scenarios: new captures, duplicates, the web stack alone, whole flash-sale purchases, captures
of carts checked out before the run (one SKU against a hundred: webhook only), the same
deliveries through the FastAPI integration (``payhooks.fastapi.router``, bench/_library.py),
and new captures over a pre-filled table. A run ends with its correctness checks (``CHECKS``).

One run, one machine, one fresh database (DATABASE_URL's server when set, else embedded):
`payhooks serve` processes driven over loopback by a bounded load generator, and `pgbench`
running the same SQL transactions at the same concurrency. Every payhooks figure is printed
as a ratio to its pgbench baseline; absolute figures drift between runs, ratios much less.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import _pgbench
import psutil
import psycopg
from _load import KEYS, Http, Operation, Run, Server, database, drive, post, servers

from payhooks.sim.gateway import Delivery, Gateway

LIBRARY = [sys.executable, str(Path(__file__).with_name("_library.py"))]
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
]
# Carts ``cart_<prefix>n`` of one unit each, checked out as ``order_<prefix>n``: of SKU ``sku``
# when given, else of one of the first ``spread`` SKUs in turn.
SEED_CARTS = [
    """INSERT INTO carts (id, customer_email, amount_paise)
       SELECT 'cart_' || %(prefix)s || g, 'b@example.com', 100
       FROM generate_series(1, %(carts)s) g""",
    """INSERT INTO cart_items (cart_id, sku, quantity, price_paise)
       SELECT 'cart_' || %(prefix)s || g,
              coalesce(%(sku)s::text, 'SKU' || (g %% %(spread)s + 1)), 1, 100
       FROM generate_series(1, %(carts)s) g""",
    """INSERT INTO checkouts (provider, gateway_order_id, cart_id)
       SELECT 'razorpay', 'order_' || %(prefix)s || g, 'cart_' || %(prefix)s || g
       FROM generate_series(1, %(carts)s) g""",
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
# Rows like a live delivery's: the same key shapes, a body of the same size, a hash of its own.
PREFILL = """
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
                                payload_sha256, body, headers, order_ref)
SELECT 'razorpay', 'evt_' || md5('fill' || g), 'payment.captured', 'processed',
       'pay_fill' || g, md5('fill' || g), convert_to(repeat('x', 700), 'UTF8'), '{}',
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


def _seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


class Cpu:
    """CPU seconds used by PostgreSQL, the payhooks servers and this load generator.

    Only the bench's own server counts (its postmaster and that one's children): another
    cluster on the machine is someone else's load. Backends come and go with their connections
    (pgbench's exit with it), and a backend's CPU moves to its postmaster's children's times
    when the postmaster reaps it. So PostgreSQL's share is read twice, at the start and the end:
    the postmaster's own and its reaped children's times, plus each live child's; a child that
    was alive at the start and reaped since counts from its reading at the start.
    """

    def __init__(self, server_pids: list[int], postmaster: int) -> None:
        self.pids = server_pids
        self.postmaster = postmaster

    def __enter__(self) -> Cpu:
        self.started = self._mine()
        self.first_postmaster, self.first_children = self._postgres()
        self.first_servers = {pid: _seconds(psutil.Process(pid)) for pid in self.pids}
        return self

    def __exit__(self, *_: object) -> None:
        postmaster, children = self._postgres()
        gone = sum(t for pid, t in self.first_children.items() if pid not in children)
        self.used = {
            "postgres": postmaster
            - self.first_postmaster
            + sum(t - self.first_children.get(pid, 0.0) for pid, t in children.items())
            - gone,
            "payhooks": sum(
                _seconds(psutil.Process(pid)) - self.first_servers[pid] for pid in self.pids
            ),
            "loadgen": self._mine() - self.started,
        }

    def _postgres(self) -> tuple[float, dict[int, float]]:
        """The postmaster's CPU with its reaped children's, and each live child's."""
        times = psutil.Process(self.postmaster).cpu_times()
        own = times.user + times.system + times.children_user + times.children_system
        children: dict[int, float] = {}
        for process in psutil.Process(self.postmaster).children():
            with contextlib.suppress(psutil.Error):
                children[process.pid] = _seconds(process)
        return own, children

    @staticmethod
    def _mine() -> float:
        mine = os.times()  # pgbench is a child: its CPU shows once it has been waited for
        return mine.user + mine.system + mine.children_user + mine.children_system


def postmaster(url: str) -> int:
    """The pid of the server ``url`` reaches: the parent of a backend of it."""
    with psycopg.connect(url) as conn:  # asked while the backend lives: it exits with it
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return psutil.Process(int(row[0])).ppid()


def _merged(runs: list[tuple[Run, dict[str, float]]]) -> tuple[Run, dict[str, float]]:
    """Turns of one scenario as one run: their answers, their time and their CPU, summed."""
    statuses: Counter[int] = Counter()
    for run, _ in runs:
        statuses.update(run.statuses)
    whole = Run(
        latencies=[latency for run, _ in runs for latency in run.latencies],
        statuses=dict(statuses),
        seconds=sum(run.seconds for run, _ in runs),
    )
    return whole, _summed(cpu for _, cpu in runs)


def _summed(parts: Iterable[dict[str, float]]) -> dict[str, float]:
    """CPU seconds per side, added over turns."""
    total: Counter[str] = Counter()
    for part in parts:
        total.update(part)
    return dict(total)


class Bench:
    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.url = url
        self.args = args
        self.gateway = Gateway(KEYS)
        self.next_cart: dict[str, int] = {}
        self.sent: dict[str, list[Delivery]] = {}
        self.rows: list[Row] = []
        self.bases: list[str] = []
        self.server_pids: list[int] = []
        self.postmaster = postmaster(url)

    # --- load ------------------------------------------------------------------------------

    def captures(self, prefix: str = "b") -> Iterator[Delivery]:
        """First captures of the seeded carts ``cart_<prefix>n``, each cart once in a run."""
        sent = self.sent.setdefault(prefix, [])
        while (n := self.next_cart.get(prefix, 1)) <= CARTS[prefix].count(self.args):
            self.next_cart[prefix] = n + 1
            delivery = self.gateway.razorpay(
                "payment.captured",
                payment_id=f"pay_{prefix}{n}",
                order_id=f"order_{prefix}{n}",
                amount_paise=100,
            )
            sent.append(delivery)
            yield delivery

    def mixed(self, share: float) -> Iterator[Delivery]:
        chooser = random.Random(5)
        sent = self.sent.setdefault("b", [])
        fresh = self.captures()
        while True:
            if sent and chooser.random() < share:
                yield chooser.choice(sent)
            elif (delivery := next(fresh, None)) is not None:
                yield delivery
            else:
                return

    def resent(self, prefix: str = "b") -> Iterator[Delivery]:
        """Copies of the captures of ``prefix`` sent so far, chosen at random."""
        chooser = random.Random(7)
        while True:
            sent = self.sent.get(prefix)
            if not sent:
                raise RuntimeError(f"no capture of carts {prefix} sent yet: nothing to resend")
            yield chooser.choice(sent)

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
        self.settle()
        return self._record(scenario, *self._drive(operations, self.args.seconds, pace))

    def in_turns(
        self,
        scenarios: dict[str, Iterator[Operation]],
        baseline: tuple[str, list[str], str] | None = None,
    ) -> Row | None:
        """Scenarios to be compared with one another (and with a pgbench ``baseline``, given as
        its name, script and cart prefix), measured in TURNS turns of ``seconds / TURNS``
        each, in whole seconds (pgbench's ``-T`` takes no fraction), in an order reversed every
        other turn (A B C, C B A, A B C, C B A): a drift that runs one way through the run
        (tables growing, the seed's pages written out, the full-page writes after a checkpoint
        thinning out) then falls on each alike, not on whichever came later. The script's turn
        ``t`` numbers its carts from the ``t``-th of TURNS ranges of its prefix.
        """
        self.settle()
        seconds = float(max(1, int(self.args.seconds / TURNS)))
        spacing = 0 if baseline is None else CARTS[baseline[2]].count(self.args) // TURNS
        sides = [*scenarios, *([] if baseline is None else [PGBENCH])]
        ours: dict[str, list[tuple[Run, dict[str, float]]]] = {name: [] for name in scenarios}
        theirs: list[tuple[_pgbench.Result, dict[str, float]]] = []
        for turn in range(TURNS):
            for side in sides if turn % 2 == 0 else reversed(sides):
                if side != PGBENCH:
                    ours[side].append(self._drive(scenarios[side], seconds))
                    continue
                assert baseline is not None
                with Cpu(self.server_pids, self.postmaster) as cpu:
                    result = _pgbench.run(
                        self.url,
                        baseline[1],
                        clients=self.args.clients,
                        seconds=seconds,
                        base=turn * spacing,
                    )
                theirs.append((result, cpu.used))
        row = None
        if baseline is not None:
            transactions = sum(result.transactions for result, _ in theirs)
            if not transactions:
                raise RuntimeError(f"{baseline[0]}: pgbench ran no transaction")
            row = self._pgbench_row(
                baseline[0],
                transactions,
                sum(result.transactions / result.tps for result, _ in theirs),
                latency_ms=sum(r.latency_ms * r.transactions for r, _ in theirs) / transactions,
                failed=sum(result.failed for result, _ in theirs),
                used=_summed(cpu for _, cpu in theirs),
            )
        for name, runs in ours.items():
            self._record(name, *_merged(runs))
        return row

    def _drive(
        self, operations: Iterator[Operation], seconds: float, pace: float | None = None
    ) -> tuple[Run, dict[str, float]]:
        """``operations`` for ``seconds``: the run, and the CPU seconds each side used."""
        stop_at = time.monotonic() + seconds
        with Cpu(self.server_pids, self.postmaster) as cpu:
            run = drive(
                self.bases,
                operations,
                workers=self.args.clients,
                until=lambda: time.monotonic() > stop_at,
                pace=pace,
            )
        return run, cpu.used

    def _record(self, scenario: str, run: Run, used: dict[str, float]) -> Run:
        ops = max(len(run.latencies), 1)
        self.rows.append(
            Row(
                scenario=scenario,
                ops=len(run.latencies) / run.seconds,
                p50=run.percentile(50),
                p99=run.percentile(99),
                baseline="",
                baseline_tps=0.0,
                cpu={process: seconds / ops * 1e6 for process, seconds in used.items()},
            )
        )
        bad = {s: n for s, n in run.statuses.items() if s >= 300}
        print(f"  {scenario}: {run.summary()}" + (f"  NOT OK: {bad}" if bad else ""), flush=True)
        return run

    # --- pgbench ---------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Captures for a moment, measured by no one: servers just started prepare their
        statements (psycopg: on the fifth use per connection) and PL/pgSQL its plans (on the
        first call per session) while their first figure would be taken."""
        stop_at = time.monotonic() + WARM_UP_SECONDS
        drive(
            self.bases,
            map(post, self.captures("w")),
            workers=self.args.clients,
            until=lambda: time.monotonic() > stop_at,
        )

    def settle(self) -> None:
        """VACUUM ANALYZE before each figure (before each set of turns), payhooks' and
        pgbench's alike: each starts without the dead rows left before it, which autovacuum
        would otherwise visit during it.

        The ANALYZE also keeps cached plans honest: the seed analysed payments, orders and the
        rest while they were empty, and a session that plans its statements on those
        statistics keeps a sequential scan of payments in its cached plan, paid on every capture
        and growing with the table, until an analyze invalidates it (docs/performance.md).

        No CHECKPOINT here: after one, the first change to each page writes the whole page to
        the WAL, a cost that falls hardest on the slower of two runs (fewer operations share
        the same pages), and so on payhooks against pgbench.
        """
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")

    def pgbench(self, scenario: str, script: list[str], base: int = 0) -> Row:
        """Run ``script``; its n-th transaction uses cart (or creates cart) ``base + n``."""
        self.settle()
        with Cpu(self.server_pids, self.postmaster) as cpu:
            result = _pgbench.run(
                self.url, script, clients=self.args.clients, seconds=self.args.seconds, base=base
            )
        return self._pgbench_row(
            scenario,
            result.transactions,
            result.transactions / result.tps,
            latency_ms=result.latency_ms,
            failed=result.failed,
            used=cpu.used,
        )

    def _pgbench_row(
        self,
        scenario: str,
        transactions: int,
        seconds: float,
        *,
        latency_ms: float,
        failed: int,
        used: dict[str, float],
    ) -> Row:
        tps = transactions / seconds if seconds else 0.0
        row = Row(
            scenario=scenario,
            ops=tps,
            p50=float("nan"),
            p99=float("nan"),
            baseline="",
            baseline_tps=0.0,
            cpu={process: spent / max(transactions, 1) * 1e6 for process, spent in used.items()},
        )
        self.rows.append(row)
        failures = f", {failed} failed" if failed else ""
        print(
            f"  {scenario}: {transactions} transactions, {tps:.0f}/s, "
            f"mean latency {latency_ms:.1f} ms{failures}",
            flush=True,
        )
        return row

    def compare(self, scenario: str, baseline: Row) -> None:
        for row in self.rows:
            if row.scenario == scenario:
                row.baseline, row.baseline_tps = baseline.scenario, baseline.ops

    def row(self, scenario: str) -> Row:
        return next(row for row in self.rows if row.scenario == scenario)

    def attach(self, running: list[Server]) -> None:
        self.bases = [server.base for server in running]
        self.server_pids = [server.pid for server in running]


@dataclass(frozen=True)
class Carts:
    """Seeded carts of one prefix: of one SKU, or spread over the first ``spread`` SKUs."""

    share: float
    sku: str | None = None
    spread: int = SKUS

    def count(self, args: argparse.Namespace) -> int:
        return int(args.carts * self.share)


CARTS = {
    "b": Carts(share=1.0),  # new captures (several runs), also the 30% and the prefilled
    "p": Carts(share=1.0),  # pgbench's capture transaction
    "q": Carts(share=1.0),  # pgbench's capture function
    "s": Carts(share=0.4, spread=100),  # new captures over 100 SKUs, webhook only
    "o": Carts(share=0.4, sku=FLASH[1]),  # flash sale, one SKU, one stock row, webhook only
    "e": Carts(share=0.4, sku=FLASH[8]),  # flash sale, one SKU, 8 slots, webhook only
    "l": Carts(share=0.6),  # the library path (new captures, then at half that rate)
    "w": Carts(share=0.3),  # warm-ups: freshly started servers, before their first figure
}
WARM_UP_SECONDS = 2.0
TURNS = 4  # Bench.in_turns: turns per scenario
BEFORE_FILL = "new captures, before the pre-fill"
PGBENCH = "pgbench"


def seed(url: str, args: argparse.Namespace) -> None:
    values = {"skus": SKUS, "stock": STOCK, "slots": 1}
    with psycopg.connect(url, autocommit=True) as conn:
        for sql in SEED:
            conn.execute(sql, values)
        for slots, sku in FLASH.items():
            for sql in SEED_FLASH:
                conn.execute(sql, {"sku": sku, "stock": STOCK // slots, "slots": slots})
        for prefix, carts in CARTS.items():
            for sql in SEED_CARTS:
                conn.execute(
                    sql,
                    {
                        "prefix": prefix,
                        "carts": carts.count(args),
                        "sku": carts.sku,
                        "spread": carts.spread,
                    },
                )
        conn.execute(SEED_DUPLICATES, (args.duplicates,))
        conn.execute("VACUUM ANALYZE")
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")  # else the first figures pay for writing the seed out


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


def run_all(bench: Bench, args: argparse.Namespace) -> Row:
    print("pgbench baselines and payhooks:", flush=True)
    bench.pgbench("pgbench: capture function", _pgbench.first_capture("q"))
    bench.warm_up()
    capture = bench.in_turns(
        {
            "new captures": map(post, bench.captures()),
            "duplicates only": map(post, bench.resent()),
        },
        baseline=(
            "pgbench: capture transaction",
            _pgbench.capture("p", _pgbench.slot_take()),
            "p",
        ),
    )
    assert capture is not None
    new = bench.row("new captures")
    bench.compare("new captures", capture)
    bench.compare("duplicates only", capture)
    bench.measure("30% duplicates", map(post, bench.mixed(0.3)))
    bench.compare("30% duplicates", capture)
    bench.pgbench("pgbench: duplicate transaction", _pgbench.duplicate("d", args.duplicates))
    bench.measure("GET /healthz: web stack, no database", bench.probes())
    half = new.ops / 2
    bench.measure("new captures at half that rate", map(post, bench.captures()), pace=half)
    bench.compare("new captures at half that rate", capture)
    flash_sale(bench, args)
    webhook_only(bench, args)
    return capture


def webhook_only(bench: Bench, args: argparse.Namespace) -> None:
    """Captures of carts checked out before the run: one SKU against a hundred, in turns."""
    spread = "new captures, 100 SKUs"
    hot = {
        prefix: f"flash sale, one SKU, {slots} slot{'s' * (slots > 1)}, webhook only"
        for prefix, slots in (("o", 1), ("e", args.slots))
    }
    bench.in_turns(
        {spread: map(post, bench.captures("s"))}
        | {name: map(post, bench.captures(prefix)) for prefix, name in hot.items()}
    )
    for name in hot.values():
        bench.compare(name, bench.row(spread))


def library(bench: Bench, capture: Row) -> None:
    """The same deliveries through ``payhooks.fastapi.router`` in a minimal app."""
    bench.warm_up()
    new = bench.measure("library: new captures", map(post, bench.captures("l")))
    bench.compare("library: new captures", capture)
    bench.measure("library: duplicates only", map(post, bench.resent("l")))
    bench.compare("library: duplicates only", capture)
    half = len(new.latencies) / new.seconds / 2
    scenario = "library: new captures at half that rate"
    bench.measure(scenario, map(post, bench.captures("l")), pace=half)
    bench.compare(scenario, capture)


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
    """New captures over a pre-filled table, against new captures on the same servers just
    before the pre-fill: a run's first figures, taken minutes earlier on smaller tables, would
    charge the pre-fill with everything else that grew since."""
    if not fill_levels(args):
        return
    bench.warm_up()
    bench.measure(BEFORE_FILL, map(post, bench.captures()))
    bench.compare(BEFORE_FILL, capture)
    have = 0
    for level in fill_levels(args):
        seconds = prefill(bench.url, have, level)
        print(f"  processed_webhooks pre-filled to {level:,} rows in {seconds:.0f} s", flush=True)
        have = level
        scenario = f"new captures, {level:,} rows"
        bench.warm_up()
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
    spread = by["new captures, 100 SKUs"]
    hot = by[f"flash sale, one SKU, {args.slots} slots, webhook only"]
    lib, lib_dup = by["library: new captures"], by["library: duplicates only"]
    lib_half = by["library: new captures at half that rate"]
    checks: list[tuple[str, float, float, Callable[[float, float], bool]]] = [
        ("new captures / pgbench capture", new.ratio, 0.5, lambda v, t: v >= t),
        ("duplicates only / new captures", dup.ops / new.ops, 3.0, lambda v, t: v >= t),
        ("p99 ms at half the max throughput", half.p99, 50.0, lambda v, t: v <= t),
        ("flash one SKU / 100 SKUs, webhook only", hot.ops / spread.ops, 0.9, lambda v, t: v >= t),
        ("library: new captures / pgbench capture", lib.ratio, 0.5, lambda v, t: v >= t),
        ("library: duplicates / new captures", lib_dup.ops / lib.ops, 3.0, lambda v, t: v >= t),
        ("library: p99 ms at half the max", lib_half.p99, 50.0, lambda v, t: v <= t),
        ("flash sale slots / payhooks one row", flash.ops / one.ops, 2.0, lambda v, t: v >= t),
        ("flash sale slots / pgbench one row", flash.ops / pg_one.ops, 2.0, lambda v, t: v >= t),
    ]
    levels = fill_levels(args)
    if levels:
        most, before = by[f"new captures, {levels[-1]:,} rows"], by[BEFORE_FILL]
        checks.append(
            (f"{levels[-1]:,} rows / none", most.ops / before.ops, 0.9, lambda v, t: v >= t)
        )
    print()
    for name, value, target, ok in checks:
        verdict = "met" if ok(value, target) else "NOT met"
        print(f"{name:<42} {value:>8.2f}  target {target:<5}  {verdict}")
    function = by["pgbench: capture function"]
    print(
        f"\nnew captures / pgbench capture function (the SQL they now run): "
        f"{new.ops / function.ops:.2f}"
    )
    print(
        f"ceiling of new captures / pgbench capture (a handler costing nothing): "
        f"{ceiling(bench):.2f}"
    )


def ceiling(bench: Bench) -> float:
    """What a webhook handler costing nothing would reach, as a ratio to pgbench: the CPU of a
    pgbench capture (PostgreSQL and client) over PostgreSQL's share of it plus the web stack's
    (GET /healthz, server and client). A ratio of CPU per operation, so it holds whatever share
    of the cores the run gets (docs/performance.md)."""
    capture = bench.row("pgbench: capture transaction")
    stack = bench.row("GET /healthz: web stack, no database")
    pgbench = capture.cpu["postgres"] + capture.cpu["loadgen"]
    return pgbench / (capture.cpu["postgres"] + stack.cpu["payhooks"] + stack.cpu["loadgen"])


# What every run must leave behind, whatever its speed: each a count of rows that break it.
CHECKS = {
    "orders not confirmed": "SELECT count(*) FROM orders WHERE status <> 'confirmed'",
    "payments flagged": "SELECT count(*) FROM payments WHERE cardinality(flags) > 0",
    "captures recorded processed without their order": """
        SELECT count(*) FROM processed_webhooks w LEFT JOIN orders o ON o.id = w.order_ref
        WHERE w.outcome = 'processed' AND w.event_type = 'payment.captured'
          AND w.payment_id NOT LIKE 'pay_fill%' AND w.payment_id NOT LIKE 'pay_d%'
          AND o.id IS NULL""",
    "orders without the record of the delivery that placed them": """
        SELECT count(*) FROM orders o
        LEFT JOIN processed_webhooks w ON w.provider = o.provider AND w.event_id = o.event_id
        WHERE w.event_id IS NULL""",
    "orders without one ledger row": """
        SELECT count(*) FROM orders o
        LEFT JOIN (SELECT order_id, count(*) AS n FROM inventory_movements GROUP BY order_id) m
               ON m.order_id = o.id
        WHERE m.n IS DISTINCT FROM 1""",
    "orders without their email": """
        SELECT count(*) FROM orders o
        LEFT JOIN outbox x ON x.dedupe_key = 'order_confirmation:' || o.id
        WHERE x.id IS NULL""",
    "SKUs whose stock and ledger disagree": f"""
        SELECT count(*) FROM products p
        LEFT JOIN (SELECT sku, sum(delta) AS moved FROM inventory_movements GROUP BY sku) m
               ON m.sku = p.sku
        WHERE p.stock - coalesce(m.moved, 0) <> {STOCK}""",
}


def check(url: str) -> list[str]:
    """Every correctness check of the run, as the list of those that fail."""
    with psycopg.connect(url, autocommit=True) as conn:
        counts = {name: conn.execute(sql.encode()).fetchone() for name, sql in CHECKS.items()}
    return [f"{name}: {row[0]}" for name, row in counts.items() if row and row[0]]


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
    parser.add_argument(
        "--quick", action="store_true", help="only the web stack, new captures, duplicates"
    )
    args = parser.parse_args()
    args.carts = args.carts or int(3000 * args.seconds * 6)
    return args


def quick(url: str, args: argparse.Namespace) -> None:
    """Two rounds of the web stack, new captures and duplicates: CPU per operation, the
    figure that tells one build from another on a shared machine (``--quick``)."""
    bench = Bench(url, args)
    with servers(url, args.servers, PAYHOOKS_POOL_SIZE=str(args.clients)) as running:
        bench.attach(running)
        bench.warm_up()
        for _ in range(2):
            bench.measure("GET /healthz: web stack, no database", bench.probes())
            bench.measure("new captures", map(post, bench.captures()))
            bench.measure("duplicates only", map(post, bench.resent()))
    print(f"\n{'scenario':<40} {'ops/s':>7} {'p99 ms':>7}   CPU µs/op: postgres payhooks loadgen")
    for row in bench.rows:
        cpu = row.cpu
        print(
            f"{row.scenario:<40} {row.ops:>7.0f} {row.p99:>7.1f}   "
            f"{cpu['postgres']:>8.0f} {cpu['payhooks']:>8.0f} {cpu['loadgen']:>7.0f}"
        )


def main() -> None:
    args = options()
    started = time.perf_counter()
    size = {"PAYHOOKS_POOL_SIZE": str(args.clients)}
    if args.quick:
        with database() as url:
            seed(url, args)
            quick(url, args)
        return
    with database() as url:
        seed(url, args)
        print(f"seeded carts in {time.perf_counter() - started:.0f} s", flush=True)
        bench = Bench(url, args)
        with servers(url, args.servers, **size) as running:
            bench.attach(running)
            capture = run_all(bench, args)
        with servers(url, args.servers, LIBRARY, **size) as running:
            bench.attach(running)
            library(bench, capture)
        with servers(url, args.servers, **size) as running:
            bench.attach(running)
            prefilled(bench, args, capture)
        problems = check(url)
        report(bench, args)
        print("\ncorrectness: " + ("; ".join(problems) if problems else "every check holds"))
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
