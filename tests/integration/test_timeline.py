"""``payhooks.timeline``: one gateway order's story from the core's tables alone (the
expectation, each delivery and what it did, the payments applied, the delivery log's lines,
reconciliation's state), found by whatever an operator types; every statement through an
index on tables of thousands of rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import payhooks
from payhooks import Outcome, ingest
from payhooks.events import Provider
from payhooks.intake.expectations import resolve
from payhooks.operations.timeline import Matched, answer, find, story
from payhooks.reconcile import run
from payhooks.refunding import refunds
from payhooks.sim.gateway import Purchase, bank_reference
from payhooks.sim.gateway_api import GatewayApi, serving
from tests.console.conftest import Recording, nodes
from tests.factories import ADAPTERS, GATEWAY
from tests.reconcile.conftest import API_KEYS
from tests.reconcile.merchant_hooks import ORDERS, hooks

REF = "order_tl00000000001"
PAYMENT = "pay_tl000000000001"
LOGGED = """
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, event_id,
    event_type, payment_id, merchant_ref, body_bytes, detail, duration_ms)
VALUES (%s, 'razorpay', %s, %s, true, %s, 'payment.captured', %s, %s, 300, %s, 1)
"""


@pytest.fixture
def shop(conn):
    """The merchant's orders and an order checked out at Razorpay for 499.00 (theirs: A-1)."""
    conn.execute(ORDERS)
    with conn.transaction():
        conn.execute("INSERT INTO merchant_orders (ref, amount) VALUES (%s, 49900)", (REF,))
        payhooks.expect(conn, "razorpay", REF, 49_900, "INR", "A-1")
    return conn


def capture(amount: int = 49_900, key: str = "evt_tl1") -> Any:
    return GATEWAY.razorpay(
        "payment.captured", payment_id=PAYMENT, order_id=REF, amount_paise=amount, event_id=key
    )


def deliver(conn, delivery) -> Outcome:
    return ingest(conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, hooks).outcome


def test_a_webhooks_payment_shows_the_expectation_the_delivery_and_the_payment(shop):
    assert deliver(shop, capture()) is Outcome.PROCESSED
    told = story(shop, "razorpay", REF)
    assert told is not None and told.expected is not None
    assert (told.expected.amount_paise, told.expected.currency, told.expected.reference) == (
        49_900,
        "INR",
        "A-1",
    )
    [record] = told.records
    assert (record.event_id, record.outcome, record.payment_id) == ("evt_tl1", "processed", PAYMENT)
    assert not record.reconciled and record.amount_mismatch is None
    assert record.bank_ref == bank_reference(PAYMENT)
    assert [(p.payment_id, p.by, p.event_id) for p in told.payments] == [
        (PAYMENT, "webhook", "evt_tl1")
    ]
    assert told.parked == []


def test_an_underpaid_capture_shows_both_amounts_until_a_person_resolves_it(shop):
    assert deliver(shop, capture(amount=100)) is Outcome.PARKED
    told = story(shop, "razorpay", REF)
    assert told is not None
    [record] = told.parked
    mismatch = record.amount_mismatch
    assert mismatch is not None and not mismatch.resolved
    assert (mismatch.expected_paise, mismatch.paid_paise, mismatch.paid_currency) == (
        49_900,
        100,
        "INR",
    )
    assert told.payments == []
    resolve(shop, "razorpay", "evt_tl1", "refunded")
    [record] = story(shop, "razorpay", REF).records  # type: ignore[union-attr]
    assert record.outcome == "ignored"
    assert record.amount_mismatch.resolved and record.amount_mismatch.resolution == "refunded"  # type: ignore[union-attr]


def test_a_payment_reconciliation_found_shows_its_pass_and_the_late_webhook(shop, database_url):
    api = GatewayApi(API_KEYS)
    order = Purchase(provider=Provider.RAZORPAY, cart_id="A-1", reference=REF,
                     amount_paise=49_900, items={"TEA": 1})  # fmt: skip
    api.pay(order, PAYMENT)
    with serving(api) as url:
        run(database_url, hooks, environ=API_KEYS.env(url), after_s=0)
    deliver(shop, capture(key="evt_tl_late"))
    told = story(shop, "razorpay", REF)
    assert told is not None
    assert [r.reconciled for r in told.records] == [True, False]
    assert [(p.payment_id, p.by) for p in told.payments] == [(PAYMENT, "reconciliation")]
    assert told.reconciling is not None and told.reconciling.attempts == 1
    assert told.reconciling.last_error is None


