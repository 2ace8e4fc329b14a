"""Which expected checkouts a pass claims (``payhooks.reconcile.checkouts.claim``), on the core's
tables on real PostgreSQL: the unpaid ones first, then the captured ones, never a captured PayU
txnid, nothing outside the window; and what a pass reads is bounded by its limit, not by the
number of checkouts expected in the window."""

from __future__ import annotations

from payhooks.events import Provider
from payhooks.plumbing import db
from payhooks.reconcile import checkouts

DAY_S = 24 * 3600
WINDOW_S = 7 * DAY_S

# ``n`` expected checkouts, order_1 to order_n, spread over the last six days (oldest first).
EXPECTED = """
INSERT INTO payhooks_expectations
    (provider, gateway_order_id, amount_paise, currency, reference, created_at)
SELECT %(provider)s, 'order_' || g, 100, 'INR', 'ref_' || g,
       now() - make_interval(secs => 3600 + (%(n)s - g) * 5 * 86400.0 / %(n)s)
FROM generate_series(1, %(n)s) AS g
"""
# A webhook captured the payment of each checkout numbered.
CAPTURED = """
WITH paid AS (
    SELECT %(provider)s AS provider, 'order_' || g AS ref, 'pay_' || g AS payment
    FROM unnest(%(numbers)s::int[]) AS g
), claims AS (
    INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payment_id,
        merchant_ref, payload_sha256, body)
    SELECT provider, 'evt_' || payment, 'payment.captured', 'processed', payment, ref,
        md5(provider || payment), '\\x00'
    FROM paid
)
INSERT INTO payhooks_payments (provider, payment_id, kind, gateway_order_id, event_id, reconciled)
SELECT provider, payment, 'payment_captured', ref, 'evt_' || payment, false FROM paid
"""


def expected(conn: db.Connection, n: int, provider: Provider = Provider.RAZORPAY) -> None:
    conn.execute(EXPECTED, {"provider": provider.value, "n": n})


def captured(conn: db.Connection, *numbers: int, provider: Provider = Provider.RAZORPAY) -> None:
    conn.execute(CAPTURED, {"provider": provider.value, "numbers": list(numbers)})


def most(n: int) -> list[int]:
    """Nine in ten of order_1 to order_n: all but every tenth."""
    return [g for g in range(1, n + 1) if g % 10]


DUE_AGAIN = "UPDATE payhooks_reconcile SET next_attempt_at = now() - interval '1 minute'"


def claim(conn: db.Connection, limit: int = 20, *, after_s: int = 0,
          window_s: int = WINDOW_S, providers=(Provider.RAZORPAY,)) -> list[str]:  # fmt: skip
    due = checkouts.claim(conn, list(providers), after_s=after_s, window_s=window_s, limit=limit)
    return sorted(d.reference for d in due)


# Rows a transaction has read so far from the tables a pass looks at, however it read them.
READ = """
SELECT sum(seq_tup_read + idx_tup_fetch) FROM pg_stat_xact_user_tables
WHERE relname IN ('payhooks_expectations', 'payhooks_reconcile', 'processed_webhooks',
                  'payhooks_payments')
"""


def rows_read_by_a_pass(conn: db.Connection, limit: int) -> int:
    with conn.transaction(force_rollback=True):
        before = conn.execute(READ).fetchone()
        claim(conn, limit)
        after = conn.execute(READ).fetchone()
    assert before is not None and after is not None
    return int(after[0] or 0) - int(before[0] or 0)


def test_a_pass_reads_rows_bounded_by_its_limit_not_by_the_checkouts_in_the_window(conn):
    expected(conn, 3000)
    captured(conn, *most(3000))
    conn.execute("ANALYZE")
    claim(conn, 20)  # the first pass meets every checkout once
    # and statistics of what it enrolled, as autovacuum keeps them: left to chance, the plan
    # of the next pass depended on whether autovacuum had analysed the enrolled rows yet.
    conn.execute("ANALYZE")
    read = rows_read_by_a_pass(conn, 20)
    assert read < 3000 / 10, f"a pass leasing 20 of 3000 checkouts read {read} rows"


def test_checkouts_with_no_capture_are_claimed_before_captured_ones(conn):
    expected(conn, 10)
    captured(conn, 2, 4, 6, 8, 10)
    assert claim(conn, 5) == ["order_1", "order_3", "order_5", "order_7", "order_9"]
    assert claim(conn, 5) == ["order_10", "order_2", "order_4", "order_6", "order_8"]


def test_a_checkout_captured_after_it_was_enrolled_waits_behind_the_ones_with_none(conn):
    expected(conn, 3)
    assert claim(conn, 2) == ["order_1", "order_2"]
    conn.execute(DUE_AGAIN)
    captured(conn, 1)  # order_1's webhook came late
    assert claim(conn, 2) == ["order_2", "order_3"]
    flags = conn.execute("SELECT gateway_order_id, captured FROM payhooks_reconcile ORDER BY 1")
    assert flags.fetchall() == [("order_1", True), ("order_2", False), ("order_3", False)]
    assert claim(conn, 2) == ["order_1"]


def test_a_captured_payu_checkout_is_never_claimed(conn):
    expected(conn, 2, Provider.PAYU)
    captured(conn, 1, provider=Provider.PAYU)
    assert claim(conn, 5, providers=[Provider.PAYU]) == ["order_2"]
    conn.execute(DUE_AGAIN)
    assert claim(conn, 5, providers=[Provider.PAYU]) == ["order_2"]


def test_nothing_past_the_window_is_claimed_and_a_longer_window_still_finds_it(conn):
    expected(conn, 1)
    claim(conn, 1)
    # Eight days old, last asked late in its seven-day window: its next attempt falls after it.
    conn.execute("UPDATE payhooks_expectations SET created_at = now() - interval '8 days'")
    conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now() - interval '1 hour'")
    assert claim(conn, 5) == []
    assert claim(conn, 5) == []
    assert claim(conn, 5, window_s=9 * DAY_S) == ["order_1"]


def test_claims_at_the_same_moment_never_lease_one_checkout_twice(conn, database_url):
    import psycopg

    from tests.conftest import released_together

    expected(conn, 60)
    captured(conn, *most(60))  # six with no capture, then the captured ones
    leased = released_together(
        list(range(4)),
        lambda _: psycopg.connect(database_url, autocommit=True),
        lambda other, _: claim(other, 15),
    )
    every = [ref for refs in leased for ref in refs]
    assert len(every) == len(set(every))
    recorded = conn.execute(
        "SELECT gateway_order_id FROM payhooks_reconcile WHERE next_attempt_at > now()"
    ).fetchall()
    assert sorted(every) == sorted(row[0] for row in recorded)
