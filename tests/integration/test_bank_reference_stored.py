"""The bank reference is stored with the delivery's record and found through its index."""

from __future__ import annotations

from payhooks.sim.gateway import bank_reference
from tests.factories import GATEWAY, deliver


def test_each_gateways_reference_is_stored_with_its_delivery(conn):
    deliveries = [
        GATEWAY.razorpay("payment.captured", payment_id="pay_r1", order_id="o_r", amount_paise=100),
        GATEWAY.cashfree(
            "PAYMENT_SUCCESS_WEBHOOK", order_id="o_c", cf_payment_id="5501", order_amount=1
        ),
        GATEWAY.payu(txnid="t_p", mihpayid="403993715531", amount="1.00"),
    ]
    for delivery in deliveries:
        deliver(conn, delivery)
    stored = dict(conn.execute("SELECT provider, bank_ref FROM processed_webhooks").fetchall())
    assert stored == {
        "razorpay": bank_reference("pay_r1"),
        "cashfree": bank_reference("5501"),
        "payu": bank_reference("403993715531"),
    }


def test_a_reference_is_found_through_its_index(conn):
    conn.execute("SET enable_seqscan = off")
    plan = conn.execute(
        "EXPLAIN SELECT event_id FROM processed_webhooks WHERE bank_ref = '1'"
    ).fetchall()
    assert "processed_webhooks_bank_ref" in " ".join(row[0] for row in plan)