def test_the_delivery_logs_lines_refused_ones_too_come_in_the_order_received(shop):
    at = datetime(2025, 1, 1, tzinfo=UTC)
    shop.execute(LOGGED, (at, 500, "handler_error", "evt_tl1", PAYMENT, REF, "RuntimeError"))
    shop.execute(LOGGED, (at.replace(minute=1), 200, "processed", "evt_tl1", PAYMENT, REF, None))
    told = story(shop, "razorpay", REF)
    assert told is not None
    assert [(line.status, line.outcome, line.detail) for line in told.lines] == [
        (500, "handler_error", "RuntimeError"),
        (200, "processed", None),
    ]


def test_an_order_no_table_names_has_no_story(conn):
    assert story(conn, "razorpay", "order_nobody") is None
    assert find(conn, "order_nobody") == []


@pytest.mark.parametrize(
    ("typed", "matched"),
    [
        (REF, Matched.GATEWAY_ORDER),
        ("A-1", Matched.REFERENCE),
        (PAYMENT, Matched.PAYMENT),
        ("evt_tl1", Matched.DELIVERY_KEY),
        (bank_reference(PAYMENT), Matched.BANK_REFERENCE),
    ],
)
def test_whatever_the_operator_types_finds_the_order_and_says_how(shop, typed, matched):
    deliver(shop, capture())
    [found] = find(shop, f"  {typed} ")
    assert (found.provider, found.gateway_order_id, found.matched) == ("razorpay", REF, matched)


@pytest.mark.parametrize("typed", ["evt_tl_refund", "arn_tl_refund"])
def test_a_delivery_naming_no_order_is_found_through_its_payments_order(shop, typed):
    """A refund's delivery that names only the payment (some gateways' do) leads to the order
    the payment was applied to, by its key or its bank reference."""
    deliver(shop, capture())
    shop.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,"
        " bank_ref, payload_sha256, body) VALUES ('razorpay', 'evt_tl_refund',"
        " 'refund.processed', 'processed', %s, 'arn_tl_refund', md5('r'), '\\x00'::bytea)",
        (PAYMENT,),
    )
    [found] = find(shop, typed)
    assert (found.provider, found.gateway_order_id) == ("razorpay", REF)


def test_a_refund_id_finds_its_payments_order(shop):
    """An operator holding only a refund's id (the customer's email, the gateway's dashboard)
    found nothing: a refund the gateway reported, and one payhooks sent (by the gateway's id,
    and by the key it was sent under: Cashfree's refund_id), each lead to the order of their
    payment."""
    deliver(shop, capture())
    reported = GATEWAY.razorpay("refund.processed", payment_id=PAYMENT, order_id=REF,
                                amount_paise=49_900, refund_id="rfnd_tl_reported",
                                refund_amount_paise=100)  # fmt: skip
    deliver(shop, reported)  # the merchant's hooks take no refund: recorded all the same
    with shop.transaction():
        sent = refunds.request(shop, "razorpay", PAYMENT, 200, key="tl-sent", captured_paise=49_900,
                               reason="test", requested_by="test")  # fmt: skip
    shop.execute(
        "UPDATE payhooks_refunds SET state = 'sent', gateway_refund_id = 'rfnd_tl_sent'"
        " WHERE idempotency_key = %s",
        (sent.idempotency_key,),
    )
    for typed in ("rfnd_tl_reported", "rfnd_tl_sent", sent.idempotency_key):
        [found] = find(shop, typed)
        assert (found.provider, found.gateway_order_id, found.matched) == (
            "razorpay", REF, Matched.REFUND,
        ), typed  # fmt: skip


def test_the_json_answer_names_each_order_with_its_story(shop):
    deliver(shop, capture())
    told = answer(shop, PAYMENT)
    assert told["query"] == PAYMENT
    [order] = told["orders"]
    assert order["matched"] == "payment id" and order["gateway_order_id"] == REF
    assert order["expected"]["amount_paise"] == 49_900
    assert order["records"][0]["reconciled"] is False
    assert order["payments"][0]["by"] == "webhook"
    assert isinstance(order["records"][0]["at"], str)


