"""Retention purge on real PostgreSQL: batches, boundaries, parked rows, and live ingest."""

from __future__ import annotations

import threading

import psycopg
import pytest

import payhooks
from payhooks.intake.ingest import Outcome
from payhooks.operations import retention as policy
from payhooks.plumbing.errors import RetentionTooShort
from payhooks.service import retention
from tests.factories import deliver, purchase

SEED = """
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payload_sha256, body,
                                processed_at)
SELECT 'razorpay', %s || g, 'payment.captured', %s, md5(%s || g), '\\x00',
       now() - make_interval(days => %s) - g * interval '1 second'
FROM generate_series(1, %s) AS g
"""


def seed(conn, prefix: str, count: int, days_old: int, outcome: str = "processed") -> None:
    conn.execute(SEED, (prefix, outcome, prefix, days_old, count))


def count(conn, prefix: str) -> int:
    return conn.execute(
        "SELECT count(*) FROM processed_webhooks WHERE event_id LIKE %s", (prefix + "%",)
    ).fetchone()[0]


def test_purge_deletes_only_what_is_older_than_the_window(conn):
    seed(conn, "old-", 2000, 100)
    seed(conn, "young-", 300, 89)
    result = retention.purge(conn, 90, batch_rows=250)
    assert (result.expired, result.deleted) == (2000, 2000)
    assert (count(conn, "old-"), count(conn, "young-")) == (0, 300)


def test_purge_keeps_parked_deliveries(conn):
    seed(conn, "parked-", 5, 200, outcome="parked")
    retention.purge(conn, 90)
    assert count(conn, "parked-") == 5


def test_plan_counts_without_deleting(conn):
    seed(conn, "old-", 40, 100)
    assert retention.plan(conn, 90).expired == 40
    assert count(conn, "old-") == 40


def test_purge_reports_progress_per_batch_and_in_the_database(conn):
    seed(conn, "old-", 1000, 100)
    batches: list[int] = []
    retention.purge(conn, 90, batch_rows=400, on_batch=batches.append)
    assert batches == [400, 400, 200]
    expected, done, finished = conn.execute(
        "SELECT rows_expected, rows_done, finished_at FROM maintenance_runs"
    ).fetchone()
    assert (expected, done) == (1000, 1000) and finished is not None


def test_a_relayed_event_an_app_holds_is_kept_once_not_once_per_sweep(conn):
    """The core's sweep of published events and the service's of sent messages both read
    ``payhooks_outbox``: one old relayed event an app's key held was kept, named and logged
    twice ("kept 2": review). Each sweep takes its own rows."""
    conn.execute("""INSERT INTO payhooks_outbox (dedupe_key, kind, subject, body, sent_at)
                    VALUES ('e1', 'event', 's', 'b', now() - interval '200 days'),
                           ('e2', 'event', 's', 'b', now() - interval '200 days')""")  # fmt: skip
    conn.execute("CREATE TABLE app_links (id bigint REFERENCES payhooks_outbox (id))")
    conn.execute("INSERT INTO app_links SELECT id FROM payhooks_outbox WHERE dedupe_key = 'e1'")
    done = retention.purge(conn, 90)
    assert done.kept_said() == "; kept 1 the database refused to delete", done.held
    assert conn.execute("SELECT dedupe_key FROM payhooks_outbox").fetchall() == [("e1",)]


def test_window_shorter_than_gateway_replays_is_refused_unless_forced():
    with pytest.raises(RetentionTooShort):
        policy.check_window(7, force=False)
    policy.check_window(7, force=True)
    policy.check_window(policy.MIN_RETENTION_DAYS, force=False)


def test_purge_while_deliveries_flow_keeps_every_young_record(conn, database_url):
    seed(conn, "old-", 20_000, 120)
    stop = threading.Event()
    delivered: list[str] = []
    during: list[int] = []

    errors: list[BaseException] = []

    def flow() -> None:
        try:
            with psycopg.connect(database_url, autocommit=True) as own:
                # A shop's steady flow, not a loop that takes the interpreter from the purge
                # (on a loaded machine the purge's batches then waited a minute for it).
                while not stop.wait(0.002):
                    receipt = deliver(own, purchase(own).captured())
                    assert receipt.outcome is Outcome.PROCESSED
                    delivered.append(receipt.event.event_id)
        except BaseException as exc:  # reported in the test's own thread below
            errors.append(exc)

    thread = threading.Thread(target=flow)
    thread.start()
    try:
        result = retention.purge(
            conn, 90, batch_rows=500, on_batch=lambda _: during.append(len(delivered))
        )
    finally:
        stop.set()
        thread.join(timeout=30)
    assert errors == []
    assert during[-1] > during[0], "ingest did not move while the purge ran"
    assert result.deleted == 20_000 and count(conn, "old-") == 0
    kept = conn.execute(
        "SELECT count(*) FROM processed_webhooks WHERE event_id = ANY(%s)", (delivered,)
    ).fetchone()[0]
    assert len(delivered) > 0 and kept == len(delivered)


def test_purge_takes_the_cores_old_expectations_too(conn):
    payhooks.expect(conn, "razorpay", "order_old", 100, "INR", "cart-old")
    conn.execute(
        "UPDATE payhooks_expectations SET created_at = now() - interval '100 days'"
        " WHERE gateway_order_id = 'order_old'"
    )
    payhooks.expect(conn, "razorpay", "order_new", 100, "INR", "cart-new")
    retention.purge(conn, 90)
    orders = conn.execute("SELECT gateway_order_id FROM payhooks_expectations").fetchall()
    assert orders == [("order_new",)]


def test_a_purge_is_refused_while_the_cores_purge_holds_the_lock(conn, database_url):
    with (
        psycopg.connect(database_url, autocommit=True) as first,
        policy.exclusively(first) as mine,
        psycopg.connect(database_url, autocommit=True) as holder,
    ):
        assert mine
        assert retention.purge_exclusively(conn, 90, holder=holder) is None
