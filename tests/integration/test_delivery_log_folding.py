"""A forged-request flood costs the delivery log a few rows a minute, not one a request: the
first refusals of a kind in a minute are lines of their own, the rest of that minute one line
saying how many it stands for (``repeats``). Authentic deliveries are never folded, and every
health read counts what the lines stand for."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg

from payhooks.console import health as console_health
from payhooks.operations import deliverylog, health
from payhooks.operations.deliverylog import Delivery, DeliveryLog, own_connection

MINUTE = datetime(2026, 3, 2, 10, 15, tzinfo=UTC)


class Clock:
    """The log's clock, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def forged(at: datetime, provider: str = "razorpay", status: int = 401) -> Delivery:
    """A request refused before it was proven authentic, as ``deliverylog.line`` builds one."""
    return deliverylog.refused(
        provider,
        received_at=at,
        status=status,
        outcome="signature_mismatch" if status == 401 else "malformed_payload",
        detail=f"{provider}: signature mismatch",
        body=b'{"forged": true}',
    )


def authentic(at: datetime, n: int) -> Delivery:
    return Delivery(
        received_at=at,
        provider="razorpay",
        status=200,
        outcome="processed",
        verified=True,
        event_id=f"evt_{n}",
    )


def opened(database_url: str, clock: Clock | None = None, **options: int) -> DeliveryLog:
    if clock is None:
        return DeliveryLog(own_connection(database_url), every_seconds=60, **options)
    return DeliveryLog(own_connection(database_url), every_seconds=60, clock=clock, **options)


def rows(conn: psycopg.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT received_at, provider, status, verified, repeats, body_sha256, detail"
        " FROM payhooks_deliveries ORDER BY id"
    ).fetchall()


def spread(count: int, start: datetime = MINUTE) -> list[datetime]:
    """``count`` instants within the minute from ``start``."""
    return [start + timedelta(seconds=59 * n / count) for n in range(count)]


def test_a_minutes_flood_of_refusals_is_a_few_lines_not_one_a_request(database_url, conn):
    log = opened(database_url)
    for at in spread(5_000):
        log.add(forged(at))
    log.close()
    [(lines,)] = conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchall()
    assert lines < 5_000 / 100
    written = rows(conn)
    shown = deliverylog.REFUSALS_WRITTEN_PER_MINUTE
    assert len(written) == shown + 1
    assert sum(row[4] for row in written) == 5_000
    *each, folded = written
    assert [row[4] for row in each] == [1] * shown and all(row[5] for row in each)
    assert folded[4] == 5_000 - shown and folded[5] is None
    assert folded[6] == f"and {5_000 - shown:,} more refused like it this minute"
    assert folded[0] == spread(5_000)[-1]  # the last of them


def test_authentic_deliveries_among_the_flood_are_each_a_line(database_url, conn):
    log = opened(database_url)
    for n, at in enumerate(spread(2_000)):
        log.add(authentic(at, n) if n % 20 == 0 else forged(at))
    log.close()
    written = rows(conn)
    assert len([row for row in written if row[3]]) == 100
    assert all(row[4] == 1 for row in written if row[3])
    assert sum(row[4] for row in written if not row[3]) == 1_900
    assert len(written) == 100 + deliverylog.REFUSALS_WRITTEN_PER_MINUTE + 1


