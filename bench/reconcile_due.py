"""What a reconciliation pass reads to find its due checkouts, before and after core 0008.

    DATABASE_URL=… .venv/bin/python bench/reconcile_due.py [--checkouts 100000] [--paid 0.95]
                                                          [--old 100000] [--limit 100]

Seeds ``--checkouts`` expectations over the last six days (the window is seven), ``--paid`` of
them captured by a webhook, and ``--old`` more from 8 to 60 days ago that no pass enrolled (as
a database upgraded from before 0008 holds them), all at Razorpay; then runs the due-checkout
claim of one gateway, as a pass does, under EXPLAIN (ANALYZE, BUFFERS), each statement in a
savepoint first and then for real. Printed per pass: statements, rows the plans read (rows
returned plus rows filtered out, at every scan of the core's tables), shared buffers touched
and execution time. "before" is the one statement payhooks ran until 0008 (``BEFORE`` below,
kept here to measure it), which worked out "captured" for every expectation in the window
before its LIMIT; "after" is ``payhooks.reconcile.checkouts.claim``: its first pass enrolls
every expectation once (those past the window too), a later pass reads about what it leases.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

import psycopg
from _load import database

from payhooks.events import Provider
from payhooks.reconcile import checkouts

WINDOW_S = 7 * 24 * 3600

# The due-checkout claim as it was before core 0008 (git show 3d147f1:src/payhooks/reconcile/
# checkouts.py): one statement, every expectation in the window probed before the LIMIT.
BEFORE = """
WITH due AS (
    SELECT e.provider, e.gateway_order_id
    FROM payhooks_expectations e
    LEFT JOIN payhooks_reconcile r
        ON r.provider = e.provider AND r.gateway_order_id = e.gateway_order_id
    CROSS JOIN LATERAL (
        SELECT EXISTS (
            SELECT 1 FROM processed_webhooks w
            JOIN payhooks_payments p ON p.provider = w.provider AND p.payment_id = w.payment_id
            WHERE w.provider = e.provider AND w.merchant_ref = e.gateway_order_id
              AND p.kind = 'payment_captured') AS yes
    ) captured
    WHERE e.provider = ANY(%(providers)s)
      AND e.created_at <= now() - make_interval(secs => %(after_s)s)
      AND e.created_at >= now() - make_interval(secs => %(window_s)s)
      AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= now())
      AND NOT (e.provider = 'payu' AND captured.yes)
    ORDER BY captured.yes, coalesce(r.next_attempt_at, e.created_at), e.provider,
        e.gateway_order_id
    LIMIT %(limit)s
)
INSERT INTO payhooks_reconcile AS r (provider, gateway_order_id, next_attempt_at)
SELECT provider, gateway_order_id, now() + %(lease)s FROM due
ON CONFLICT (provider, gateway_order_id) DO UPDATE
    SET next_attempt_at = excluded.next_attempt_at
    WHERE r.next_attempt_at <= now()
RETURNING r.provider, r.gateway_order_id, r.attempts,
    (SELECT reference FROM payhooks_expectations e
     WHERE e.provider = r.provider AND e.gateway_order_id = r.gateway_order_id)
