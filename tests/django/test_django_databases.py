"""docs/django.md with several databases ("Several databases"): payhooks' tables and the shop's
orders on a second alias, ``payments``, which ``PAYHOOKS["DATABASE"]`` names and a router sends
their models to. Django's ``transaction`` functions act on ``default`` unless told otherwise, so
each promise the guide makes of the claim's transaction holds in the form it writes there:
``using=payhooks.django.alias()``."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import transaction
from django.test import override_settings
from orders.models import Order

import payhooks.django
from payhooks.refunding import refunds
from tests.django.conftest import PAYHOOKS, post, records
from tests.django.handlers import notified
from tests.django.test_django_views import KEY, capture


def on_payments(handler: str | None = None):
    """``PAYHOOKS["DATABASE"] = "payments"``, and the handler ``tests.django.handlers`` names."""
    changes = {"HANDLER": f"tests.django.handlers.{handler}"} if handler else {}
    return override_settings(PAYHOOKS={**PAYHOOKS, "DATABASE": "payments", **changes})


@pytest.fixture(autouse=True)
def nothing_notified() -> None:
    notified.clear()


@pytest.fixture
def shop(payments_db: str, site: str) -> str:
    """The shop served, its orders and payhooks' tables on ``payments``; yields its URL."""
    return site


def test_the_alias_is_the_database_payhooks_setting_names(payments_db):
    assert payhooks.django.alias() == "default"
    with on_payments():
        assert payhooks.django.alias() == "payments"


def test_the_guide_names_the_alias_wherever_it_promises_the_claims_transaction():
    """Section 5's after-commit work and savepoints, and the transactions of the merchant's own
    that ``expect`` and ``refunds.request`` join, each written with ``using=``."""
    doc = (Path(__file__).parents[2] / "docs" / "django.md").read_text()
    handlers = doc.split("## 5. Handlers", 1)[1].split("## 6.", 1)[0]
    assert "`transaction.on_commit(..., using=payhooks.django.alias())`" in handlers
    assert "`transaction.atomic(using=payhooks.django.alias())`" in handlers
    code = "\n".join(re.findall(r"```python\n(.*?)```", doc, re.DOTALL))
    for call in ("refunds.request(payhooks.django.connection()", "payhooks.expect(connection()"):
        block = code.split(call, 1)[0].rsplit("\n\n", 1)[1]
        assert re.search(
            r"with transaction\.atomic\(using=(payhooks\.django\.)?alias\(\)\):", block
        )


# --- the handlers' forms ----------------------------------------------------------------------


def test_on_commit_using_the_alias_runs_once_the_claim_has_committed(shop, payments_db):
    with on_payments("notifying_on_the_claims_database"):
        assert post(shop, capture()).json()["status"] == "processed"
        assert post(shop, capture()).json()["status"] == "duplicate"
    assert notified == [KEY]
    assert records(payments_db) == [("razorpay", KEY, "processed")]


def test_on_commit_using_the_alias_never_runs_for_a_delivery_that_rolled_back(shop, payments_db):
    with on_payments("notifying_on_the_claims_database_then_failing"):
        assert [post(shop, capture()).status_code for _ in range(3)] == [500, 500, 500]
    assert notified == [] and records(payments_db) == []


def test_a_savepoint_using_the_alias_undoes_a_caught_error_alone(shop, payments_db):
    """An ``IntegrityError`` caught around a write in ``transaction.atomic(using=alias())``:
    the claim's transaction carries on, and the delivery is applied at the first try."""
    Order.objects.create(reference="order_dj1", amount_paise=49_900)
    with on_payments("paying_once_in_a_savepoint"):
        response = post(shop, capture())
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert list(Order.objects.values_list("reference", "status")) == [("order_dj1", "paid")]


# --- money out in the merchant's own transaction ----------------------------------------------


def ask_refund() -> None:
    refunds.request(payhooks.django.connection(), "razorpay", "pay_dj000000001", 10_000,
                    key="order_dj1-refund-1", captured_paise=49_900,
                    reason="customer cancelled", requested_by="test")  # fmt: skip


