"""``payhooks.fastapi.router`` on a merchant's app, over real HTTP (uvicorn on loopback), on a
sync pool and on an async pool: the same deliveries, the same answers, the same rows."""

from __future__ import annotations

import psycopg
import pytest

from payhooks.sim.gateway import Delivery
from tests.conftest import released_together
from tests.fastapi.conftest import served
from tests.fastapi.merchant import (
    KINDS,
    REF,
    Merchant,
    capture,
    ending_hooks,
    failed,
    prepare,
)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def shop(conn):
    prepare(conn, REF)
    return conn


def post(served_app, delivery: Delivery):
    with served_app.client() as client:
        return client.post(delivery.path, content=delivery.body, headers=delivery.headers)


def orders(conn) -> list[tuple[object, ...]]:
    return conn.execute("SELECT ref, paid_by, paid_count FROM merchant_orders").fetchall()


def records(conn) -> list[tuple[object, ...]]:
    return conn.execute(
        "SELECT event_id, outcome, order_ref, mismatches FROM processed_webhooks ORDER BY 1"
    ).fetchall()


def test_a_delivery_runs_the_hooks_and_is_answered_processed(shop, database_url, kind):
    delivery = capture()
    with served(Merchant(database_url, kind).app) as app:
        response = post(app, delivery)
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert orders(shop) == [(REF, "pay_fa00000001", 1)]


def test_the_answer_carries_the_event_and_the_order_the_hook_named(shop, database_url, kind):
    delivery = capture(event_id="evt_fa_answer")
    with served(Merchant(database_url, kind).app) as app:
        body = post(app, delivery).json()
    assert body == {"status": "processed", "event_id": "evt_fa_answer", "order_id": REF}


def test_a_copy_is_answered_duplicate_with_the_first_answers_order(shop, database_url, kind):
    delivery = capture()
    with served(Merchant(database_url, kind).app) as app:
        post(app, delivery)
        again = post(app, delivery)
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    assert again.json()["order_id"] == REF and orders(shop)[0][2] == 1


def test_fifty_concurrent_copies_take_effect_once(shop, database_url, kind):
    delivery = capture()
    with served(Merchant(database_url, kind).app) as app:
        answers = released_together(
            list(range(50)),
            lambda _: app.client(),
            lambda client, _: client.post(
                delivery.path, content=delivery.body, headers=delivery.headers
            ).json()["status"],
        )
    assert sorted(answers) == ["duplicate"] * 49 + ["processed"]
    assert orders(shop) == [(REF, "pay_fa00000001", 1)]


def test_a_hook_that_raises_is_500_and_leaves_nothing(shop, database_url, kind, caplog):
    """And payhooks' own log line says why, with the traceback: a framework's logging
    configured away (Django's ``disable_existing_loggers``) never hides a handler's bug."""
    shop.execute("ALTER TABLE merchant_orders ADD CONSTRAINT closed CHECK (false) NOT VALID")
    with served(Merchant(database_url, kind).app) as app:
        response = post(app, capture())
    assert response.status_code == 500
    assert orders(shop) == [] and records(shop) == []
    [failed] = [r for r in caplog.records if r.getMessage() == "webhook_failed"]
    assert "CheckViolation" in failed.error and "closed" in failed.error
    assert failed.exc_info is not None


def test_after_a_hook_raised_the_gateways_retry_is_processed(shop, database_url, kind):
    shop.execute("ALTER TABLE merchant_orders ADD CONSTRAINT closed CHECK (false) NOT VALID")
    delivery = capture()
    with served(Merchant(database_url, kind).app) as app:
        post(app, delivery)
        shop.execute("ALTER TABLE merchant_orders DROP CONSTRAINT closed")
        retry = post(app, delivery)
    assert retry.json()["status"] == "processed" and len(orders(shop)) == 1


@pytest.mark.parametrize("call", ["commit", "rollback", "commit caught", "rollback caught"])
def test_a_hook_that_ends_the_claims_transaction_is_refused_500_and_leaves_nothing(
    shop, database_url, kind, call, caplog
):
    """Refused even when the hook catches psycopg's refusal and carries on."""
    merchant = Merchant(database_url, kind, hooks=ending_hooks(kind, call))
    with served(merchant.app) as app:
        response = post(app, capture())
    assert (response.status_code, response.json()["error"]) == (500, "handler_committed")
    assert f"{call.removesuffix(' caught')}()" in response.json()["detail"]
    assert orders(shop) == [] and records(shop) == []
    assert [r.getMessage() for r in caplog.records if r.name == "payhooks.fastapi"] == [
        "webhook_failed"
    ]


