"""``payhooks demo``: the service on an embedded database, and a gateway that misbehaves.

Everything is real: PostgreSQL in a temporary folder, the service over HTTP on a free
loopback port, deliveries in each gateway's own format and correctly signed, a gateway that
retries timeouts and 5xx the way the real ones do. The verdict comes from the database, not
from what the service answered.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
from rich import box
from rich.console import Console
from rich.table import Table

from payhooks.events import Provider
from payhooks.plumbing import db
from payhooks.refunding import sending
from payhooks.service import application, database, reconcile
from payhooks.service.config import Settings
from payhooks.sim import loopback
from payhooks.sim.client import Answer, Shop, ShopAtGateway
from payhooks.sim.errors import DemoFailed
from payhooks.sim.gateway import Delivery, Gateway, GatewaySecrets, Purchase, new_payment_id
from payhooks.sim.gateway_api import ApiKeys, GatewayApi
from payhooks.sim.gateway_api import serving as serving_api
from payhooks.sim.gateways import SIMULATORS
from payhooks.sim.gateways import razorpay as razorpay_sim
from payhooks.sim.stage import (
    CUSTOMER,
    GATEWAY_TIMEOUT_S,
    Courier,
    Result,
    Stage,
    expect,
    finals,
    one_order,
    result,
    status,
)

__all__ = ["DemoFailed", "run_demo"]

# sku, name, price in paise, opening stock
CATALOGUE: tuple[tuple[str, str, int, int], ...] = (
    ("TEA-ASSAM", "Assam tea, 250 g", 34_900, 40),
    ("MUG-CLAY", "Clay mug", 29_900, 25),
    ("HONEY-500", "Forest honey, 500 g", 54_900, 15),
)
COPIES = 50
SLOW_TIMEOUT_S = 0.5  # the gateway's patience in the slow-response scenario
STOCK_HELD_S = 1.5  # how long the "slow" scenario keeps the stock row busy


# --- the scenarios: a bad day at the gateway, and worse -------------------------------------


def _razorpay(stage: Stage, buy: Purchase, event: str, payment_id: str) -> Delivery:
    """A Razorpay event of ``buy``'s payment, on which the general scenarios are played."""
    return razorpay_sim.delivery(
        stage.gateway,
        event,
        payment_id=payment_id,
        order_id=buy.reference,
        amount_paise=buy.amount_paise,
    )


def _capture(
    stage: Stage, buy: Purchase, payment_id: str, event: str = "payment.captured"
) -> Delivery:
    """A Razorpay capture-type event (``payment.captured`` or ``order.paid``) of a payment
    the gateway took the money for (``Stage.vouch``)."""
    return _razorpay(stage, buy, event, stage.vouch(buy, payment_id))


@contextlib.contextmanager
def _stock_row_busy(database_url: str, sku: str, seconds: float) -> Iterator[None]:
    """Keep a product row locked, as a long stock-take would, so the next order waits on it."""
    held = threading.Event()

    def hold() -> None:
        with psycopg.connect(database_url) as conn, conn.transaction():
            conn.execute("SELECT 1 FROM product_stock WHERE sku = %s FOR UPDATE", (sku,))
            held.set()
            time.sleep(seconds)

    thread = threading.Thread(target=hold, name="demo-stock-take", daemon=True)
    thread.start()
    held.wait(timeout=10)
    try:
        yield
    finally:
        thread.join(timeout=seconds + 10)


def slow_first_response(stage: Stage) -> Result:
    buy = stage.merchant.buy(Provider.RAZORPAY, {"TEA-ASSAM": 2}, CUSTOMER)
    pay = new_payment_id(Provider.RAZORPAY)
    with _stock_row_busy(stage.database_url, "TEA-ASSAM", STOCK_HELD_S):
        run = stage.courier.deliver(_capture(stage, buy, pay), timeout=SLOW_TIMEOUT_S)
    settled = run[-1].outcome in ("processed", "duplicate")
    return result(
        "slow first response, retried",
        [run],
        [
            (
                run[0].outcome == "timeout",
                f"first attempt answered {run[0].outcome}, expected timeout",
            ),
            (settled, f"retry answered {run[-1].outcome}"),
            one_order(stage, buy, pay),
        ],
    )


