"""From an order id, payment id or delivery key to every webhook event behind it: each
payment's, across the gateway orders it crossed, with what was kept of each body (its digest,
size and the header names), and the shop's payments and orders. The timeline tells a gateway
order's story (``payhooks.operations.timeline``, the console); this is the raw rows, as JSON."""

from __future__ import annotations

from typing import Any

from payhooks.operations.timeline import jsonable
from payhooks.plumbing.db import Connection, Named, named_rows
from payhooks.plumbing.errors import NotFound

_EVENT_COLUMNS = """
provider, event_id, event_type, outcome, payment_id, order_ref, processed_at, payload_sha256,
mismatches, length(body) AS body_bytes,
(SELECT coalesce(array_agg(key ORDER BY key), '{}') FROM jsonb_object_keys(headers) AS key)
    AS signed_headers
"""
_ORDER = "SELECT provider, payment_id, cart_id FROM orders WHERE id = %s"
_PAYMENTS_BY_ID = "SELECT provider, payment_id, cart_id FROM payments WHERE payment_id = %s"
_EVENT_BY_KEY = f"SELECT {_EVENT_COLUMNS} FROM processed_webhooks WHERE event_id = %s"
_PAYMENTS_OF_CART = """
SELECT provider, payment_id, status, cart_id, amount_paise, payment_amount_paise, currency,
       refunded_paise, needs_refund, flags, created_at, updated_at
FROM payments
WHERE cart_id = ANY(%s)
   OR (provider, payment_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
ORDER BY created_at
"""
_ORDERS_OF_CARTS = """
SELECT id AS order_id, cart_id, provider, payment_id, amount_paise, status, event_id, created_at
FROM orders WHERE cart_id = ANY(%s)
"""
_EVENTS_OF_PAYMENTS = f"""
SELECT {_EVENT_COLUMNS} FROM processed_webhooks
WHERE (provider, payment_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
   OR order_ref = ANY(%s) OR event_id = ANY(%s)
ORDER BY processed_at, event_id
"""


def trace(conn: Connection, ident: str) -> dict[str, Any]:
    """Everything recorded about ``ident``: events (with their delivery keys), payments, orders."""
    seeds, carts, matched, keys = _seed(conn, ident)
    if not matched:
        raise NotFound("order, payment or delivery key", ident)
    payment_rows = _rows(
        conn, _PAYMENTS_OF_CART, (carts, [p for p, _ in seeds], [i for _, i in seeds])
    )
    carts = sorted({*carts, *(r["cart_id"] for r in payment_rows if r["cart_id"])})
    order_rows = _rows(conn, _ORDERS_OF_CARTS, (carts,))
    pairs = {(r["provider"], r["payment_id"]) for r in payment_rows} | set(seeds)
    order_ids = [r["order_id"] for r in order_rows]
    event_rows = _rows(
        conn,
        _EVENTS_OF_PAYMENTS,
        (
            [p for p, _ in pairs],
            [i for _, i in pairs],
            order_ids,
            [*keys, *(r["event_id"] for r in order_rows)],
        ),
    )
    return {
        "query": ident,
        "matched": matched,
        "events": event_rows,
        "payments": payment_rows,
        "orders": order_rows,
    }


def _seed(
    conn: Connection, ident: str
) -> tuple[list[tuple[str, str]], list[str], list[str], list[str]]:
    seeds: list[tuple[str, str]] = []
    carts: list[str] = []
    matched: list[str] = []
    keys: list[str] = []
    for provider, payment_id, cart_id in conn.execute(_ORDER, (ident,)):
        seeds.append((provider, payment_id))
        carts.append(cart_id)
        matched.append("order")
    for provider, payment_id, cart_id in conn.execute(_PAYMENTS_BY_ID, (ident,)):
        seeds.append((provider, payment_id))
        if cart_id:
            carts.append(cart_id)
        matched.append("payment")
    for row in _rows(conn, _EVENT_BY_KEY, (ident,)):
        keys.append(row["event_id"])
        if row["payment_id"]:
            seeds.append((row["provider"], row["payment_id"]))
        matched.append("delivery_key")
    return seeds, carts, sorted(set(matched)), keys


def _rows(conn: Connection, sql: str, params: tuple[Any, ...]) -> list[Named]:
    return [jsonable(row) for row in named_rows(conn, sql, params)]