def refunds_asked(url: str) -> list[tuple[str, int]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT payment_id, amount_paise FROM payhooks_refunds").fetchall()


def test_a_refund_asked_in_a_transaction_on_the_alias_rolls_back_with_it(payments_db):
    with (
        on_payments(),
        pytest.raises(RuntimeError),
        transaction.atomic(using=payhooks.django.alias()),
    ):
        Order.objects.create(reference="order_dj1", amount_paise=49_900)
        ask_refund()
        raise RuntimeError("the merchant's own work failed after asking")
    assert refunds_asked(payments_db) == [] and not Order.objects.exists()


def test_a_refund_asked_in_a_transaction_on_the_alias_commits_with_it(payments_db):
    with on_payments(), transaction.atomic(using=payhooks.django.alias()):
        Order.objects.create(reference="order_dj1", amount_paise=49_900)
        ask_refund()
    assert refunds_asked(payments_db) == [("pay_dj000000001", 10_000)]


# --- the same handlers without using=: said in the log ----------------------------------------


def said(caplog) -> list[tuple[str, str | None, str | None]]:
    return [
        (r.getMessage(), getattr(r, "database", None), getattr(r, "on", None))
        for r in caplog.records
        if r.getMessage().startswith("handler_")
    ]


def test_on_commit_left_on_default_is_said_in_the_log(shop, payments_db, caplog):
    """``default`` is in no transaction while the handler runs: Django runs the work at once,
    at each try of a delivery that fails. payhooks cannot hold it back; it says so."""
    caplog.set_level(logging.WARNING, logger="payhooks.django")
    with on_payments("notifying_on_default_then_failing"):
        assert [post(shop, capture()).status_code for _ in range(2)] == [500, 500]
    assert notified == [KEY, KEY]
    assert said(caplog) == [("handler_on_commit_elsewhere", "payments", "default")] * 2


def test_a_savepoint_left_on_default_is_said_when_the_claims_transaction_fails(
    shop, payments_db, caplog
):
    """A bare ``atomic()`` is a transaction on ``default``, no savepoint in the claim's: the
    caught ``IntegrityError`` leaves the claim's transaction failed, and every try fails."""
    caplog.set_level(logging.WARNING, logger="payhooks.django")
    Order.objects.create(reference="order_dj1", amount_paise=49_900)
    with on_payments("paying_once_in_a_savepoint_on_default"):
        assert post(shop, capture()).status_code == 500
    assert said(caplog) == [("handler_savepoint_elsewhere", "payments", "default")]


def test_on_commit_left_on_default_after_a_read_there_is_said_all_the_same(
    shop, payments_db, caplog
):
    """``default`` connected by a read before the ``on_commit``: Django's own ``connect()``
    turning autocommit on was taken for an atomic block closing, and nothing was said."""
    caplog.set_level(logging.WARNING, logger="payhooks.django")
    with on_payments("reading_default_then_notifying_on_it"):
        assert post(shop, capture()).status_code == 500
    assert notified == [KEY]
    assert said(caplog) == [("handler_on_commit_elsewhere", "payments", "default")]


def test_on_commit_in_a_transaction_of_default_is_not_said(shop, payments_db, caplog):
    """Work of ``default``'s own, in its own transaction, runs as Django promises: saying it
    ran at once (as it was, from Django's connect() turning autocommit on) was wrong."""
    caplog.set_level(logging.WARNING, logger="payhooks.django")
    Order.objects.create(reference="order_dj1", amount_paise=49_900)
    with on_payments("notifying_inside_a_transaction_on_default"):
        assert post(shop, capture()).json()["status"] == "processed"
    assert said(caplog) == [] and notified == [KEY]


def test_the_claims_own_database_is_not_said(shop, payments_db, caplog):
    caplog.set_level(logging.WARNING, logger="payhooks.django")
    Order.objects.create(reference="order_dj1", amount_paise=49_900)
    with on_payments("paying_once_in_a_savepoint"):
        assert post(shop, capture()).json()["status"] == "processed"
    with on_payments("notifying_on_the_claims_database"):
        assert post(shop, capture("order_dj2", "evt_dj2")).json()["status"] == "processed"
    assert said(caplog) == [] and notified == ["evt_dj2"]


# --- manage.py check ---------------------------------------------------------------------------

ROUTED = override_settings(DATABASE_ROUTERS=["tests.django.routers.PaymentsRouter"])


def checked() -> str:
    """What ``manage.py check`` refuses; "payments" points at no database here, so nothing it
    says needs one."""
    try:
        call_command("check")
    except SystemCheckError as exc:
        return str(exc)
    return ""


def test_check_refuses_a_payhooks_database_its_models_are_not_routed_to():
    """Without a router payhooks' models, and ``migrate``, stay on ``default``: the tables are
    made there, and every delivery on ``payments`` is a 500."""
    with on_payments():
        said = checked()
    assert "payhooks.E005" in said
    assert "reads on 'default', writes on 'default'" in said


def test_check_refuses_a_router_sending_payhooks_models_away_from_its_database():
    with ROUTED:
        said = checked()
    assert "payhooks.E005" in said and "PAYHOOKS[\"DATABASE\"] is 'default'" in said
    assert "reads on 'payments', writes on 'payments', migrations not on 'default'" in said


def test_check_passes_payhooks_database_with_the_guides_router():
    with ROUTED, on_payments():
        assert checked() == ""