def fifty_copies(stage: Stage) -> Result:
    buy = stage.merchant.buy(Provider.RAZORPAY, {"MUG-CLAY": 1, "TEA-ASSAM": 1}, CUSTOMER)
    delivery = _capture(stage, buy, new_payment_id(Provider.RAZORPAY))
    barrier = threading.Barrier(COPIES)

    def send(_: int) -> list[Answer]:
        barrier.wait(timeout=30)
        return stage.courier.deliver(delivery)

    with ThreadPoolExecutor(max_workers=COPIES) as pool:
        runs = list(pool.map(send, range(COPIES)))
    got = Counter(finals(*runs))
    want = Counter({"processed": 1, "duplicate": COPIES - 1})
    return result(
        f"{COPIES} copies of one capture at once",
        runs,
        [
            (got == want, f"answers {dict(got)}, expected {dict(want)}"),
            one_order(stage, buy),
        ],
    )


def authorized_then_captured(stage: Stage) -> Result:
    buy = stage.merchant.buy(Provider.RAZORPAY, {"HONEY-500": 1}, CUSTOMER)
    pay = new_payment_id(Provider.RAZORPAY)
    first = stage.courier.deliver(_razorpay(stage, buy, "payment.authorized", pay))
    second = stage.courier.deliver(_capture(stage, buy, pay))
    return result(
        "authorized, then captured",
        [first, second],
        [
            expect(finals(first, second), ["processed", "processed"]),
            (first[-1].order_id is None, "the authorisation alone created an order"),
            status(stage, Provider.RAZORPAY, pay, "captured"),
            one_order(stage, buy, pay),
        ],
    )


def captured_and_order_paid(stage: Stage) -> Result:
    buy = stage.merchant.buy(Provider.RAZORPAY, {"TEA-ASSAM": 1}, CUSTOMER)
    pay = new_payment_id(Provider.RAZORPAY)
    first = stage.courier.deliver(_capture(stage, buy, pay))
    second = stage.courier.deliver(_capture(stage, buy, pay, event="order.paid"))
    same = first[-1].order_id is not None and first[-1].order_id == second[-1].order_id
    checked = (same, "the two events name different orders")
    return _both_processed(
        stage, "payment.captured + order.paid", (first, second), checked, buy, pay
    )


def failed_upi_then_success(stage: Stage) -> Result:
    buy = stage.merchant.buy(Provider.RAZORPAY, {"MUG-CLAY": 2}, CUSTOMER)
    failed, paid = new_payment_id(Provider.RAZORPAY), new_payment_id(Provider.RAZORPAY)
    first = stage.courier.deliver(_razorpay(stage, buy, "payment.failed", failed))
    second = stage.courier.deliver(_capture(stage, buy, paid))
    checked = status(stage, Provider.RAZORPAY, failed, "failed")
    name = "failed UPI attempt, then success"
    return _both_processed(stage, name, (first, second), checked, buy, paid)


