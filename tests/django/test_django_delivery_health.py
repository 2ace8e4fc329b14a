"""Every request to the Django view is noted in the core's delivery log, a forged one as its
size, hash and 401, and shown in the admin's "Webhook health" (and as a banner on the records'
list); the answer never waits for, nor depends on, the log's database."""

from __future__ import annotations

import hashlib
import time

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from payhooks.django import views
from payhooks.operations.deliverylog import DeliveryLog, own_connection
from tests.django.conftest import post
from tests.django.test_django_admin import CHANGELIST, capture, shown
from tests.fastapi.test_delivery_health import AWAY, noted


@pytest.fixture
def operator(django_db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "unused"))
    return client


def forged_rows(url: str, sha: str, count: int = 5) -> list[tuple[object, ...]]:
    """Only this test's lines: a line of an earlier test in this process may come late."""
    deadline = time.monotonic() + 10
    while True:
        found = [row for row in noted(url, 0) if row[6] == sha and row[1] == 401]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def written(url: str, line: tuple[object, ...]) -> list[tuple[object, ...]]:
    """The lines so far, once ``line`` is among them (or a bounded while has passed): the log
    writes a moment after the answer, and may first have to reconnect."""
    deadline = time.monotonic() + 10
    while True:
        found = [row[:5] for row in noted(url, 0)]
        if line in found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_forged_and_a_good_delivery_are_noted_and_shown_in_the_admin(site, django_db, operator):
    delivery = capture("order_dh1", "evt_dh1")
    good = post(site, delivery)
    for _ in range(5):
        refused = post(site, delivery, **{"x-razorpay-signature": "0" * 64})
    assert (good.status_code, refused.status_code) == (200, 401)
    sha = hashlib.sha256(delivery.body).hexdigest()
    forged = ("razorpay", 401, "signature_mismatch", False, None, len(delivery.body), sha)
    assert forged_rows(django_db, sha) == [forged] * 5
    answered = ("razorpay", 200, good.json()["status"], True, "evt_dh1")
    assert answered in written(django_db, answered)
    page = operator.get(reverse("admin:payhooks_health"))
    assert page.status_code == 200
    assert b"Webhook health" in page.content and b"failed the signature check" in page.content
    summary = page.context["summary"]
    razorpay = next(g for g in summary.gateways if g.provider == "razorpay")
    assert razorpay.signature_refused >= 5 and razorpay.last_2xx is not None
    listed = operator.get(reverse(CHANGELIST))
    assert any("razorpay: many deliveries" in message for message in shown(listed))


def test_the_answer_is_the_same_with_the_logs_database_away(site, django_db, monkeypatch):
    away = DeliveryLog(own_connection(AWAY))
    monkeypatch.setattr(views, "delivery_log", lambda alias: away)
    delivery = capture("order_dh2", "evt_dh2")
    first, again = post(site, delivery), post(site, delivery)
    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json()["status"] == again.json()["status"] == "parked"  # no such order


def test_the_log_never_takes_a_connection_from_djangos_pool(site, django_db, monkeypatch):
    """With Django's pool (OPTIONS["pool"]), get_new_connection hands out a pooled connection
    that the log, closing it, would never give back: the log connects on its own instead."""
    from django.db import connections

    def pooled(*args, **kwargs):
        raise AssertionError("the delivery log took a connection from Django's pool")

    monkeypatch.setattr(connections["default"], "get_new_connection", pooled)
    delivery = capture("order_dh3", "evt_dh3")
    refused = post(site, delivery, **{"x-razorpay-signature": "0" * 64})
    assert refused.status_code == 401
    sha = hashlib.sha256(delivery.body).hexdigest()
    assert len(forged_rows(django_db, sha, 1)) == 1
