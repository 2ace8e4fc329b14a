"""Every webhook request is written to the delivery log as it was answered: duplicates and
refusals too, and a refused request without the bytes or claims it was not proven to own."""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from datetime import UTC, datetime

import psycopg
import pytest

from payhooks.service import deliveries
from payhooks.service.metrics import Metrics
from tests.factories import SETTINGS, purchase
from tests.integration.test_web import post


def line(
    provider: str, status: int = 200, outcome: str = "processed", *, verified: bool = True
) -> deliveries.Delivery:
    """A log line as the service writes one for an answered delivery."""
    return deliveries.Delivery(
        received_at=datetime.now(UTC),
        provider=provider,
        status=status,
        outcome=outcome,
        verified=verified,
    )


def logged(url: str, count: int) -> list[dict]:
    """The log is written a moment after the answer: wait (a bounded while) for the lines."""
    deadline = time.monotonic() + 10
    while True:
        with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
            rows = conn.execute("SELECT * FROM payhooks_deliveries ORDER BY id").fetchall()
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def test_processed_duplicate_and_forged_are_each_a_line(service, conn):
    buy = purchase(conn)
    delivery = buy.captured()
    post(service, delivery)
    post(service, delivery)
    forged = post(service, delivery, headers={"x-razorpay-signature": "0" * 64})
    assert forged.status_code == 401
    rows = logged(service.database_url, 3)
    assert [(r["status"], r["outcome"], r["verified"]) for r in rows] == [
        (200, "processed", True),
        (200, "duplicate", True),
        (401, "signature_mismatch", False),
    ]
    first, _, refused = rows
    assert first["merchant_ref"] == buy.reference and first["event_id"]
    assert refused["event_id"] is None and refused["merchant_ref"] is None
    assert refused["body_sha256"] == hashlib.sha256(delivery.body).hexdigest()
    assert refused["body_bytes"] == len(delivery.body)


def test_a_request_for_an_unknown_gateway_is_logged_under_unknown(service):
    with service.client() as client:
        assert client.post("/webhooks/<script>", content=b"{}").status_code == 404
    [row] = logged(service.database_url, 1)
    assert (row["provider"], row["status"], row["outcome"]) == (
        "unknown",
        404,
        "provider_not_configured",
    )


def test_lines_wait_while_the_database_is_away_and_are_written_after(database_url):
    log = deliveries.DeliveryLog("postgresql://127.0.0.1:1/none", SETTINGS, every_seconds=60)
    delivered = line("razorpay")
    log.add(delivered)
    assert log.flush() == 0  # the database is away: kept, not lost
    log._side = deliveries.side_connection(database_url, SETTINGS)  # the database is back
    assert log.flush() == 1
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchone()[0] == 1


def test_the_oldest_lines_go_first_past_the_cap():
    dropped: list[int] = []
    log = deliveries.DeliveryLog(
        "postgresql://127.0.0.1:1/none", SETTINGS, max_pending=2, on_drop=dropped.append
    )
    for status in (200, 401, 503):
        log.add(line("payu", status, outcome="x", verified=False))
    assert [d.status for d in log._pending] == [401, 503]
    assert dropped == [1]


def test_lines_that_cannot_be_written_at_close_are_counted_as_dropped():
    dropped: list[int] = []
    log = deliveries.DeliveryLog(
        "postgresql://127.0.0.1:1/none", SETTINGS, every_seconds=60, on_drop=dropped.append
    )
    delivered = line("cashfree")
    log.add(delivered)
    log.add(delivered)
    log.close()  # the database is away: two lines lost, and said so
    log.add(delivered)  # after closing: lost too, and counted
    assert dropped == [2, 1]


def written(url: str) -> list[tuple[str, int]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT provider, status FROM payhooks_deliveries ORDER BY id"
        ).fetchall()


UNWRITABLE = {
    "a lone surrogate": {"event_id": "evt_\ud800"},
    "a NUL": {"detail": "refused \x00"},
}


@pytest.mark.parametrize("bad", UNWRITABLE.values(), ids=UNWRITABLE)
def test_a_line_the_database_refuses_is_dropped_alone_and_the_others_are_written(database_url, bad):
    metrics = Metrics()
    log = deliveries.DeliveryLog(
        database_url, SETTINGS, every_seconds=60, on_unwritable=metrics.log_unwritable
    )
    for status in (200, 201, 202):
        log.add(line("razorpay", status))
    log.add(replace(line("cashfree", 400), **bad))
    for status in (203, 204):
        log.add(line("payu", status))
    assert log.flush() == 5
    assert not log._pending  # nothing left to fail the next batch
    assert metrics.registry.get_sample_value("payhooks_delivery_log_unwritable_total") == 1
    log.add(line("razorpay", 205))
    assert log.flush() == 1
    assert [status for _, status in written(database_url)] == [200, 201, 202, 203, 204, 205]
    assert metrics.registry.get_sample_value("payhooks_delivery_log_dropped_total") == 0


def test_lines_not_yet_written_wait_in_order_when_the_database_goes_away(database_url):
    log = deliveries.DeliveryLog(database_url, SETTINGS, every_seconds=60)
    lines = [line("razorpay", status) for status in (200, 201)]
    lines.insert(1, replace(line("payu", 400), event_id="evt_\ud800"))
    for each in lines:
        log.add(each)
    log._side = deliveries.side_connection("postgresql://127.0.0.1:1/none", SETTINGS)  # away
    assert log.flush() == 0
    assert [d.status for d in log._pending] == [200, 400, 201]


def slow_past(conn: psycopg.Connection, lines: int) -> None:
    """A COPY of more than ``lines`` lines takes longer than the log's statement timeout (a
    busy database writing a long backlog), one of at most ``lines`` goes through at once."""
    conn.execute(
        f"""
        CREATE FUNCTION slow_past() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF (SELECT count(*) FROM written) > {lines:d} THEN PERFORM pg_sleep(5); END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER slow_past AFTER INSERT ON payhooks_deliveries
            REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION slow_past();
        """
    )


def test_a_long_backlog_is_written_batch_by_batch_after_an_outage(database_url, conn):
    slow_past(conn, 5_000)  # a bounded COPY is a few thousand lines at most
    log = deliveries.DeliveryLog(database_url, SETTINGS, every_seconds=60)
    for status in range(50_000):
        log.add(line("razorpay", 200 + status % 300))
    assert log.flush() == 50_000
    assert not log._pending
    assert conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchone()[0] == 50_000


def test_a_batch_too_slow_to_write_is_split_not_taken_for_the_database_away(database_url, conn):
    slow_past(conn, 400)
    log = deliveries.DeliveryLog(database_url, SETTINGS, every_seconds=60)
    for status in range(1_000):
        log.add(line("payu", status))
    assert log.flush() == 1_000
    assert [status for _, status in written(database_url)] == list(range(1_000))
