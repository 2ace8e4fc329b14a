"""A timeline reads only what concerns its cart, through indexes, however many deliveries the
retention window holds: the plans PostgreSQL chooses for every statement a story runs, on
tables filled and analysed like a busy shop's."""

from __future__ import annotations

import pytest

from payhooks.console import actions
from payhooks.events import Provider
from payhooks.service.console import search, stories
from tests.console.conftest import read_whole
from tests.factories import SETTINGS, deliver, purchase

ROWS = 20_000

FILL = f"""
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
                                merchant_ref, payload_sha256, body)
SELECT (ARRAY['razorpay', 'cashfree', 'payu'])[1 + n % 3], 'evt_fill_' || n, 'payment.captured',
       CASE WHEN n % 50 = 0 THEN 'parked' ELSE 'processed' END, 'pay_fill_' || n,
       'order_fill_' || n, md5(n::text), '\\x00'::bytea
FROM generate_series(1, {ROWS}) n;
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, event_id,
                                 event_type, payment_id, merchant_ref, body_bytes, duration_ms)
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
ANALYZE processed_webhooks, payhooks_deliveries, payments, payhooks_outbox;
"""


@pytest.fixture
def busy(conn):
    """A paid cart among 20,000 other deliveries, payments and emails."""
    buy = purchase(conn, Provider.RAZORPAY)
    deliver(conn, buy.captured())
    conn.execute(
        "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
        " event_id,"
        " payment_id, merchant_ref, body_bytes, duration_ms)"
        " VALUES (now(), 'razorpay', 200, 'processed', true, 'evt_mine', %s, %s, 10, 1)",
        (buy.payment_id, buy.reference),
    )
    conn.execute(FILL.encode())
    return buy


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
