"""Ingest throughput and latency, side by side with PostgreSQL's own limit on the same SQL.

    .venv/bin/python bench/ingest.py [--clients 16] [--servers 2] [--seconds 10]
                                     [--max-rows 10000000] [--slots 8]
                                     [--quick | --versus | --costs]

Scenarios: new captures, duplicates, the web stack alone, whole flash-sale purchases, captures
of carts checked out before the run (one SKU against a hundred: webhook only), the same
deliveries through the FastAPI integration (``payhooks.fastapi.router``, bench/_library.py),
new captures and duplicates beside the seed's design written plainly (bench/_plain.py) at 8
and 32 connections, and new captures over a pre-filled table. A run ends with its correctness
checks (``CHECKS``).

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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _pgbench
import _plain
import _statements
import psutil
import psycopg
from _load import KEYS, Http, Operation, Run, Server, database, drive, post, servers

from payhooks.sim.gateway import Delivery, Gateway

LIBRARY = [sys.executable, str(Path(__file__).with_name("_library.py"))]
PLAIN = [sys.executable, str(Path(__file__).with_name("_plain.py"))]
LEVELS = (8, 32)
"""The connections at which payhooks and the plain implementation are compared."""
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
    # What the smallest transaction sells (_pgbench.SMALLEST_SKU): one stock row each.
    """INSERT INTO product_info (sku, name, price_paise)
       SELECT %(lean)s || g, 'bench', 100 FROM generate_series(1, %(skus)s) g""",
    """INSERT INTO product_stock (sku, slot, stock)
       SELECT %(lean)s || g, 0, %(stock)s FROM generate_series(1, %(skus)s) g""",
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
    wal: float = float("nan")
    """WAL bytes written per operation (the whole server's, as the CPU)."""
    smallest_tps: float = 0.0

    @property
    def ratio(self) -> float:
        return self.ops / self.baseline_tps if self.baseline_tps else float("nan")

    @property
    def smallest_ratio(self) -> float:
        """To the smallest transaction that does the job (``_pgbench.smallest``)."""
        return self.ops / self.smallest_tps if self.smallest_tps else float("nan")


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

    def __init__(
        self, server_pids: list[int], postmaster: int, lsn: Callable[[], int] | None = None
    ) -> None:
        self.pids = server_pids
        self.postmaster = postmaster
        self.lsn = lsn

    def __enter__(self) -> Cpu:
        self.first_lsn = self.lsn() if self.lsn else 0
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
        if self.lsn:
            self.used[WAL] = self.lsn() - self.first_lsn

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


WAL = "wal bytes"
"""The key of ``Cpu.used`` that counts bytes of WAL, not seconds."""


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


def _per_op(used: dict[str, float], ops: int) -> dict[str, float]:
    """CPU µs per operation, by side."""
    return {side: seconds / ops * 1e6 for side, seconds in used.items() if side != WAL}


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
        self.meter = psycopg.connect(url, autocommit=True)
        self.clients = args.clients
        """Concurrent requests, and pgbench clients: ``--clients``, or the level ``versus``
        measures."""
        self.versus: list[Versus] = []

    def cpu(self, pids: list[int] | None = None) -> Cpu:
        """CPU and WAL of one figure, from its start to its end; the servers' are those of
        ``pids`` when given, else the attached ones'."""
        return Cpu(self.server_pids if pids is None else pids, self.postmaster, self.lsn)

    def lsn(self) -> int:
        """Bytes of WAL written so far by the whole server."""
        row = self.meter.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()
        assert row is not None
        return int(row[0])

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
        baselines: Sequence[Baseline] = (),
        on: dict[str, list[Server]] | None = None,
    ) -> dict[str, Row]:
        """Scenarios to be compared with one another and with pgbench ``baselines``, measured
        in TURNS turns of ``seconds / TURNS`` each, in whole seconds (pgbench's ``-T`` takes no
        fraction), in an order reversed every other turn (A B C, C B A, A B C, C B A): a drift
        that runs one way through the run (tables growing, the seed's pages written out, the
        full-page writes after a checkpoint thinning out) then falls on each alike, not on
        whichever came later. The baselines' rows, by name. A scenario named in ``on`` is
        driven against those servers (and their CPU counted), the others against the attached.
        """
        self.settle()
        seconds = float(max(1, int(self.args.seconds / TURNS)))
        sides: list[str | Baseline] = [*scenarios, *baselines]
        ours: dict[str, list[tuple[Run, dict[str, float]]]] = {name: [] for name in scenarios}
        theirs: dict[str, list[tuple[_pgbench.Result, dict[str, float]]]] = {
            baseline.name: [] for baseline in baselines
        }
        for turn in range(TURNS):
            for side in sides if turn % 2 == 0 else reversed(sides):
                if isinstance(side, Baseline):
                    theirs[side.name].append(self._pgbench_turn(side, turn, seconds))
                else:
                    where = (on or {}).get(side)
                    ours[side].append(self._drive(scenarios[side], seconds, on=where))
        rows = {name: self._turns_row(name, turns) for name, turns in theirs.items()}
        for name, runs in ours.items():
            self._record(name, *_merged(runs))
        return rows

    def _pgbench_turn(
        self, baseline: Baseline, turn: int, seconds: float
    ) -> tuple[_pgbench.Result, dict[str, float]]:
        """Turn ``turn`` of ``baseline``: its carts from the turn's range of its part."""
        parts = TURNS * baseline.parts
        spacing = CARTS[baseline.prefix].count(self.args) // parts
        with self.cpu() as cpu:
            result = _pgbench.run(
                self.url,
                baseline.script,
                clients=self.clients,
                seconds=seconds,
                base=(baseline.part * TURNS + turn) * spacing,
            )
        return result, cpu.used

    def _turns_row(self, name: str, turns: list[tuple[_pgbench.Result, dict[str, float]]]) -> Row:
        transactions = sum(result.transactions for result, _ in turns)
        if not transactions:
            raise RuntimeError(f"{name}: pgbench ran no transaction")
        return self._pgbench_row(
            name,
            transactions,
            sum(result.transactions / result.tps for result, _ in turns),
            latency_ms=sum(r.latency_ms * r.transactions for r, _ in turns) / transactions,
            failed=sum(result.failed for result, _ in turns),
            used=_summed(cpu for _, cpu in turns),
        )

    def _drive(
        self,
        operations: Iterator[Operation],
        seconds: float,
        pace: float | None = None,
        on: list[Server] | None = None,
    ) -> tuple[Run, dict[str, float]]:
        """``operations`` for ``seconds`` against the attached servers, or those ``on``: the
        run, and the CPU seconds each side used."""
        stop_at = time.monotonic() + seconds
        bases = self.bases if on is None else [server.base for server in on]
        with self.cpu(None if on is None else [server.pid for server in on]) as cpu:
            run = drive(
                bases,
                operations,
                workers=self.clients,
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
                cpu=_per_op(used, ops),
                wal=used.get(WAL, float("nan")) / ops,
            )
        )
        bad = {s: n for s, n in run.statuses.items() if s >= 300}
        print(f"  {scenario}: {run.summary()}" + (f"  NOT OK: {bad}" if bad else ""), flush=True)
        return run

    # --- pgbench ---------------------------------------------------------------------------

    def warm_up(self, on: list[Server] | None = None, prefix: str = "w") -> None:
        """Captures for a moment, measured by no one: servers just started prepare their
        statements (psycopg: on the fifth use per connection) and PL/pgSQL its plans (on the
        first call per session) while their first figure would be taken. The attached
        servers, or those ``on`` (the plain implementation's, on its carts ``prefix``)."""
        stop_at = time.monotonic() + WARM_UP_SECONDS
        drive(
            self.bases if on is None else [server.base for server in on],
            map(post, self.captures(prefix)),
            workers=self.clients,
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
        with self.cpu() as cpu:
            result = _pgbench.run(
                self.url, script, clients=self.clients, seconds=self.args.seconds, base=base
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
            cpu=_per_op(used, max(transactions, 1)),
            wal=used.get(WAL, float("nan")) / max(transactions, 1),
        )
        self.rows.append(row)
        failures = f", {failed} failed" if failed else ""
        print(
            f"  {scenario}: {transactions} transactions, {tps:.0f}/s, "
            f"mean latency {latency_ms:.1f} ms{failures}",
            flush=True,
        )
        return row

    def compare(self, scenario: str, baseline: Row | None, smallest: Row | None = None) -> None:
        """The latest figure of ``scenario``, with ``baseline`` and ``smallest`` when given."""
        row = next(row for row in reversed(self.rows) if row.scenario == scenario)
        if baseline is not None:
            row.baseline, row.baseline_tps = baseline.scenario, baseline.ops
        if smallest is not None:
            row.smallest_tps = smallest.ops

    def row(self, scenario: str) -> Row:
        return next(row for row in self.rows if row.scenario == scenario)

    def attach(self, running: list[Server]) -> None:
        self.bases = [server.base for server in running]
        self.server_pids = [server.pid for server in running]


COST_PREFIXES = ("xa", "xb", "xc", "xd", "xe", "xf", "xg", "xh", "xi")
"""The carts of the transactions ``--costs`` prices, one prefix each (``costs_of``)."""


@dataclass(frozen=True)
class Baseline:
    """A pgbench script measured in turns beside payhooks (``Bench.in_turns``), on the carts
    of ``prefix``: the ``part``-th of ``parts`` equal shares of them, when measured more than
    once in a run."""

    name: str
    script: list[str]
    prefix: str
    part: int = 0
    parts: int = 1


@dataclass(frozen=True)
class Carts:
    """Seeded carts of one prefix: of one SKU, or spread over the first ``spread`` SKUs."""

    share: float
    sku: str | None = None
    spread: int = SKUS
    plain: bool = False
    """In the plain implementation's shop (``bench/_plain.py``), not payhooks'."""

    def count(self, args: argparse.Namespace) -> int:
        return int(args.carts * self.share)


CARTS = {
    "b": Carts(share=1.0),  # new captures (several runs), also the 30% and the prefilled
    "p": Carts(share=1.0),  # pgbench's capture transaction
    "q": Carts(share=1.0),  # pgbench's capture function
    "m": Carts(share=1.0),  # pgbench's smallest transaction (it reads no cart: any SKU)
    "s": Carts(share=0.4, spread=100),  # new captures over 100 SKUs, webhook only
    "o": Carts(share=0.4, sku=FLASH[1]),  # flash sale, one SKU, one stock row, webhook only
    "e": Carts(share=0.4, sku=FLASH[8]),  # flash sale, one SKU, 8 slots, webhook only
    "l": Carts(share=0.6),  # the library path (new captures, then at half that rate)
    "w": Carts(share=0.3),  # warm-ups: freshly started servers, before their first figure
    "y": Carts(share=1.0, plain=True),  # the plain implementation's new captures
    "v": Carts(share=0.3, plain=True),  # its warm-ups
    "z": Carts(share=1.0, plain=True),  # pgbench's plain transaction
} | {prefix: Carts(share=0.4) for prefix in COST_PREFIXES}
PLAIN_PREFIXES = {"y", "v", "z"}
WARM_UP_SECONDS = 2.0
TURNS = 4  # Bench.in_turns: turns per scenario
BEFORE_FILL = "new captures, before the pre-fill"


def seeded(args: argparse.Namespace) -> dict[str, Carts]:
    """The carts a run uses: ``--quick`` and ``--costs`` seed only theirs."""
    if args.versus:
        wanted = {"b", "w", *PLAIN_PREFIXES}
    elif args.quick:
        wanted = {"b", "w", "p", "m", *PLAIN_PREFIXES}
    elif args.costs:
        wanted = {"b", "w", *COST_PREFIXES, *PLAIN_PREFIXES}
    else:
        wanted = set(CARTS) - set(COST_PREFIXES)
    return {prefix: carts for prefix, carts in CARTS.items() if prefix in wanted}


def seed(url: str, args: argparse.Namespace) -> None:
    values = {"skus": SKUS, "stock": STOCK, "slots": 1, "lean": _pgbench.SMALLEST_SKU}
    with psycopg.connect(url, autocommit=True) as conn:
        for sql in SEED:
            conn.execute(sql, values)
        for slots, sku in FLASH.items():
            for sql in SEED_FLASH:
                conn.execute(sql, {"sku": sku, "stock": STOCK // slots, "slots": slots})
        conn.execute(_plain.SCHEMA.encode())
        conn.execute(_plain.SEED_PRODUCTS, values)
        for prefix, carts in seeded(args).items():
            for sql in _plain.SEED_CARTS if carts.plain else SEED_CARTS:
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


CAPTURE = "pgbench: capture transaction"
SMALLEST = "pgbench: smallest transaction"
FUNCTION = "pgbench: capture function"


def yardsticks(part: int = 0, parts: int = 1) -> list[Baseline]:
    """The general path's transaction and the smallest one that does the job."""
    return [
        Baseline(CAPTURE, _pgbench.capture("p", _pgbench.slot_take()), "p", part, parts),
        Baseline(SMALLEST, _pgbench.smallest("m", SKUS), "m", part, parts),
    ]


def run_all(bench: Bench, args: argparse.Namespace) -> tuple[Row, Row]:
    print("pgbench baselines and payhooks:", flush=True)
    bench.pgbench(FUNCTION, _pgbench.first_capture("q"))
    bench.warm_up()
    rows = bench.in_turns(
        {
            "new captures": map(post, bench.captures()),
            "duplicates only": map(post, bench.resent()),
        },
        yardsticks(),
    )
    capture, smallest = rows[CAPTURE], rows[SMALLEST]
    new = bench.row("new captures")
    bench.compare("new captures", capture, smallest)
    bench.compare("duplicates only", capture, smallest)
    bench.measure("30% duplicates", map(post, bench.mixed(0.3)))
    bench.compare("30% duplicates", capture, smallest)
    bench.pgbench("pgbench: duplicate transaction", _pgbench.duplicate("d", args.duplicates))
    bench.measure("GET /healthz: web stack, no database", bench.probes())
    half = new.ops / 2
    bench.measure("new captures at half that rate", map(post, bench.captures()), pace=half)
    bench.compare("new captures at half that rate", capture, smallest)
    flash_sale(bench, args)
    webhook_only(bench, args)
    return capture, smallest


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


def library(bench: Bench, capture: Row, smallest: Row) -> None:
    """The same deliveries through ``payhooks.fastapi.router`` in a minimal app."""
    bench.warm_up()
    new = bench.measure("library: new captures", map(post, bench.captures("l")))
    bench.compare("library: new captures", capture, smallest)
    bench.measure("library: duplicates only", map(post, bench.resent("l")))
    bench.compare("library: duplicates only", capture, smallest)
    half = len(new.latencies) / new.seconds / 2
    scenario = "library: new captures at half that rate"
    bench.measure(scenario, map(post, bench.captures("l")), pace=half)
    bench.compare(scenario, capture, smallest)


@dataclass(frozen=True)
class Versus:
    """One figure of payhooks beside the plain implementation's, measured in the same turns,
    with pgbench of the plain transaction."""

    what: str
    clients: int
    payhooks: Row
    plain: Row
    pgbench: Row


def versus(bench: Bench, args: argparse.Namespace) -> None:
    """payhooks against the plain implementation (``bench/_plain.py``) at each of ``LEVELS``
    connections: new captures and duplicates, each payhooks figure beside its plain one, with
    pgbench of the plain transaction, in turns. Each side on its own carts and servers (as many
    processes, the same pool size), driven by the same load generator with fresh signed
    deliveries; duplicates are copies of the side's own captures."""
    plain_env = {_plain.SECRET_VARIABLE: KEYS.razorpay}
    for part, clients in enumerate(LEVELS):
        bench.clients = clients
        pool = str(clients)
        with (
            servers(bench.url, args.servers, PAYHOOKS_POOL_SIZE=pool) as ours,
            servers(bench.url, args.servers, [*PLAIN, "--pool", pool], **plain_env) as theirs,
        ):
            bench.attach(ours)
            bench.warm_up()
            bench.warm_up(theirs, "v")
            names = {
                (what, side): f"{side}: {what} @{clients}"
                for what in ("new captures", "duplicates")
                for side in ("payhooks", "plain")
            }
            operations = {
                ("new captures", "payhooks"): map(post, bench.captures("b")),
                ("new captures", "plain"): map(post, bench.captures("y")),
                ("duplicates", "payhooks"): map(post, bench.resent("b")),
                ("duplicates", "plain"): map(post, bench.resent("y")),
            }
            yardstick = f"pgbench: plain transaction @{clients}"
            rows = bench.in_turns(
                {names[key]: operations[key] for key in names},
                [Baseline(yardstick, _pgbench.plain("z"), "z", part, len(LEVELS))],
                on={name: ours if key[1] == "payhooks" else theirs for key, name in names.items()},
            )
            for what in ("new captures", "duplicates"):
                bench.versus.append(
                    Versus(
                        what=what,
                        clients=clients,
                        payhooks=bench.row(names[(what, "payhooks")]),
                        plain=bench.row(names[(what, "plain")]),
                        pgbench=rows[yardstick],
                    )
                )
    bench.clients = args.clients


CONNECTIONS = 300
"""What ``versus`` needs at its most: both sides' servers (payhooks opens several pools per
process) and pgbench's clients at once, at 32 connections; PostgreSQL's default is 100."""


def room(url: str) -> None:
    """Room for ``versus``'s connections on the bench's own server (a restart, before any
    figure), or a note that a server named by DATABASE_URL may refuse some."""
    why_not = _statements.make_room(url, CONNECTIONS)
    if why_not:
        print(f"  note: {why_not}; {CONNECTIONS} wanted at {max(LEVELS)} connections", flush=True)


def versus_report(bench: Bench) -> None:
    """The comparison ``versus`` measured: rates, and CPU µs per request by process."""
    print(
        f"\n{'payhooks against plain':<20} {'payhooks/s':>10} {'plain/s':>8} {'ratio':>6} "
        f"{'pgbench/s':>9}   µs/req server: {'payhooks':>8} {'plain':>6}"
        f"   postgres: {'payhooks':>8} {'plain':>6} {'pgbench':>7}"
    )
    for each in bench.versus:
        ours, theirs, pg = each.payhooks, each.plain, each.pgbench
        print(
            f"{each.what + ' @' + str(each.clients):<20} {ours.ops:>10.0f} {theirs.ops:>8.0f} "
            f"{ours.ops / theirs.ops:>6.2f} {pg.ops:>9.0f}                  "
            f"{ours.cpu['payhooks']:>8.0f} {theirs.cpu['payhooks']:>6.0f}"
            f"             {ours.cpu['postgres']:>8.0f} {theirs.cpu['postgres']:>6.0f}"
            f" {pg.cpu['postgres']:>7.0f}"
        )
    print("(ratio: payhooks/plain; µs/req: CPU time per request, by process)")


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


def prefilled(bench: Bench, args: argparse.Namespace, capture: Row, smallest: Row) -> None:
    """New captures over a pre-filled table, against new captures on the same servers just
    before the pre-fill: a run's first figures, taken minutes earlier on smaller tables, would
    charge the pre-fill with everything else that grew since."""
    if not fill_levels(args):
        return
    bench.warm_up()
    bench.measure(BEFORE_FILL, map(post, bench.captures()))
    bench.compare(BEFORE_FILL, capture, smallest)
    have = 0
    for level in fill_levels(args):
        seconds = prefill(bench.url, have, level)
        print(f"  processed_webhooks pre-filled to {level:,} rows in {seconds:.0f} s", flush=True)
        have = level
        scenario = f"new captures, {level:,} rows"
        bench.warm_up()
        bench.measure(scenario, map(post, bench.captures()))
        bench.compare(scenario, capture, smallest)


def report(bench: Bench, args: argparse.Namespace) -> None:
    print()
    print(
        f"{'scenario':<40} {'ops/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'baseline/s':>10} "
        f"{'ratio':>6} {'smallest':>8}   CPU µs/op: postgres payhooks loadgen   WAL B/op"
    )
    for row in bench.rows:
        cpu = row.cpu
        print(
            f"{row.scenario:<40} {row.ops:>7.0f} {row.p50:>7.1f} {row.p99:>7.1f} "
            f"{row.baseline_tps or float('nan'):>10.0f} {row.ratio:>6.2f} "
            f"{row.smallest_ratio:>8.2f}   "
            f"{cpu['postgres']:>8.0f} {cpu['payhooks']:>8.0f} {cpu['loadgen']:>7.0f}"
            f"   {row.wal:>8.0f}"
        )
    targets(bench, args)
    versus_report(bench)


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
    function = by[FUNCTION]
    print(
        f"\nnew captures / pgbench capture function (the SQL they now run): "
        f"{new.ops / function.ops:.2f}"
    )
    print(
        f"new captures / pgbench smallest transaction (four statements, no stored body): "
        f"{new.smallest_ratio:.2f}"
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
    capture = bench.row(CAPTURE)
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
        WHERE m.n IS DISTINCT FROM 1
          AND o.cart_id NOT LIKE 'cart_m%'  -- the smallest transaction's: no ledger""",
    "orders without their email": """
        SELECT count(*) FROM orders o
        LEFT JOIN outbox x ON x.dedupe_key = 'order_confirmation:' || o.id
        WHERE x.id IS NULL""",
    "SKUs whose stock and ledger disagree": f"""
        SELECT count(*) FROM products p
        LEFT JOIN (SELECT sku, sum(delta) AS moved FROM inventory_movements GROUP BY sku) m
               ON m.sku = p.sku
        WHERE p.stock - coalesce(m.moved, 0) <> {STOCK}
          AND p.sku NOT LIKE '{_pgbench.SMALLEST_SKU}%'""",
}


def check(url: str) -> list[str]:
    """Every correctness check of the run, the plain implementation's too, as the list of
    those that fail."""
    with psycopg.connect(url, autocommit=True) as conn:
        counts = {
            name: conn.execute(sql.encode()).fetchone()
            for name, sql in (CHECKS | _plain.CHECKS).items()
        }
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
        "--quick",
        action="store_true",
        help="only the web stack, new captures, duplicates, and the two pgbench yardsticks",
    )
    parser.add_argument(
        "--versus",
        action="store_true",
        help="only payhooks against the plain implementation, at 8 and 32 connections",
    )
    parser.add_argument(
        "--costs",
        action="store_true",
        help="what a capture costs per statement and per stored byte (about 3 minutes)",
    )
    args = parser.parse_args()
    args.carts = args.carts or int(3000 * args.seconds * 6)
    return args


def quick(url: str, args: argparse.Namespace) -> None:
    """Two rounds of the web stack, then new captures and duplicates in turns with the two
    pgbench yardsticks: CPU per operation, the figure that tells one build from another on a
    shared machine, and the ratios (``--quick``)."""
    bench = Bench(url, args)
    with servers(url, args.servers, PAYHOOKS_POOL_SIZE=str(args.clients)) as running:
        bench.attach(running)
        bench.warm_up()
        for part in range(2):
            bench.measure("GET /healthz: web stack, no database", bench.probes())
            rows = bench.in_turns(
                {
                    "new captures": map(post, bench.captures()),
                    "duplicates only": map(post, bench.resent()),
                },
                buildable_yardsticks(part, 2),
            )
            for scenario in ("new captures", "duplicates only"):
                bench.compare(scenario, rows.get(CAPTURE), rows[SMALLEST])
    versus(bench, args)
    print(
        f"\n{'scenario':<40} {'ops/s':>7} {'p99 ms':>7} {'ratio':>6} {'smallest':>8}"
        f"   CPU µs/op: postgres payhooks loadgen   WAL B/op"
    )
    for row in bench.rows:
        cpu = row.cpu
        print(
            f"{row.scenario:<40} {row.ops:>7.0f} {row.p99:>7.1f} {row.ratio:>6.2f} "
            f"{row.smallest_ratio:>8.2f}   "
            f"{cpu['postgres']:>8.0f} {cpu['payhooks']:>8.0f} {cpu['loadgen']:>7.0f}"
            f"   {row.wal:>8.0f}"
        )
    versus_report(bench)


def versus_only(url: str, args: argparse.Namespace) -> None:
    """payhooks against the plain implementation alone (``--versus``), with the checks."""
    bench = Bench(url, args)
    versus(bench, args)
    versus_report(bench)
    problems = check(url)
    print("\ncorrectness: " + ("; ".join(problems) if problems else "every check holds"))


def buildable_yardsticks(part: int, parts: int) -> list[Baseline]:
    """``yardsticks``, or the smallest transaction alone on a build whose statements the
    capture transaction cannot be built from (it imports them; the smallest is written here)."""
    try:
        return yardsticks(part, parts)
    except (ImportError, AttributeError) as exc:
        print(f"  {CAPTURE}: not built on this build ({exc}); ratio column empty", flush=True)
        return [Baseline(SMALLEST, _pgbench.smallest("m", SKUS), "m", part, parts)]


def costs(url: str, args: argparse.Namespace) -> None:
    """What a capture costs, piece by piece (``--costs``): the general path's transaction, it
    without one piece at a time, the smallest transaction, the capture function and the plain
    implementation's transaction, in turns with new captures through payhooks and through the
    plain implementation; then the time of each statement of new captures through each, where
    pg_stat_statements can be had."""
    ours = not os.environ.get("DATABASE_URL")
    why_not = _statements.enable(url, ours=ours)
    if why_not is None and ours:
        _statements.track(url, "none")  # off while pgbench runs: its cost on no figure
    bench = Bench(url, args)
    plain_env = {_plain.SECRET_VARIABLE: KEYS.razorpay}
    pool = str(args.clients)
    with (
        servers(url, args.servers, PAYHOOKS_POOL_SIZE=pool) as running,
        servers(url, args.servers, [*PLAIN, "--pool", pool], **plain_env) as theirs,
    ):
        bench.attach(running)
        bench.warm_up()
        bench.warm_up(theirs, "v")
        print("pgbench, in turns with new captures through payhooks and the plain app:", flush=True)
        rows = bench.in_turns(
            {
                COSTS_OURS: map(post, bench.captures("b")),
                COSTS_PLAIN: map(post, bench.captures("y")),
            },
            [*costs_of(), Baseline(PLAIN_TRANSACTION, _pgbench.plain("z"), "z")],
            on={COSTS_PLAIN: theirs},
        )
        timed = None
        if why_not is None:
            timed = [
                ("payhooks", statement_times(bench, ours)),
                ("the plain implementation", statement_times(bench, ours, theirs, "y")),
            ]
    costs_report(rows, [bench.row(COSTS_OURS), bench.row(COSTS_PLAIN)])
    if timed is None:
        print(f"\nper statement: not measured ({why_not})")
    else:
        for side, (captures, statements) in timed:
            statements_report(side, captures, statements)


COSTS_OURS = "payhooks: new captures"
COSTS_PLAIN = "plain: new captures"
PLAIN_TRANSACTION = "pgbench: plain transaction"


def costs_of() -> list[Baseline]:
    """The general path's transaction, it without one piece at a time, the smallest one and
    the capture function, each on carts of its own."""
    take = _pgbench.slot_take()
    changes: dict[str, dict[str, Any]] = {
        "stored body": {"body": _pgbench.NO_BODY},
        "stored headers": {"headers": _pgbench.NO_HEADERS},
        **{name: {"without": frozenset({name})} for name in sorted(_pgbench.OPTIONAL)},
    }
    general, *prefixes, smallest, function = COST_PREFIXES
    return [
        Baseline(CAPTURE, _pgbench.capture(general, take), general),
        *(
            Baseline(f"  without the {name}", _pgbench.capture(prefix, take, **change), prefix)
            for (name, change), prefix in zip(changes.items(), prefixes, strict=True)
        ),
        Baseline(SMALLEST, _pgbench.smallest(smallest, SKUS), smallest),
        Baseline(FUNCTION, _pgbench.first_capture(function), function),
    ]


def costs_report(rows: dict[str, Row], served: list[Row]) -> None:
    """Each transaction's rate and what it costs, and the difference from the general one;
    then what a new capture cost through each server, in the same turns."""
    general = rows[CAPTURE]
    print(
        f"\n{'transaction':<40} {'tx/s':>6} {'µs/tx':>6} {'Δ':>5}   "
        f"{'PG CPU µs/tx':>12} {'Δ':>5}   {'WAL B/tx':>8} {'Δ':>6}"
    )
    for name, row in rows.items():
        machine, postgres = 1e6 / row.ops, row.cpu["postgres"]
        print(
            f"{name:<40} {row.ops:>6.0f} {machine:>6.0f} {machine - 1e6 / general.ops:>+5.0f}   "
            f"{postgres:>12.0f} {postgres - general.cpu['postgres']:>+5.0f}   "
            f"{row.wal:>8.0f} {row.wal - general.wal:>+6.0f}"
        )
    print("(µs/tx: the machine's time per transaction, 1/rate; Δ: to the capture transaction)")
    for piece, stored in (("body", _pgbench.BODY_BYTES), ("headers", _pgbench.HEADERS_BYTES)):
        without = rows[f"  without the stored {piece}"]
        cpu = general.cpu["postgres"] - without.cpu["postgres"]
        wal = general.wal - without.wal
        print(
            f"stored {piece} ({stored} bytes): {cpu:.0f} µs of PostgreSQL CPU "
            f"({cpu / stored * 1000:.0f} ns a byte), {wal:.0f} bytes of WAL "
            f"({wal / stored:.2f} a byte) per capture"
        )
    print(
        f"\n{'served, in the same turns':<40} {'req/s':>6}   CPU µs/req: "
        f"{'postgres':>8} {'server':>6} {'loadgen':>7}   {'WAL B/req':>9}"
    )
    for row in served:
        cpu = row.cpu
        print(
            f"{row.scenario:<40} {row.ops:>6.0f}   {'':>11}{cpu['postgres']:>8.0f} "
            f"{cpu['payhooks']:>6.0f} {cpu['loadgen']:>7.0f}   {row.wal:>9.0f}"
        )


Timed = tuple[int, list[_statements.Statement]]


def statement_times(
    bench: Bench, ours: bool, on: list[Server] | None = None, prefix: str = "b"
) -> Timed:
    """New captures through the service (or the servers ``on``, on carts ``prefix``) with
    every statement timed, functions' inner ones too (on the bench's own server; else as the
    server tracks them)."""
    if ours:
        _statements.track(bench.url, "all")
    bench.settle()
    _statements.reset(bench.url)  # after the VACUUM: not measure(), which would run one timed
    run = bench._record(
        f"{'plain' if on else 'payhooks'}: new captures, statements timed",
        *bench._drive(map(post, bench.captures(prefix)), bench.args.seconds, on=on),
    )
    return len(run.latencies), _statements.top(bench.url)


def statements_report(side: str, captures: int, statements: list[_statements.Statement]) -> None:
    print(
        f"\nper statement, {captures} new captures through {side} "
        "(a function's time includes the statements it runs, marked 'in'):"
    )
    print(f"{'µs/capture':>10} {'calls/capture':>13} {'mean µs':>8}  statement")
    for each in statements:
        mark = "  " if each.toplevel else "in"
        print(
            f"{each.total_ms * 1000 / max(captures, 1):>10.0f} "
            f"{each.calls / max(captures, 1):>13.2f} {each.total_ms * 1000 / each.calls:>8.1f}"
            f"  {mark} {each.query[:100]}"
        )


def main() -> None:
    args = options()
    started = time.perf_counter()
    size = {"PAYHOOKS_POOL_SIZE": str(args.clients)}
    if args.quick or args.costs or args.versus:
        with database() as url:
            seed(url, args)
            room(url)
            (quick if args.quick else costs if args.costs else versus_only)(url, args)
        print(f"\nwhole run: {time.perf_counter() - started:.0f} s on {os.cpu_count()} cores")
        return
    with database() as url:
        seed(url, args)
        room(url)
        print(f"seeded carts in {time.perf_counter() - started:.0f} s", flush=True)
        bench = Bench(url, args)
        with servers(url, args.servers, **size) as running:
            bench.attach(running)
            capture, smallest = run_all(bench, args)
        with servers(url, args.servers, LIBRARY, **size) as running:
            bench.attach(running)
            library(bench, capture, smallest)
        versus(bench, args)
        with servers(url, args.servers, **size) as running:
            bench.attach(running)
            prefilled(bench, args, capture, smallest)
        problems = check(url)
        report(bench, args)
        print("\ncorrectness: " + ("; ".join(problems) if problems else "every check holds"))
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
