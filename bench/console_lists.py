"""What the console's lists read on a long delivery log and many payments.

    DATABASE_URL=… .venv/bin/python bench/console_lists.py [--lines 1000000] [--days 90]
                                                          [--payments 200000]

Seeds ``--lines`` lines of the delivery log spread over ``--days`` (one in 500 a 503, one in
200 a 401, four gateways), ``--payments`` payments applied over the same days, and a few
hundred parked deliveries and amount mismatches; then runs each list's first page, as the
pages do (``payhooks.console.lists``, ``payhooks.console.bulk``), under EXPLAIN (ANALYZE,
BUFFERS). Printed per query: rows returned, rows the plan read (returned plus filtered out, at
every scan), shared buffers touched and execution time.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from _load import database

from payhooks.console import bulk, lists

SEED = [
    """INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,
           event_id, merchant_ref, body_bytes, duration_ms)
       SELECT now() - g * %(days)s * interval '1 day' / %(lines)s,
              (ARRAY['razorpay', 'cashfree', 'payu', 'phonepe'])[1 + g %% 4],
              CASE WHEN g %% 500 = 0 THEN 503 WHEN g %% 200 = 0 THEN 401 ELSE 200 END,
              CASE WHEN g %% 500 = 0 THEN 'database_unavailable'
                   WHEN g %% 200 = 0 THEN 'signature_mismatch' ELSE 'processed' END,
              g %% 200 <> 0, 'evt_' || g, 'order_' || g, 900, 3
       FROM generate_series(1, %(lines)s) AS g""",
    """INSERT INTO payhooks_payments (provider, payment_id, kind, gateway_order_id, event_id,
           reconciled, applied_at)
       SELECT (ARRAY['razorpay', 'cashfree', 'payu', 'phonepe'])[1 + g %% 4], 'pay_' || g,
              'payment_captured', 'order_' || g, 'evt_' || g, false,
              now() - g * %(days)s * interval '1 day' / %(payments)s
       FROM generate_series(1, %(payments)s) AS g""",
    """INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
           merchant_ref, payload_sha256, body, processed_at)
       SELECT 'razorpay', 'parked_' || g, 'payment.captured', 'parked', 'ppay_' || g,
              'porder_' || g, md5('parked' || g), '\\x7b7d', now() - g * interval '1 hour'
       FROM generate_series(1, 300) AS g""",
    """INSERT INTO payhooks_amount_mismatches (provider, event_id, gateway_order_id,
           payment_id, expected_paise, expected_currency, paid_paise, paid_currency, found_at)
       SELECT provider, event_id, merchant_ref, payment_id, 49900, 'INR', 100, 'INR',
              processed_at FROM processed_webhooks WHERE event_id LIKE 'parked\\_%%' LIMIT 100""",
    "ANALYZE",
]


def read_rows(plan: dict[str, Any]) -> int:
    read = plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1)
    read += plan.get("Rows Removed by Filter", 0) + plan.get("Rows Removed by Index Recheck", 0)
    return int(read) + sum(read_rows(child) for child in plan.get("Plans", []))


def measured(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> dict[str, Any]:
    explain = f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}"
    [(found,)] = conn.execute(explain.encode(), params).fetchall()
    plan = found[0]["Plan"]
    return {
        "rows": plan["Actual Rows"],
        "read": read_rows(plan),
        "buffers": plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0),
        "ms": round(found[0]["Execution Time"], 1),
    }


def delivery_params(chosen: lists.DeliveryFilter) -> dict[str, Any]:
    return {
        "start": chosen.window.start, "end": chosen.window.end, "provider": chosen.gateway,
        "answer": chosen.answer, "mismatch": chosen.mismatch, "before": None,
        "limit": lists.PAGE,
    }  # fmt: skip


def payment_params(chosen: lists.PaymentFilter) -> dict[str, Any]:
    return {
        "start": chosen.window.start, "end": chosen.window.end, "provider": chosen.gateway,
        "status": chosen.status, "mismatch": chosen.mismatch, "needs_refund": False,
        "before_at": None, "before_key": None, "limit": lists.PAGE,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--payments", type=int, default=200_000)
    args = parser.parse_args()
    now = datetime.now(UTC)
    day = lists.Window(start=now - timedelta(days=1), end=now, end_given=False)
    every = lists.Window(start=now - timedelta(days=args.days + 1), end=now, end_given=True)
    with database() as url, psycopg.connect(url, autocommit=True) as conn:
        for sql in SEED:
            conn.execute(sql.encode(), vars(args))
        deliveries = {
            "deliveries, last 24 hours": lists.DeliveryFilter(window=day),
            "deliveries, payu failed, last 24 hours": lists.DeliveryFilter(
                gateway="payu", answer="failed", window=day
            ),
            "deliveries, payu failed, whole log": lists.DeliveryFilter(
                gateway="payu", answer="failed", window=every
            ),
            "deliveries, amount mismatch, last 24 hours": lists.DeliveryFilter(
                mismatch=True, window=day
            ),
        }
        found = {
            name: measured(conn, lists._DELIVERIES, delivery_params(chosen))
            for name, chosen in deliveries.items()
        }
        payments = {
            "payments, last 24 hours": lists.PaymentFilter(window=day),
            "payments, razorpay, whole log": lists.PaymentFilter(gateway="razorpay", window=every),
            "payments, parked for amount, whole log": lists.PaymentFilter(
                status="mismatch", window=every
            ),
        }
        for name, chosen in payments.items():
            found[name] = measured(conn, lists._PAYMENTS, payment_params(chosen))
        as_of = bulk.now(conn)
        everything = bulk.Chosen(gateway="razorpay", window=every, as_of=as_of)
        found["bulk replay, count of parked razorpay"] = measured(
            conn, bulk._LEFT, everything.params()
        )
    print(json.dumps({"seeded": vars(args), "plans": found}, indent=2))


if __name__ == "__main__":
    main()
