"""The Flask blueprint runs the claim's transaction again after a serialization failure
(injected by ``tests/conflicts.py``), also when SQLAlchemy raises it as its own
``OperationalError`` from a hook's ORM flush or from the commit."""

from __future__ import annotations

import httpx
import pytest

import payhooks.flask
from payhooks import EventKind, Hooks
from tests import loopback
from tests.conflicts import ALWAYS, attempts, inject, unhurried_retries
from tests.factories import ADAPTERS, GATEWAY
from tests.flask.conftest import claimed, serving
from tests.flask.test_flask_blueprint import Base, Note, flask_app, note_refs, order_rows

pytestmark = pytest.mark.usefixtures(unhurried_retries.__name__)

ORDERS = "CREATE TABLE merchant_orders (ref text PRIMARY KEY, paid_by text)"


@pytest.fixture
def shop(conn, engine):
    conn.execute(ORDERS)
    Base.metadata.create_all(engine)
    return conn


def hooks() -> Hooks:
    """Writes both ways: on the connection, and through the session."""
    made = Hooks()

    @made.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        conn.execute(
            "INSERT INTO merchant_orders VALUES (%s, %s)", (event.merchant_ref, event.payment_id)
        )
        payhooks.flask.session_for(conn).add(Note(ref=event.merchant_ref))

    return made


def post(engine) -> httpx.Response:
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_flc00000001", order_id="order_flc1", amount_paise=100
    )
    webhooks = payhooks.flask.blueprint(adapters=ADAPTERS.values(), hooks=hooks(), engine=engine)
    with serving(flask_app(webhooks)) as base:
        return loopback.post(base + delivery.path, content=delivery.body, headers=delivery.headers)


@pytest.mark.parametrize("at_commit", [False, True], ids=["at_the_orm_flush", "at_commit"])
def test_a_conflict_is_retried_and_applied_once(shop, engine, at_commit):
    inject(shop, "merchant_notes", failures=2, at_commit=at_commit)
    response = post(engine)
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert attempts(shop) == 3
    assert order_rows(shop) == [("order_flc1", "pay_flc00000001")]
    assert note_refs(shop) == ["order_flc1"] and claimed(shop) == 1


def test_a_conflict_at_the_claim_is_retried(shop, engine):
    inject(shop, "processed_webhooks", failures=1, sqlstate="40P01")
    assert post(engine).json()["status"] == "processed"
    assert attempts(shop) == 2 and claimed(shop) == 1


def test_a_conflict_that_never_clears_is_503_and_leaves_nothing(shop, engine):
    inject(shop, "merchant_notes", failures=ALWAYS, at_commit=True)
    response = post(engine)
    assert (response.status_code, response.json()["error"]) == (503, "database_unavailable")
    assert attempts(shop) == 3
    assert order_rows(shop) == [] and note_refs(shop) == [] and claimed(shop) == 0
