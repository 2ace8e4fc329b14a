"""``payhooks.django.testing``: a merchant's ``TransactionTestCase`` written as docs/django.md's
"Testing your shop" writes it sends the same signed delivery in each test, and each applies it.
Django's flush empties only its models' tables; payhooks' others (the payment's record, the
expectation, ...) would answer the next test's delivery ``duplicate``."""

from __future__ import annotations

import unittest
from typing import ClassVar

import psycopg
from django.test import TransactionTestCase, override_settings
from orders.checkout import create_order

from payhooks.django.testing import empty_tables
from tests.django.conftest import PAYHOOKS
from tests.django.test_django_views import capture

DELIVERY = capture()


class CheckoutTests(TransactionTestCase):
    """The merchant's: the checkout registers the order with payhooks (``payhooks.expect``),
    then the gateway's capture is posted through Django's test client."""

    __test__ = False  # the merchant's own tests, run below as their runner runs them
    # auth and contenttypes: the project's AuthenticationMiddleware needs its user model.
    available_apps: ClassVar = ["django.contrib.auth", "django.contrib.contenttypes", "orders",
                                "payhooks.django"]  # fmt: skip
    answers: ClassVar[list[str]] = []

    def tearDown(self) -> None:
        empty_tables()

    def test_a_first_payment(self) -> None:
        self.pay()

    def test_the_same_payment_in_the_next_test(self) -> None:
        self.pay()

    def pay(self) -> None:
        create_order("razorpay", "order_dj1", 49_900)
        response = self.client.post(
            DELIVERY.path, DELIVERY.body, content_type="application/json", headers=DELIVERY.headers
        )
        self.answers.append(response.json()["status"])


class CheckoutTestsLeavingPayhooksTables(CheckoutTests):
    __test__ = False

    def tearDown(self) -> None:
        pass


class CheckoutTestsOnTwoDatabases(CheckoutTests):
    """docs/django.md's "Several databases": the orders and payhooks' tables on ``payments``."""

    __test__ = False
    databases: ClassVar = {"default", "payments"}


def run(tests: type[CheckoutTests]) -> list[str]:
    tests.answers = []
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(tests).run(result)
    assert (result.errors, result.failures, result.testsRun) == ([], [], 2)
    return tests.answers


def test_with_payhooks_tables_emptied_each_test_applies_the_same_delivery(django_db):
    assert run(CheckoutTests) == ["processed", "processed"]


def test_with_payhooks_on_another_database_its_tables_there_are_emptied(payments_db):
    with override_settings(PAYHOOKS={**PAYHOOKS, "DATABASE": "payments"}):
        assert run(CheckoutTestsOnTwoDatabases) == ["processed", "processed"]


def test_djangos_flush_alone_leaves_the_next_tests_delivery_a_duplicate(django_db):
    """Why ``empty_tables`` is needed: ``available_apps`` empties the delivery records, but
    not the payment's record beside them."""
    assert run(CheckoutTestsLeavingPayhooksTables) == ["processed", "duplicate"]


def test_nothing_of_payhooks_is_left_but_its_migrations(django_db):
    run(CheckoutTests)
    with psycopg.connect(django_db) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            " AND (tablename = 'processed_webhooks' OR tablename LIKE 'payhooks%')"
        ).fetchall()
        filled = [
            name
            for (name,) in tables
            if conn.execute(f'SELECT EXISTS (SELECT FROM "{name}")'.encode()).fetchone()[0]
        ]
    assert filled == ["payhooks_migrations"]