"""

SEED = [
    """INSERT INTO payhooks_expectations
           (provider, gateway_order_id, amount_paise, currency, reference, created_at)
       SELECT 'razorpay', 'order_' || g, 49900, 'INR', 'ref_' || g,
              now() - interval '1 hour' - (%(checkouts)s - g) * interval '5 days' / %(checkouts)s
       FROM generate_series(1, %(checkouts)s) AS g""",
    """INSERT INTO payhooks_expectations
           (provider, gateway_order_id, amount_paise, currency, reference, created_at)
       SELECT 'razorpay', 'old_' || g, 49900, 'INR', 'old_' || g,
              now() - interval '8 days' - g * interval '52 days' / %(old)s
       FROM generate_series(1, %(old)s) AS g""",
    """INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
           merchant_ref, payload_sha256, body)
       SELECT 'razorpay', 'evt_' || g, 'payment.captured', 'processed', 'pay_' || g,
              'order_' || g, md5(g::text), '\\x00'
       FROM generate_series(1, %(checkouts)s) AS g WHERE random() < %(paid)s""",
    """INSERT INTO payhooks_payments
           (provider, payment_id, kind, gateway_order_id, event_id, reconciled)
       SELECT provider, payment_id, 'payment_captured', merchant_ref, event_id, false
       FROM processed_webhooks""",
]

SCANS = {"Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Tid Scan"}
TABLES = {"payhooks_expectations", "payhooks_reconcile", "processed_webhooks", "payhooks_payments"}


@dataclass
class Figures:
    statements: int = 0
    rows: int = 0
    buffers: int = 0
    ms: float = 0.0
    plans: list[dict[str, Any]] = field(default_factory=list)

    def add(self, plan: dict[str, Any]) -> None:
        self.statements += 1
        self.rows += rows_read(plan["Plan"])
        top = plan["Plan"]
        self.buffers += top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
        self.ms += plan["Execution Time"]
        self.plans.append(plan)

    def line(self, label: str) -> str:
        return (
            f"{label:<44} statements {self.statements:>4}  rows read {self.rows:>9,}"
            f"  buffers {self.buffers:>9,}  {self.ms:>9.1f} ms"
        )


def rows_read(node: dict[str, Any]) -> int:
    """Rows a scan of the core's tables produced plus those its filters dropped, per loop."""
    own = 0
    if node["Node Type"] in SCANS and node.get("Relation Name") in TABLES:
        per_loop = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
        own = round(per_loop * node["Actual Loops"])
    return own + sum(rows_read(child) for child in node.get("Plans", []))


class Explained:
    """A connection that runs each statement under EXPLAIN (ANALYZE, BUFFERS) in a savepoint,
    keeps the figures, rolls it back, then runs it for real."""

    def __init__(self, conn: psycopg.Connection, figures: Figures) -> None:
        self.conn = conn
        self.figures = figures

    def execute(self, sql: str, params: Any = None) -> psycopg.Cursor[Any]:
        explain = b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql.encode()
        with self.conn.transaction(force_rollback=True):
            found = self.conn.execute(explain, params).fetchone()
        assert found is not None
        self.figures.add(found[0][0])
        return self.conn.execute(sql.encode(), params)


def before(conn: psycopg.Connection, limit: int) -> Figures:
    figures = Figures()
    params = {"providers": ["razorpay"], "after_s": 0, "window_s": WINDOW_S, "limit": limit,
              "lease": checkouts.LEASE}  # fmt: skip
    with conn.transaction(force_rollback=True):  # leaves the database as it found it
        Explained(conn, figures).execute(BEFORE, params).fetchall()
    return figures


def after(conn: psycopg.Connection, limit: int) -> Figures:
    figures = Figures()
    with conn.transaction():
        due = checkouts.claim(
            Explained(conn, figures),  # type: ignore[arg-type]
            [Provider.RAZORPAY],
            after_s=0,
            window_s=WINDOW_S,
            limit=limit,
        )
    assert len(due) == limit, f"{len(due)} leased, {limit} wanted"
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkouts", type=int, default=100_000)
    parser.add_argument("--paid", type=float, default=0.95)
    parser.add_argument("--old", type=int, default=100_000)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--plans", action="store_true", help="print the later pass's plans")
    args = parser.parse_args()
    with database() as url, psycopg.connect(url, autocommit=True) as conn:
        for statement in SEED:
            conn.execute(statement, vars(args))
        conn.execute("VACUUM ANALYZE")
        print(
            f"{args.checkouts:,} checkouts in the window ({args.paid:.0%} paid), {args.old:,}"
            f" past it, one gateway; limit {args.limit}"
        )
        print(before(conn, args.limit).line("before: every pass"))
        print(after(conn, args.limit).line("after: the first pass (enrolls each once)"))
        conn.execute("VACUUM ANALYZE")  # as autovacuum does once a tenth of a table changed
        later = after(conn, args.limit)
        print(later.line("after: a later pass"))
        print(after(conn, args.limit).line("after: the pass after that"))
        if args.plans:
            print(json.dumps(later.plans, indent=1))


if __name__ == "__main__":
    main()
