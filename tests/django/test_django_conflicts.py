"""The Django view runs the claim's transaction again after a serialization failure
(injected by ``tests/conflicts.py``), also when Django's commit raises it as its own
``OperationalError``: the ORM writes of the failed attempt are gone, the handler runs again."""

from __future__ import annotations

import psycopg
import pytest
from django.test import override_settings
from orders.models import Order

from tests.conflicts import ALWAYS, attempts, inject, unhurried_retries
from tests.django.conftest import PAYHOOKS, post, records
from tests.factories import GATEWAY

pytestmark = pytest.mark.usefixtures(unhurried_retries.__name__)


def capture(ref: str = "order_new"):
    return GATEWAY.razorpay(
        "payment.captured", payment_id="pay_djc00000001", order_id=ref, amount_paise=49_900
    )


@pytest.fixture
def db(django_db):
    with psycopg.connect(django_db, autocommit=True) as conn:
        yield conn


@pytest.fixture
def creating():
    with override_settings(PAYHOOKS={**PAYHOOKS, "HANDLER": "tests.django.handlers.creating"}):
        yield


def orders() -> list[tuple[str, str]]:
    return list(Order.objects.values_list("reference", "status"))


def test_a_conflict_at_the_claim_is_retried_and_applied_once(
    atomic_requests, site, db, django_db, creating
):
    inject(db, "processed_webhooks", failures=2)
    response = post(site, capture())
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert attempts(db) == 3
    assert orders() == [("order_new", "paid")] and len(records(django_db)) == 1


def test_a_conflict_at_djangos_commit_after_an_orm_write_runs_the_handler_again(
    atomic_requests, site, db, django_db, creating
):
    inject(db, "orders_order", failures=1, at_commit=True)
    response = post(site, capture())
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert attempts(db) == 2
    assert orders() == [("order_new", "paid")] and len(records(django_db)) == 1


def test_a_conflict_that_never_clears_is_503_and_leaves_nothing(site, db, django_db, creating):
    inject(db, "orders_order", failures=ALWAYS, sqlstate="40P01", at_commit=True)
    response = post(site, capture())
    assert (response.status_code, response.json()["error"]) == (503, "database_unavailable")
    assert attempts(db) == 3
    assert orders() == [] and records(django_db) == []