def double_payment(stage: Stage) -> Result:
    """Two tabs, two captured payments for one cart, at the same moment."""
    buy = stage.merchant.buy(Provider.RAZORPAY, {"HONEY-500": 2}, CUSTOMER)
    pays = [new_payment_id(Provider.RAZORPAY) for _ in range(2)]
    deliveries = [_capture(stage, buy, pay) for pay in pays]
    barrier = threading.Barrier(2)

    def send(delivery: Delivery) -> list[Answer]:
        barrier.wait(timeout=30)
        return stage.courier.deliver(delivery)

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(send, deliveries))
    flagged = _refund_flagged(stage, buy, pays)
    for pay in pays:
        stage.books.pay(buy, pay)  # the gateway's books: both captured
    stage.refund()  # the double-payment policy, then the sender, as the worker runs them
    stage.refund()  # a second pass (another tick, another worker) refunds nothing more
    order = stage.merchant.orders(buy.cart_id)[0]
    loser = next((pay for pay in pays if pay != order["payment_id"]), "")
    made = [stage.books.money.made[(buy.provider, pay)] for pay in (loser, order["payment_id"])]
    refund = stage.books.money.refunds.get((buy.provider, loser), [{}])[0]
    webhook = razorpay_sim.delivery(
        stage.gateway, "refund.processed", payment_id=loser, order_id=buy.reference,
        amount_paise=buy.amount_paise, refund_id=str(refund.get("id", "rfnd_none")),
    )  # fmt: skip
    back = stage.courier.deliver(webhook)  # the gateway says the refund is processed
    after = stage.merchant.payment(buy.provider, loser) or {}
    return result(
        "double payment (two tabs), refunded automatically",
        [*runs, back],
        [
            expect(finals(*runs, back), ["processed", "processed", "processed"]),
            one_order(stage, buy),
            flagged,
            (made == [1, 0], f"refunds at the gateway: {made} (the second payment, the first)"),
            (
                after.get("status") == "refunded" and not after.get("needs_refund"),
                f"the second payment is {after.get('status')}",
            ),
            (True, "1 order, the second payment refunded once"),
        ],
    )


def _refund_flagged(stage: Stage, buy: Purchase, pays: list[str]) -> tuple[bool, str]:
    """The payment that did not make the order is flagged for refund, the other is not."""
    order = stage.merchant.orders(buy.cart_id)[0]
    loser = next((pay for pay in pays if pay != order["payment_id"]), "")
    found = stage.merchant.payment(buy.provider, loser) or {}
    ok = bool(found.get("needs_refund")) and "duplicate_payment" in found.get("flags", [])
    return ok, "the second payment flagged for refund"


def captured_before_authorized(stage: Stage) -> Result:
    buy = stage.merchant.buy(Provider.RAZORPAY, {"TEA-ASSAM": 1}, CUSTOMER)
    pay = new_payment_id(Provider.RAZORPAY)
    first = stage.courier.deliver(_capture(stage, buy, pay))
    second = stage.courier.deliver(_razorpay(stage, buy, "payment.authorized", pay))
    checked = status(stage, Provider.RAZORPAY, pay, "captured")
    name = "captured before authorized"
    return _both_processed(stage, name, (first, second), checked, buy, pay)


def _both_processed(
    stage: Stage,
    name: str,
    runs: tuple[list[Answer], list[Answer]],
    checked: tuple[bool, str],
    buy: Purchase,
    pay: str,
) -> Result:
    """Two different events of one payment: both processed, one order, and the scenario's
    own check."""
    expected = expect(finals(*runs), ["processed", "processed"])
    return result(name, list(runs), [expected, checked, one_order(stage, buy, pay)])


def forged_signature(stage: Stage) -> Result:
    buy = stage.merchant.buy(Provider.RAZORPAY, {"MUG-CLAY": 1}, CUSTOMER)
    pay = new_payment_id(Provider.RAZORPAY)
    forger = Gateway(GatewaySecrets(razorpay="not-the-webhook-secret"))
    run = stage.courier.deliver(
        forger.razorpay(
            "payment.captured",
            payment_id=pay,
            order_id=buy.reference,
            amount_paise=buy.amount_paise,
        )
    )
    stored = stage.merchant.payment(Provider.RAZORPAY, pay) is not None
    orders = len(stage.merchant.orders(buy.cart_id))
    records = _records_of(stage.database_url, pay)
    return result(
        "forged signature",
        [run],
        [
            expect(finals(run), ["http 401"]),
            (not stored and orders == 0, f"payment stored: {stored}, orders: {orders}"),
            (records == 0, "nothing stored" if records == 0 else f"{records} records stored"),
        ],
    )