def test_each_kind_of_refusal_is_folded_on_its_own(database_url, conn):
    log = opened(database_url)
    for at in spread(300):
        log.add(forged(at, "razorpay", 401))
        log.add(forged(at, "payu", 401))
        log.add(forged(at, "razorpay", 400))
    log.close()
    counted = conn.execute(
        "SELECT provider, status, count(*), sum(repeats) FROM payhooks_deliveries"
        " GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    shown = deliverylog.REFUSALS_WRITTEN_PER_MINUTE
    assert counted == [
        ("payu", 401, shown + 1, 300),
        ("razorpay", 400, shown + 1, 300),
        ("razorpay", 401, shown + 1, 300),
    ]


def test_a_minutes_summary_is_written_once_the_minute_ends(database_url, conn):
    clock = Clock(MINUTE + timedelta(seconds=30))
    log = opened(database_url, clock)
    for at in spread(100):
        log.add(forged(at))
    log.flush()
    shown = deliverylog.REFUSALS_WRITTEN_PER_MINUTE
    assert [row[4] for row in rows(conn)] == [1] * shown  # the minute goes on
    clock.now = MINUTE + timedelta(minutes=1)
    log.flush()
    assert [row[4] for row in rows(conn)] == [1] * shown + [100 - shown]
    log.close()
    assert len(rows(conn)) == shown + 1


def test_refusals_across_a_minutes_end_are_counted_in_each(database_url, conn):
    clock = Clock(MINUTE)
    log = opened(database_url, clock)
    after = MINUTE + timedelta(minutes=1)
    for at in spread(70):
        log.add(forged(at))
    clock.now = after
    for at in spread(45, after):
        log.add(forged(at))
    log.flush()
    clock.now = after + timedelta(minutes=1)
    log.flush()
    by_minute = conn.execute(
        "SELECT date_trunc('minute', received_at), count(*), sum(repeats)"
        " FROM payhooks_deliveries GROUP BY 1 ORDER BY 1"
    ).fetchall()
    shown = deliverylog.REFUSALS_WRITTEN_PER_MINUTE
    assert by_minute == [(MINUTE, shown + 1, 70), (after, shown + 1, 45)]


def test_refusals_added_from_many_threads_at_once_are_each_counted(database_url, conn):
    log = opened(database_url)
    start = threading.Barrier(8)

    def flood() -> None:
        start.wait()
        for at in spread(1_000):
            log.add(forged(at))

    threads = [threading.Thread(target=flood) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    written = rows(conn)
    assert len(written) == deliverylog.REFUSALS_WRITTEN_PER_MINUTE + 1
    assert sum(row[4] for row in written) == 8_000


def test_the_waiting_lines_stay_within_their_bound_with_summaries_among_them():
    dropped: list[int] = []
    shown = deliverylog.REFUSALS_WRITTEN_PER_MINUTE
    clock = Clock(MINUTE)
    log = DeliveryLog(
        own_connection("postgresql://127.0.0.1:1/none"),  # the database away
        max_pending=shown,
        every_seconds=60,
        on_drop=dropped.append,
        clock=clock,
    )
    for at in spread(5_000):
        log.add(forged(at))
    assert len(log._pending) == shown and not dropped  # the rest are counted, not queued
    clock.now = MINUTE + timedelta(minutes=1)
    assert log.flush() == 0
    assert len(log._pending) == shown
    assert [line.repeats for line in log._pending][-1] == 5_000 - shown
    assert dropped == [1]  # the oldest line made room for the minute's summary
    log.close()
    assert dropped == [1, 5_000 - 1]  # what the lines lost at close stood for


def test_a_flood_of_refusals_reads_as_many_in_every_health_view(database_url, conn):
    now = MINUTE + timedelta(minutes=5)
    log = opened(database_url)
    for n, at in enumerate(spread(5_000)):
        log.add(forged(at))
        if n % 500 == 0:
            log.add(authentic(at, n))
    log.close()
    assert len(rows(conn)) < 100
    [razorpay] = [g for g in health.summary(conn, now).gateways if g.provider == "razorpay"]
    assert razorpay.by_status == {200: 10, 401: 5_000}
    assert razorpay.signature_refused == 5_000 and razorpay.forged
    report = console_health.health(conn, now)
    [card] = [g for g in report.gateways if g.provider == "razorpay"]
    assert card.totals[console_health.Answer.SIGNATURE] == 5_000
    assert card.totals[console_health.Answer.APPLIED] == 10
    assert [a.text.split(".")[0] for a in report.alarms] == [
        "Razorpay: 5000 of 5010 deliveries in the last hour failed the signature check"
    ]


FOLDED_LINE = """
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, body_bytes,
                                 detail, duration_ms, repeats)
VALUES (%(at)s, %(provider)s, %(status)s, %(outcome)s, false, 16,
        'and more refused like it this minute', 1, %(repeats)s)
"""


def folded(
    conn: psycopg.Connection, at: datetime, status: int, repeats: int, outcome: str = ""
) -> None:
    outcome = outcome or ("signature_mismatch" if status == 401 else "database_unavailable")
    conn.execute(
        FOLDED_LINE,
        {"at": at, "provider": "payu", "status": status, "outcome": outcome, "repeats": repeats},
    )


def test_the_last_hours_answers_count_what_each_line_stands_for(conn):
    now = MINUTE + timedelta(minutes=5)
    folded(conn, MINUTE, 401, 1_234)
    folded(conn, MINUTE, 503, 7)
    [payu] = [g for g in health.summary(conn, now).gateways if g.provider == "payu"]
    assert payu.by_status == {401: 1_234, 503: 7}
    assert health.summary(conn, now).forged == ["payu"]


def test_the_consoles_hours_and_banners_count_what_each_line_stands_for(conn):
    now = MINUTE + timedelta(minutes=5)
    folded(conn, MINUTE, 401, 1_234)
    folded(conn, MINUTE, 503, 7)
    report = console_health.health(conn, now)
    [payu] = [g for g in report.gateways if g.provider == "payu"]
    assert payu.totals[console_health.Answer.SIGNATURE] == 1_234
    assert payu.totals[console_health.Answer.FAILED] == 7
    assert payu.peak == 1_241
    texts = [a.text for a in report.alarms]
    assert any(t.startswith("PayU: 7 of 1241 deliveries in the last hour were") for t in texts)
    assert any(t.startswith("PayU: 1234 of 1241 deliveries in the last hour failed") for t in texts)


def test_a_slow_failure_counts_what_each_line_stands_for_and_its_hours_once(conn):
    """Three hours with a line standing for two 5xx each: six failures in three hours."""
    now = MINUTE + timedelta(minutes=5)
    for hours in (2, 4, 6):
        folded(conn, now - timedelta(hours=hours, minutes=30), 503, 2)
    [alarm] = console_health.alarms(conn, now)
    assert alarm.text.startswith(
        "PayU: 6 of 6 deliveries in the last 24 hours were answered 5xx, in 3 different hours"
    )


def test_callbacks_refused_for_now_past_a_bound_never_read_as_a_failing_endpoint(conn):
    """503 ``confirmations_full`` is payhooks' own refusal of callbacks past a bound (whoever
    holds a credential or a signed PayU post can send them): not a failure of the endpoint,
    in the last hour or over the retry window; its waiting callbacks have their own banner."""
    now = MINUTE + timedelta(minutes=5)
    folded(conn, MINUTE, 503, 7, outcome="confirmations_full")
    for hours in (2, 4, 6):
        folded(conn, now - timedelta(hours=hours, minutes=30), 503, 2, "confirmations_full")
    assert console_health.alarms(conn, now) == []
    [payu] = [g for g in health.summary(conn, now).gateways if g.provider == "payu"]
    assert payu.by_status == {503: 7}  # the last hour's, shown as they were answered
