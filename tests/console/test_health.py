"""When each gateway last answered 2xx is one index read, however long the delivery log and
however long ago that was (a gateway failing for a day, or one the shop does not use)."""

from __future__ import annotations

from datetime import UTC, datetime

from payhooks.console import health
from tests.console.conftest import read_whole

FILL = """
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, body_bytes,
                        duration_ms)
SELECT now() - interval '2 days' - n * interval '1 second', 'razorpay', 200, 'processed', true,
       300, 1
FROM generate_series(1, 20000) n;
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, body_bytes,
                        duration_ms)
SELECT now() - interval '3 days' - n * interval '1 second', 'payu', 503,
       'database_unavailable', true, 300, 1
FROM generate_series(1, 20000) n;
ANALYZE payhooks_deliveries;
"""


def test_every_health_query_reads_only_its_window_however_long_the_log(conn, recording):
    conn.execute(FILL.encode())
    health.health(recording, datetime.now(UTC))
    assert len(recording.ran) == 6  # by hour, last 2xx, the last hour, the window, refuted,
    # callbacks waiting for their API
    assert read_whole(conn, recording.ran) == []


def test_the_last_2xx_of_each_gateway_is_read_through_an_index(conn, recording):
    conn.execute(FILL.encode())
    report = health.health(recording, datetime.now(UTC))
    last = {g.provider: g.last_2xx for g in report.gateways}
    assert last["razorpay"] is not None and last["payu"] is None and last["cashfree"] is None
    asked = [(sql, params) for sql, params in recording.ran if sql == health._LAST_ANSWERED]
    assert len(asked) == 1
    assert read_whole(conn, asked) == []