def webhook_never_arrives(stage: Stage) -> Result:
    """The customer paid, the gateway knows, no webhook comes (a rotated secret, a firewall):
    one reconciliation pass asks the gateway and places the order; the webhook that finally
    arrives changes nothing."""
    buy = stage.merchant.buy(Provider.RAZORPAY, {"HONEY-500": 1}, CUSTOMER)
    pay = stage.vouch(buy, new_payment_id(Provider.RAZORPAY))
    stage.books.pay(buy, pay)
    tally = stage.reconcile()
    found = stage.merchant.orders(buy.cart_id)
    late = stage.courier.deliver(_razorpay(stage, buy, "payment.captured", pay))
    same = bool(found) and late[-1].order_id == found[0]["order_id"]
    return result(
        "webhook never arrives: reconciled",
        [late],
        [
            (tally.recovered[Provider.RAZORPAY] == 1, f"reconciliation: {tally.summary()}"),
            (same, "the late webhook named another order"),
            one_order(stage, buy, pay),
        ],
    )


def _records_of(database_url: str, payment_id: str) -> int:
    """Delivery records naming ``payment_id``: a refused delivery must leave none."""
    sql = "SELECT count(*) FROM processed_webhooks WHERE payment_id = %s"
    with db.translated(), psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(sql, (payment_id,)).fetchone()
    return int(row[0]) if row else 0


SCENARIOS: tuple[Callable[[Stage], Result], ...] = (
    slow_first_response,
    fifty_copies,
    authorized_then_captured,
    captured_and_order_paid,
    failed_upi_then_success,
    double_payment,
    *(scenario for sim in SIMULATORS.values() for scenario in sim.scenarios),
    captured_before_authorized,
    forged_signature,
    webhook_never_arrives,
)
"""The general scenarios are played on Razorpay; each gateway's own come from its module."""


# --- the invariants, checked against the database ------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    name: str
    ok: bool
    detail: str


_ORDERS_PER_CART = """
SELECT count(*) FILTER (WHERE c.status = 'paid'),
       count(*) FILTER (WHERE c.status = 'paid' AND coalesce(o.n, 0) <> 1),
       count(*) FILTER (WHERE c.status = 'open' AND o.n IS NOT NULL),
       coalesce(sum(o.n), 0)
FROM carts c LEFT JOIN (SELECT cart_id, count(*) AS n FROM orders GROUP BY cart_id) o
    ON o.cart_id = c.id
"""
_LEDGER = """
SELECT p.sku, p.stock,
       (SELECT coalesce(sum(m.delta), 0) FROM inventory_movements m WHERE m.sku = p.sku),
       (SELECT coalesce(sum(-m.delta), 0) FROM inventory_movements m
         WHERE m.sku = p.sku AND m.reason = 'sale'),
       (SELECT coalesce(sum(ci.quantity), 0)
          FROM orders o JOIN cart_items ci ON ci.cart_id = o.cart_id
         WHERE ci.sku = p.sku AND o.status = 'confirmed')
FROM products p ORDER BY p.sku
"""
_TRACEABLE = """
SELECT count(*), count(w.event_id)
FROM orders o LEFT JOIN processed_webhooks w
    ON w.provider = o.provider AND w.event_id = o.event_id
   AND w.outcome = 'processed' AND w.order_ref = o.id
"""
_CAPTURES = """
SELECT p.provider, p.payment_id, p.needs_refund OR p.status = 'refunded', o.id IS NOT NULL
FROM payments p LEFT JOIN orders o
    ON o.cart_id = p.cart_id AND o.provider = p.provider AND o.payment_id = p.payment_id
WHERE p.status IN ('captured', 'refunded')
"""
_EMAILS = """
SELECT (SELECT count(*) FROM orders),
       (SELECT count(*) FROM outbox
         WHERE kind = 'email' AND dedupe_key LIKE 'order_confirmation:%'),
       (SELECT count(*) FROM orders o WHERE NOT EXISTS (
            SELECT 1 FROM outbox x WHERE x.kind = 'email'
               AND x.dedupe_key = 'order_confirmation:' || o.id))
"""


