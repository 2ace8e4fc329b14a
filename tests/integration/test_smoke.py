from __future__ import annotations

from tests.factories import deliver, purchase


def test_capture_creates_one_order(conn):
    buy = purchase(conn)
    receipt = deliver(conn, buy.captured())
    assert receipt.outcome == "processed" and receipt.order_id