@pytest.mark.parametrize("call", ["sql_commit", "sql_commit_then_write"])
def test_a_hook_that_commits_as_sql_is_refused_500_and_the_retry_is_applied(
    shop, database_url, kind, call
):
    delivery = capture()
    with served(Merchant(database_url, kind, hooks=ending_hooks(kind, call)).app) as app:
        response = post(app, delivery)
    assert (response.status_code, response.json()["error"]) == (500, "handler_committed")
    assert records(shop) == []  # the claim it committed is undone: not final
    with served(Merchant(database_url, kind).app) as app:
        retry = post(app, delivery)
    assert (retry.status_code, retry.json()["status"]) == (200, "processed")
    assert [outcome for _, outcome, _, _ in records(shop)] == ["processed"]


def test_an_event_no_hook_is_registered_for_is_ignored_and_recorded(shop, database_url, kind):
    with served(Merchant(database_url, kind).app) as app:
        response = post(app, failed())
    assert response.json()["status"] == "ignored"
    assert [outcome for _, outcome, _, _ in records(shop)] == ["ignored"]


def test_a_parked_delivery_is_applied_when_it_comes_again_after_checkout(shop, database_url, kind):
    early = capture(ref="order_fa_later")
    with served(Merchant(database_url, kind).app) as app:
        first = post(app, early).json()["status"]
        shop.execute("INSERT INTO merchant_checkouts VALUES ('order_fa_later')")
        again = post(app, early).json()["status"]
    assert (first, again) == ("parked", "processed")
    assert orders(shop) == [("order_fa_later", "pay_fa00000001", 1)]


def test_a_parked_delivery_that_still_matches_nothing_leaves_its_row_as_it_was(
    shop, database_url, kind
):
    early = capture(ref="order_fa_never")
    row = "SELECT outcome, processed_at FROM processed_webhooks"
    with served(Merchant(database_url, kind).app) as app:
        first = post(app, early).json()["status"]
        parked = shop.execute(row).fetchall()
        again = post(app, early).json()["status"]
    assert (first, again) == ("parked", "parked") and orders(shop) == []
    assert shop.execute(row).fetchall() == parked


def test_the_same_key_with_another_body_is_a_duplicate_and_marked(shop, database_url, kind):
    first = capture(event_id="evt_fa_same")
    other = capture(event_id="evt_fa_same", payment_id="pay_fa00000002")
    with served(Merchant(database_url, kind).app) as app:
        post(app, first)
        response = post(app, other)
    assert response.json()["status"] == "duplicate"
    assert records(shop) == [("evt_fa_same", "processed", REF, 1)]
    assert orders(shop) == [(REF, "pay_fa00000001", 1)]


def test_the_same_bytes_under_another_key_are_a_duplicate(shop, database_url, kind):
    delivery = capture(event_id="evt_fa_one")
    replayed = Delivery(
        provider=delivery.provider,
        body=delivery.body,
        headers={**delivery.headers, "x-razorpay-event-id": "evt_fa_two"},
        label="replayed under a new key",
    )
    with served(Merchant(database_url, kind).app) as app:
        post(app, delivery)
        response = post(app, replayed)
    assert (response.json()["status"], response.json()["order_id"]) == ("duplicate", REF)
    assert [event_id for event_id, _, _, _ in records(shop)] == ["evt_fa_one"]


def test_a_delivery_that_cannot_get_its_lock_in_time_is_503(shop, database_url, kind):
    merchant = Merchant(database_url, kind, kwargs={"options": "-c lock_timeout=100"})
    with served(merchant.app) as app, psycopg.connect(database_url) as blocker:
        blocker.execute("LOCK TABLE processed_webhooks IN ACCESS EXCLUSIVE MODE")
        response = post(app, capture())
    assert response.status_code == 503
    assert response.json()["error"] == "database_unavailable"


def test_no_free_connection_in_time_is_503(shop, database_url, kind):
    merchant = Merchant(database_url, kind, max_size=1, timeout=0.1)
    with served(merchant.app) as app, merchant.every_connection_taken():
        response = post(app, capture())
    assert response.status_code == 503 and records(shop) == []


def test_a_lent_connection_goes_back_to_the_pool_as_it_was(shop, database_url, kind):
    merchant = Merchant(database_url, kind, max_size=1)  # the app's pool: not in autocommit
    with served(merchant.app) as app:
        status = post(app, capture()).json()["status"]
        with merchant.every_connection_taken() as [conn]:
            autocommit = conn.autocommit
    assert (status, autocommit) == ("processed", False)
