"""The reference service runs a delivery's transaction again after a serialization failure or
a deadlock (injected by a trigger, ``tests/conflicts.py``), over real HTTP on real PostgreSQL:
answered 200 with one effect when a retry passes, 503 with nothing kept when none is left."""

from __future__ import annotations

import httpx
import pytest

from tests.conflicts import ALWAYS, attempts, inject
from tests.factories import purchase

ORDERS = "SELECT count(*) FROM orders"
EMAILS = "SELECT count(*) FROM outbox WHERE kind = 'email'"
CLAIMS = "SELECT count(*) FROM processed_webhooks"


def count(conn, sql: str, *params) -> int:
    return int(conn.execute(sql, params).fetchone()[0])


def post(service, delivery) -> httpx.Response:
    with service.client() as client:
        return client.post(delivery.path, content=delivery.body, headers=delivery.headers)


def retries_counted(service) -> float:
    with service.client() as client:
        text = client.get("/metrics").text
    lines = [line for line in text.splitlines() if line.startswith("payhooks_conflict_retries")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if "_created" not in line)


@pytest.mark.parametrize("sqlstate", ["40001", "40P01"])
def test_a_capture_that_loses_two_conflicts_at_its_claim_is_applied_once(service, conn, sqlstate):
    buy = purchase(conn, stock=5)
    inject(conn, "processed_webhooks", failures=2, sqlstate=sqlstate)
    response = post(service, buy.captured())
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert attempts(conn) == 3
    assert (count(conn, ORDERS), count(conn, EMAILS), count(conn, CLAIMS)) == (1, 1, 1)
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 4
    assert retries_counted(service) == 2


def test_a_conflict_at_commit_after_the_orders_writes_is_retried_to_one_order(service, conn):
    buy = purchase(conn, stock=5)
    inject(conn, "orders", failures=1, at_commit=True)
    response = post(service, buy.captured())
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert attempts(conn) == 2
    assert (count(conn, ORDERS), count(conn, EMAILS), count(conn, CLAIMS)) == (1, 1, 1)
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 4


def test_the_general_path_retries_a_conflict_at_commit_after_the_handlers_writes(service, conn):
    buy = purchase(conn)
    inject(conn, "payments", failures=1, at_commit=True)
    response = post(service, buy.delivery("authorized"))
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert attempts(conn) == 2
    assert count(conn, "SELECT count(*) FROM payments WHERE status = 'authorized'") == 1
    assert count(conn, CLAIMS) == 1


def test_a_conflict_that_never_clears_is_answered_503_and_nothing_is_kept(service, conn):
    buy = purchase(conn, stock=5)
    inject(conn, "orders", failures=ALWAYS, at_commit=True)
    response = post(service, buy.captured())
    assert (response.status_code, response.json()["error"]) == (503, "database_unavailable")
    assert attempts(conn) == 3
    assert (count(conn, ORDERS), count(conn, EMAILS), count(conn, CLAIMS)) == (0, 0, 0)
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 5
    assert retries_counted(service) == 2


def test_once_the_conflicts_clear_the_gateways_retry_is_applied(service, conn):
    buy = purchase(conn)
    inject(conn, "processed_webhooks", failures=3)
    delivery = buy.captured()
    assert post(service, delivery).status_code == 503
    again = post(service, delivery)
    assert (again.status_code, again.json()["status"]) == (200, "processed")
    assert count(conn, ORDERS) == 1
