"""What one look of the notifier costs on a busy database: each alert source's reads, then a
whole ``evaluate`` (the claims included), as the worker runs it once a minute.

    DATABASE_URL=… .venv/bin/python bench/alerts.py [--deliveries 500000] [--checkouts 100000]
                                                    [--parked 1000] [--runs 7]

Seeds ``--deliveries`` delivery-log lines over the last 24 hours at every gateway (one in 50
answered 503), ``--checkouts`` expectations over the last week that no pass enrolled (as a
gateway with no API credentials leaves them), and ``--parked`` deliveries parked an hour ago;
then prints, per source and for the whole pass, the median and the slowest of ``--runs`` runs,
in milliseconds, and how many alerts were found.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime

import psycopg
from _load import database

from payhooks.operations.alerts import core_sources
from payhooks.operations.notifier import Notifier

SEED = """
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, body_bytes,
                                 duration_ms)
SELECT now() - (n %% 86400) * interval '1 second',
       (ARRAY['razorpay', 'cashfree', 'payu', 'phonepe', 'juspay'])[1 + n %% 5],
       CASE WHEN n %% 50 = 0 THEN 503 ELSE 200 END,
       CASE WHEN n %% 50 = 0 THEN 'database_unavailable' ELSE 'processed' END, true, 300, 1
FROM generate_series(1, %(deliveries)s) n;
INSERT INTO payhooks_expectations (provider, gateway_order_id, amount_paise, currency, reference,
                                   created_at)
SELECT 'cashfree', 'order_' || n, 100, 'INR', 'cart_' || n,
       now() - (n %% 604000) * interval '1 second'
FROM generate_series(1, %(checkouts)s) n;
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payload_sha256, body,
                                processed_at)
SELECT 'payu', 'evt_' || n, 'payment.captured', 'parked', md5(n::text), '',
       now() - interval '1 hour'
FROM generate_series(1, %(parked)s) n;
ANALYZE;
"""


def timed(run: object, runs: int) -> tuple[float, float, int]:
    took: list[float] = []
    found = 0
    for _ in range(runs):
        start = time.perf_counter()
        found = len(run())  # type: ignore[operator]
        took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took), max(took), found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deliveries", type=int, default=500_000)
    parser.add_argument("--checkouts", type=int, default=100_000)
    parser.add_argument("--parked", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with database() as url, psycopg.connect(url, autocommit=True) as conn:
        counts = {"deliveries": args.deliveries, "checkouts": args.checkouts}
        params = {**counts, "parked": args.parked}
        for statement in filter(str.strip, SEED.split(";")):
            conn.execute(statement.encode() if "%(" not in statement else statement, params)
        now = datetime.now(UTC)
        sources = core_sources()
        print(f"{args.deliveries} deliveries, {args.checkouts} checkouts, {args.parked} parked")
        for source in sources:
            name = "+".join(sorted(c.value for c in source.conditions))
            median, worst, found = timed(lambda s=source: s.observe(conn, now), args.runs)
            print(f"{name:40} median {median:8.1f} ms  max {worst:8.1f} ms  {found} alert(s)")
        notifier = Notifier([], sources)
        median, worst, found = timed(lambda: notifier.evaluate(conn, now).open, args.runs)
        print(f"{'evaluate (whole pass)':40} median {median:8.1f} ms  max {worst:8.1f} ms  "
              f"{found} alert(s)")  # fmt: skip


if __name__ == "__main__":
    main()