def _row(conn: db.Connection, sql: str) -> tuple[Any, ...]:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row


def one_order_per_paid_cart(conn: db.Connection) -> Check:
    paid, wrong, open_with_order, orders = _row(conn, _ORDERS_PER_CART)
    ok = wrong == 0 and open_with_order == 0 and paid == orders
    detail = f"{paid} paid carts, {orders} orders"
    if not ok:
        detail += f"; {wrong} paid carts without exactly one, {open_with_order} open with one"
    return Check(name="one order per paid cart", ok=ok, detail=detail)


def stock_ledger_equals_orders(conn: db.Connection) -> Check:
    rows = conn.execute(_LEDGER).fetchall()
    off = [sku for sku, stock, ledger, sold, ordered in rows if stock != ledger or sold != ordered]
    detail = f"for all {len(rows)} SKUs the ledger sums to the stock and sales match orders"
    return Check(
        name="stock ledger equals orders",
        ok=not off,
        detail=f"drift in {', '.join(off)}" if off else detail,
    )


def every_order_traceable(conn: db.Connection) -> Check:
    orders, traced = _row(conn, _TRACEABLE)
    return Check(
        name="every order traceable to its event",
        ok=orders == traced,
        detail=f"{traced} of {orders} orders lead to the delivery that made them",
    )


def no_payment_lost(conn: db.Connection, sent: Sequence[tuple[Provider, str]]) -> Check:
    rows = conn.execute(_CAPTURES).fetchall()
    kept = {(str(p), str(pay)) for p, pay, refund, ordered in rows if refund or ordered}
    lost = [pay for provider, pay in sent if (provider.value, pay) not in kept]
    lost += [str(pay) for _, pay, refund, ordered in rows if not refund and not ordered]
    refunds = sum(1 for row in rows if row[2])
    detail = (
        f"{len(set(sent))} payments captured by the gateway: "
        f"{len(rows) - refunds} on orders, {refunds} refunded or flagged for refund"
    )
    return Check(
        name="no payment lost",
        ok=not lost,
        detail=f"lost: {', '.join(sorted(set(lost)))}" if lost else detail,
    )


def one_email_per_order(conn: db.Connection) -> Check:
    orders, emails, missing = _row(conn, _EMAILS)
    return Check(
        name="one confirmation email per order",
        ok=orders == emails and missing == 0,
        detail=f"{emails} emails queued for {orders} orders",
    )


def check_invariants(database_url: str, sent: Sequence[tuple[Provider, str]]) -> list[Check]:
    with db.translated(), psycopg.connect(database_url, autocommit=True) as conn:
        return [
            one_order_per_paid_cart(conn),
            stock_ledger_equals_orders(conn),
            every_order_traceable(conn),
            no_payment_lost(conn, sent),
            one_email_per_order(conn),
        ]


def _totals(database_url: str) -> dict[str, int]:
    sql = """
    SELECT (SELECT count(*) FROM processed_webhooks), (SELECT count(*) FROM orders),
           (SELECT count(*) FROM outbox WHERE kind = 'email'),
           (SELECT count(*) FROM outbox WHERE kind = 'alert')
    """
    with db.translated(), psycopg.connect(database_url, autocommit=True) as conn:
        events, orders, emails, alerts = _row(conn, sql)
    return {"events": events, "orders": orders, "emails": emails, "alerts": alerts}


# --- the report -----------------------------------------------------------------------------


def _summary(answers: Sequence[Answer]) -> str:
    if len(answers) <= 4:
        return " → ".join(a.outcome for a in answers)
    return _counted(answers)


