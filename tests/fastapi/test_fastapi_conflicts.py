"""``payhooks.fastapi.router``, on a sync and an async pool, runs the claim's transaction
again after a serialization failure (injected by ``tests/conflicts.py``): the hook's writes
of the failed attempt are gone, and it runs again."""

from __future__ import annotations

import pytest

from tests.conflicts import ALWAYS, attempts, inject, unhurried_retries
from tests.fastapi.conftest import served
from tests.fastapi.merchant import KINDS, REF, Merchant, capture, prepare

pytestmark = pytest.mark.usefixtures(unhurried_retries.__name__)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def shop(conn):
    prepare(conn, REF)
    return conn


def post(app, delivery):
    with app.client() as client:
        return client.post(delivery.path, content=delivery.body, headers=delivery.headers)


def orders(conn):
    return conn.execute("SELECT ref, paid_by, paid_count FROM merchant_orders").fetchall()


def claims(conn) -> int:
    return int(conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0])


def test_a_conflict_at_the_claim_is_retried_and_applied_once(shop, database_url, kind):
    inject(shop, "processed_webhooks", failures=2)
    with served(Merchant(database_url, kind).app) as app:
        response = post(app, capture())
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert attempts(shop) == 3
    assert orders(shop) == [(REF, "pay_fa00000001", 1)] and claims(shop) == 1


def test_a_conflict_at_commit_after_the_hooks_write_runs_the_hook_again(shop, database_url, kind):
    inject(shop, "merchant_orders", failures=1, sqlstate="40P01", at_commit=True)
    with served(Merchant(database_url, kind).app) as app:
        response = post(app, capture())
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert attempts(shop) == 2
    assert orders(shop) == [(REF, "pay_fa00000001", 1)] and claims(shop) == 1


def test_a_conflict_that_never_clears_is_503_and_leaves_nothing(shop, database_url, kind):
    inject(shop, "merchant_orders", failures=ALWAYS, at_commit=True)
    with served(Merchant(database_url, kind).app) as app:
        response = post(app, capture())
    assert response.status_code == 503
    assert attempts(shop) == 3
    assert orders(shop) == [] and claims(shop) == 0
