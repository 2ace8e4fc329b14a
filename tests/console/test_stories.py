"""A timeline reads only what concerns its cart, through indexes, however many deliveries the
retention window holds: the plans PostgreSQL chooses for every statement a story runs, on
tables filled and analysed like a busy shop's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from payhooks.events import Provider
from payhooks.service.console import actions, search, stories
from tests.factories import SETTINGS, deliver, purchase

ROWS = 20_000
FILLED = {"processed_webhooks", "deliveries", "payments", "outbox"}

FILL = f"""
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
                                merchant_ref, payload_sha256, body)
SELECT (ARRAY['razorpay', 'cashfree', 'payu'])[1 + n % 3], 'evt_fill_' || n, 'payment.captured',
       CASE WHEN n % 50 = 0 THEN 'parked' ELSE 'processed' END, 'pay_fill_' || n,
       'order_fill_' || n, md5(n::text), '\\x00'::bytea
FROM generate_series(1, {ROWS}) n;
INSERT INTO deliveries (received_at, provider, status, outcome, verified, event_id, event_type,
                        payment_id, merchant_ref, body_bytes, duration_ms)
SELECT now() - n * interval '1 second', (ARRAY['razorpay', 'cashfree', 'payu'])[1 + n % 3],
       200, 'processed', true, 'evt_fill_' || n, 'payment.captured', 'pay_fill_' || n,
       'order_fill_' || n, 300, 1
FROM generate_series(1, {ROWS}) n;
INSERT INTO payments (provider, payment_id, status, amount_paise)
SELECT (ARRAY['razorpay', 'cashfree', 'payu'])[1 + n % 3], 'pay_fill_' || n, 'captured', 100
FROM generate_series(1, {ROWS}) n;
INSERT INTO outbox (kind, dedupe_key, subject, body, payload)
SELECT 'email', 'fill_' || n, 's', 'b', jsonb_build_object('order_id', 'ord_fill_' || n)
FROM generate_series(1, {ROWS}) n;
ANALYZE processed_webhooks, deliveries, payments, outbox;
"""


class Recording(psycopg.Cursor[Any]):
    """Notes every statement it runs, with its parameters, to read their plans afterwards."""

    ran: list[tuple[str, Any]]

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self.connection.ran.append((query, params))  # type: ignore[attr-defined]
        return super().execute(query, params, **kwargs)


@pytest.fixture
def recording(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True, cursor_factory=Recording) as conn:
        conn.ran = []  # type: ignore[attr-defined]
        yield conn


@pytest.fixture
def busy(conn):
    """A paid cart among 20,000 other deliveries, payments and emails."""
    buy = purchase(conn, Provider.RAZORPAY)
    deliver(conn, buy.captured())
    conn.execute(
        "INSERT INTO deliveries (received_at, provider, status, outcome, verified, event_id,"
        " payment_id, merchant_ref, body_bytes, duration_ms)"
        " VALUES (now(), 'razorpay', 200, 'processed', true, 'evt_mine', %s, %s, 10, 1)",
        (buy.payment_id, buy.reference),
    )
    conn.execute(FILL.encode())
    return buy


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def read_whole(conn, ran: list[tuple[str, Any]]) -> list[tuple[str, str, int]]:
    """Each statement run as PostgreSQL plans it for those very parameters: the filled tables
    it scans whole, or of which it reads (returns or filters out) more than a story's worth."""
    found = []
    for query, params in ran:
        explain = f"EXPLAIN (ANALYZE, FORMAT JSON) {query}".encode()
        [(plan,)] = conn.execute(explain, params).fetchall()
        for node in nodes(plan[0]["Plan"]):
            if node.get("Relation Name") not in FILLED:
                continue
            read = node["Actual Rows"] * node["Actual Loops"]
            read += node.get("Rows Removed by Filter", 0)
            read += node.get("Rows Removed by Index Recheck", 0)
            if node["Node Type"] == "Seq Scan" or read > 100:
                found.append((" ".join(query.split()[:8]), node["Relation Name"], read))
    return found


def test_a_carts_timeline_reads_no_table_whole(busy, conn, recording):
    story = stories.of_cart(recording, busy.cart_id, SETTINGS.adapters())
    assert [p["payment_id"] for p in story.payments] == [busy.payment_id]
    assert any(e.kind == "delivery" and "HTTP 200" in e.facts[0][1] for e in story.entries)
    assert read_whole(conn, recording.ran) == []


def test_a_references_timeline_reads_no_table_whole(busy, conn, recording):
    story = stories.of_reference(recording, "razorpay", "order_fill_150", SETTINGS.adapters())
    assert [e.parked for e in story.entries if e.parked] == [("razorpay", "evt_fill_150")]
    assert read_whole(conn, recording.ran) == []


def test_searches_and_the_parked_list_read_no_table_whole(busy, conn, recording):
    for query in ("pay_fill_7", "order_fill_150", "evt_fill_9", "buyer@example.com", "x" * 200):
        search.search(recording, query)
    assert len(actions.parked(recording, 10)) == 10
    assert read_whole(conn, recording.ran) == []