def _counted(answers: Sequence[Answer]) -> str:
    """``1 processed, 49 duplicate``: the outcomes that change something come first."""
    counts = Counter(a.outcome for a in answers)
    order = {name: i for i, name in enumerate(("processed", "duplicate", "ignored", "parked"))}
    names = sorted(counts, key=lambda name: (order.get(name, len(order)), name))
    return ", ".join(f"{counts[name]} {name}" for name in names)


def _mark(ok: bool) -> str:
    return "[green]✓[/]" if ok else "[bold red]✗[/]"


def scenario_table(results: Sequence[Result]) -> Table:
    table = Table(title="Scenarios", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("scenario", min_width=22)
    table.add_column("sent", justify="right")
    table.add_column("answers", min_width=21)
    table.add_column("", no_wrap=True)
    table.add_column("result")
    for r in results:
        table.add_row(r.name, str(len(r.answers)), _summary(r.answers), _mark(r.ok), r.detail)
    return table


def totals_table(
    sent: Sequence[Answer], totals: dict[str, int], stock: dict[str, tuple[int, int]]
) -> Table:
    table = Table(title="Totals", title_justify="left", show_header=False, box=box.SIMPLE)
    table.add_column("what")
    table.add_column("how many")
    table.add_row("deliveries sent (HTTP attempts)", str(len(sent)))
    table.add_row("answers", _counted(sent))
    table.add_row("duplicates suppressed", str(sum(a.outcome == "duplicate" for a in sent)))
    table.add_row("distinct events recorded", str(totals["events"]))
    table.add_row("orders created", str(totals["orders"]))
    for sku, (before, after) in stock.items():
        table.add_row(f"stock {sku}", f"{before} → {after}")
    table.add_row("emails queued", str(totals["emails"]))
    table.add_row("alerts queued", str(totals["alerts"]))
    return table


def invariant_table(checks: Sequence[Check]) -> Table:
    table = Table(
        title="Invariants (checked in the database)", title_justify="left", box=box.SIMPLE_HEAD
    )
    table.add_column("invariant", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("detail")
    for check in checks:
        verdict = "[green]✓ held[/]" if check.ok else "[bold red]✗ BROKEN[/]"
        table.add_row(check.name, verdict, check.detail)
    return table


# --- the setting: folder, database, service ------------------------------------------------


@contextlib.contextmanager
def data_folder(keep: Path | None) -> Iterator[Path]:
    """``keep`` as given, or a temporary folder removed on the way out, whatever happened."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep.resolve()
        return
    folder = Path(tempfile.mkdtemp(prefix="payhooks-demo-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def embedded_database(folder: Path, *, stop: bool) -> Iterator[str]:
    """A migrated, empty embedded PostgreSQL under ``folder``; stopped on the way out if asked."""
    url = database.embedded_url(folder)
    try:
        with db.translated(), psycopg.connect(url, autocommit=True) as conn:
            database.migrate(conn)
            if _row(conn, "SELECT count(*) FROM products")[0]:
                raise DemoFailed(f"{folder} holds an earlier demo's data; pick an empty folder")
        yield url
    finally:
        if stop:
            database.stop_embedded(folder)


@contextlib.contextmanager
def serving(settings: Settings, token: str, url: str) -> Iterator[str]:
    """The real service under uvicorn on a free loopback port, in a background thread."""
    from payhooks.service.web import create_app

    app = create_app(settings, api_token=token, url=url)
    failed = DemoFailed("the service did not start")
    with loopback.served(app, name="payhooks-demo-service", grace_s=5, not_started=failed) as at:
        yield at


@contextlib.contextmanager
def _quiet_service_logs() -> Iterator[None]:
    """The report tells the story; the service's own log lines would interleave with it."""
    logger = logging.getLogger("payhooks")
    handler = logging.NullHandler()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


# --- the play ---------------------------------------------------------------------------------


def set_up_shop(merchant: Shop) -> dict[str, int]:
    for sku, name, price, stock in CATALOGUE:
        merchant.add_product(sku, name, price, stock)
    return {sku: merchant.stock(sku) for sku, *_ in CATALOGUE}


@contextlib.contextmanager
def reconciling(
    settings: Settings, database_url: str
) -> Iterator[tuple[Callable[[], reconcile.Tally], Callable[[], sending.Tally]]]:
    """One reconciliation pass on demand, as the worker runs it, over every open checkout;
    and one pass of the refund sender, the double-payment policy on (the demo's setting)."""
    pool = database.open_pool(database_url, settings, max_size=2, deadline=False)
    try:
        with reconcile.http_client(GATEWAY_TIMEOUT_S) as http:
            reconciler = application.reconciler(pool, settings, http, after_s=0)
            yield reconciler.run, lambda: application.send_refunds(reconciler, double_payments=True)
    finally:
        pool.close()


def play(
    base_url: str, token: str, keys: GatewaySecrets, database_url: str, console: Console
) -> bool:
    """Set up the shop, play every scenario, then check and report."""
    auth = {"authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=COPIES + 10)
    books = GatewayApi(ApiKeys())
    with (
        httpx.Client(base_url=base_url, headers=auth, timeout=10) as api,
        httpx.Client(base_url=base_url, limits=limits, timeout=GATEWAY_TIMEOUT_S) as hooks,
        serving_api(books) as api_url,
        reconciling(_settings(keys, api_url), database_url) as (reconcile_pass, refund_pass),
    ):
        merchant = ShopAtGateway(api, DemoFailed, books)
        before = set_up_shop(merchant)
        stage = Stage(
            merchant=merchant,
            courier=Courier(hooks),
            gateway=Gateway(keys),
            database_url=database_url,
            books=books,
            reconcile=reconcile_pass,
            refund=refund_pass,
        )
        results = [scenario(stage) for scenario in SCENARIOS]
        after = {sku: merchant.stock(sku) for sku in before}
    checks = check_invariants(database_url, stage.captured)
    stock = {sku: (before[sku], after[sku]) for sku in before}
    console.print(scenario_table(results))
    console.print(totals_table(stage.courier.sent, _totals(database_url), stock))
    console.print(invariant_table(checks))
    return all(r.ok for r in results) and all(c.ok for c in checks)


def _settings(keys: GatewaySecrets, api_url: str) -> Settings:
    return Settings.from_env({**keys.env(), **ApiKeys().env(api_url)})


def run_demo(keep: Path | None, console: Console | None = None) -> bool:
    """The showcase: True when every scenario went as expected and every invariant held."""
    out = console or Console()
    started = time.monotonic()
    keys = GatewaySecrets()
    token = secrets.token_urlsafe(24)
    with data_folder(keep) as folder:
        out.print(f"data folder: {folder}", soft_wrap=True, highlight=False)
        with embedded_database(folder, stop=keep is None) as url, _quiet_service_logs():
            settings = Settings.from_env({**keys.env(), "PAYHOOKS_HOME": str(folder)})
            with serving(settings, token, url) as base_url:
                out.print(
                    f"[bold]payhooks demo[/]: the service on {base_url} over embedded "
                    "PostgreSQL; a gateway that retries, duplicates and reorders "
                    "signed webhooks",
                    highlight=False,
                )
                ok = play(base_url, token, keys, url, out)
    _farewell(out, ok, time.monotonic() - started, folder, keep)
    return ok


def _farewell(out: Console, ok: bool, elapsed: float, folder: Path, keep: Path | None) -> None:
    verdict = "[green]every invariant held[/]" if ok else "[bold red]something broke[/]"
    where = (
        f"data kept in {folder} (PAYHOOKS_HOME={folder} payhooks trace ID)"
        if keep
        else f"removed {folder}"
    )
    out.print(f"{verdict} in {elapsed:.1f} s; {where}", soft_wrap=True, highlight=False)