# --- plans ----------------------------------------------------------------------------------

ROWS = 5_000
FILLED = {
    "processed_webhooks",
    "payhooks_deliveries",
    "payhooks_payments",
    "payhooks_expectations",
    "payhooks_amount_mismatches",
    "payhooks_reconcile",
}
FILL = f"""
INSERT INTO payhooks_expectations (provider, gateway_order_id, amount_paise, currency, reference)
SELECT 'razorpay', 'order_fill_' || n, 100, 'INR', 'ref_fill_' || n
FROM generate_series(1, {ROWS}) n;
INSERT INTO payhooks_reconcile (provider, gateway_order_id)
SELECT 'razorpay', 'order_fill_' || n FROM generate_series(1, {ROWS}) n;
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
                                merchant_ref, order_ref, bank_ref, payload_sha256, body)
SELECT (ARRAY['razorpay', 'cashfree', 'payu'])[1 + n % 3], 'evt_fill_' || n, 'payment.captured',
       CASE WHEN n % 5 = 0 THEN 'parked' ELSE 'processed' END, 'pay_fill_' || n,
       'order_fill_' || n, 'ref_fill_' || n, 'utr_fill_' || n, md5(n::text), '\\x00'::bytea
FROM generate_series(1, {ROWS}) n;
INSERT INTO payhooks_amount_mismatches (provider, event_id, gateway_order_id, payment_id,
    expected_paise, expected_currency, paid_paise, paid_currency)
SELECT provider, event_id, merchant_ref, payment_id, 100, 'INR', 1, 'INR'
FROM processed_webhooks WHERE outcome = 'parked';
INSERT INTO payhooks_payments (provider, payment_id, kind, gateway_order_id, event_id, reconciled,
                               reference, order_ref, bank_ref)
SELECT (ARRAY['razorpay', 'cashfree', 'payu'])[1 + n % 3], 'pay_fill_' || n, 'captured',
       'order_fill_' || n, 'evt_fill_' || n, false, 'ref_fill_' || n, 'ord_fill_' || n,
       'utr_fill_' || n
FROM generate_series(1, {ROWS}) n;
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, event_id,
                                 event_type, payment_id, merchant_ref, body_bytes, duration_ms)
SELECT now() - n * interval '1 second', (ARRAY['razorpay', 'cashfree', 'payu'])[1 + n % 3],
       200, 'processed', true, 'evt_fill_' || n, 'payment.captured', 'pay_fill_' || n,
       'order_fill_' || n, 300, 1
FROM generate_series(1, {ROWS}) n;
ANALYZE processed_webhooks, payhooks_deliveries, payhooks_payments, payhooks_expectations,
        payhooks_amount_mismatches, payhooks_reconcile;
"""


@pytest.fixture
def recording(database_url: str):
    with psycopg.connect(database_url, autocommit=True, cursor_factory=Recording) as conn:
        conn.ran = []  # type: ignore[attr-defined]
        yield conn


def read_whole(conn, ran: list[tuple[str, Any]]) -> list[tuple[str, str, int]]:
    """The filled tables each statement scans whole, or reads more than an order's worth of."""
    found = []
    for query, params in ran:
        [(plan,)] = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query}", params).fetchall()
        for node in nodes(plan[0]["Plan"]):
            if node.get("Relation Name") not in FILLED:
                continue
            read = node["Actual Rows"] * node["Actual Loops"]
            read += node.get("Rows Removed by Filter", 0)
            read += node.get("Rows Removed by Index Recheck", 0)
            if node["Node Type"] == "Seq Scan" or read > 100:
                found.append((" ".join(query.split()[:8]), node["Relation Name"], read))
    return found


def test_finding_and_telling_read_no_table_whole(shop, recording):
    deliver(shop, capture())
    shop.execute(FILL)
    for typed in ("order_fill_150", "ref_fill_9", "ord_fill_10", "pay_fill_9", "evt_fill_11",
                  "utr_fill_13"):  # fmt: skip
        assert len(find(recording, typed)) == 1
    assert find(recording, "x" * 200) == []
    told = story(recording, "cashfree", "order_fill_100")
    assert told is not None and told.parked and told.payments and told.lines
    assert story(recording, "razorpay", REF) is not None
    assert read_whole(shop, recording.ran) == []
