"""The management commands on a real database: list parked deliveries, replay one, purge old
records in batches while keeping the parked ones."""

from __future__ import annotations

import json
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from orders.models import Order

import payhooks
from payhooks.django import retention
from payhooks.operations import retention as core
from payhooks.sim.gateway import Delivery
from tests.django.conftest import PAYHOOKS, records
from tests.factories import GATEWAY


def capture(ref: str, key: str) -> Delivery:
    return GATEWAY.razorpay(
        "payment.captured", payment_id="pay_" + key, order_id=ref, amount_paise=100, event_id=key
    )


def deliver(delivery: Delivery) -> str:
    response = Client().post(
        delivery.path, delivery.body, content_type="application/json", headers=delivery.headers
    )
    return response.json()["status"]


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def age(url: str, key: str, days: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE processed_webhooks SET processed_at = now() - make_interval(days => %s)"
            " WHERE event_id = %s",
            (days, key),
        )


@pytest.fixture
def parked_and_paid(django_db) -> None:
    Order.objects.create(reference="order_paid", amount_paise=100)
    assert deliver(capture("order_paid", "evt_paid")) == "processed"
    assert deliver(capture("order_late", "evt_late")) == "parked"


# --- payhooks_parked --------------------------------------------------------------------------


def test_parked_lists_only_deliveries_waiting_for_their_checkout(parked_and_paid):
    out = run("payhooks_parked")
    assert "evt_late" in out and "evt_paid" not in out and out.endswith("1 parked\n")


def test_parked_as_json_names_key_gateway_and_gateway_order(parked_and_paid):
    [row] = json.loads(run("payhooks_parked", "--json"))
    assert (row["provider"], row["event_id"], row["merchant_ref"]) == (
        "razorpay",
        "evt_late",
        "order_late",
    )


# --- payhooks_replay --------------------------------------------------------------------------


def test_replay_applies_a_parked_delivery_once_its_order_exists(parked_and_paid, django_db):
    Order.objects.create(reference="order_late", amount_paise=100)
    answer = json.loads(run("payhooks_replay", "evt_late"))
    assert answer == {"status": "processed", "event_id": "evt_late", "order_id": "order_late"}
    assert Order.objects.get(reference="order_late").status == "paid"


def test_replaying_an_applied_delivery_is_a_duplicate(parked_and_paid):
    assert json.loads(run("payhooks_replay", "evt_paid"))["status"] == "duplicate"


def test_replaying_an_unknown_key_fails_with_one_line(django_db):
    with pytest.raises(CommandError, match="no delivery 'evt_nope'"):
        run("payhooks_replay", "evt_nope")


def test_replaying_a_key_under_another_gateway_names_both(parked_and_paid, django_db):
    """``--provider cashfree`` for a Razorpay delivery's key said only "no delivery": the
    operator could not tell a mistyped key from a wrong gateway."""
    with pytest.raises(
        CommandError, match=r"^no cashfree delivery 'evt_late' \(razorpay holds that key\)$"
    ):
        run("payhooks_replay", "evt_late", "--provider", "cashfree")
    with pytest.raises(CommandError, match=r"^no cashfree delivery 'evt_nope'$"):
        run("payhooks_replay", "evt_nope", "--provider", "cashfree")


def test_a_replay_whose_handler_fails_is_one_line_and_leaves_it_parked(parked_and_paid, django_db):
    with (
        override_settings(PAYHOOKS={**PAYHOOKS, "HANDLER": "tests.django.handlers.failing"}),
        pytest.raises(CommandError, match="the handler raised RuntimeError"),
    ):
        run("payhooks_replay", "evt_late")
    assert ("razorpay", "evt_late", "parked") in records(django_db)


def test_a_key_two_gateways_hold_needs_the_provider_named(parked_and_paid, django_db):
    with psycopg.connect(django_db) as conn:
        conn.execute(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome,"
            " payload_sha256, body) VALUES ('cashfree', 'evt_paid', 'x', 'ignored', 'x', '')"
        )
    with pytest.raises(CommandError, match="--provider"):
        run("payhooks_replay", "evt_paid")
    answer = json.loads(run("payhooks_replay", "evt_paid", "--provider", "razorpay"))
    assert answer["status"] == "duplicate"


# --- payhooks_purge ---------------------------------------------------------------------------


def test_purge_deletes_records_past_the_window_and_keeps_parked_ones(parked_and_paid, django_db):
    age(django_db, "evt_paid", 91)
    age(django_db, "evt_late", 91)
    assert run("payhooks_purge").startswith("deleted 1 record(s)")
    assert records(django_db) == [("razorpay", "evt_late", "parked")]


def test_purge_keeps_records_inside_the_window(parked_and_paid, django_db):
    age(django_db, "evt_paid", 30)
    assert run("payhooks_purge", "--older-than-days", "31").startswith("deleted 0 record(s)")


def test_purge_deletes_batch_after_batch(django_db):
    for n in range(5):
        Order.objects.create(reference=f"order_{n}", amount_paise=100)
        deliver(capture(f"order_{n}", f"evt_{n}"))
        age(django_db, f"evt_{n}", 100)
    done = retention.purge("default", 90, batch_rows=2)
    assert (done.expired, done.deleted) == (5, 5)


def test_a_dry_run_counts_and_deletes_nothing(parked_and_paid, django_db):
    age(django_db, "evt_paid", 91)
    assert run("payhooks_purge", "--dry-run").startswith("would delete 1 record(s)")
    assert len(records(django_db)) == 2


def test_purge_counts_and_deletes_the_delivery_log_lines_past_the_window(django_db):
    with psycopg.connect(django_db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
            " body_bytes, duration_ms) SELECT now() - interval '100 days', 'razorpay', 401,"
            " 'signature_mismatch', false, 10, 1 FROM generate_series(1, 1000)"
        )
    planned = run("payhooks_purge", "--dry-run")
    assert planned.startswith("would delete 0 record(s) and 1000 delivery-log line(s)"), planned
    done = run("payhooks_purge")
    assert done.startswith("deleted 0 record(s) and 1000 delivery-log line(s)"), done
    with psycopg.connect(django_db) as conn:
        assert conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchone() == (0,)


def test_purge_refuses_a_window_shorter_than_the_gateways_replays(django_db):
    with pytest.raises(CommandError, match="pass --force"):
        run("payhooks_purge", "--older-than-days", "7")


def test_purge_with_force_takes_a_short_window(parked_and_paid, django_db):
    age(django_db, "evt_paid", 8)
    assert run("payhooks_purge", "--older-than-days", "7", "--force").startswith("deleted 1")


def test_purge_refuses_while_another_purge_runs(parked_and_paid, django_db):
    age(django_db, "evt_paid", 91)
    with psycopg.connect(django_db, autocommit=True) as holder, core.exclusively(holder) as mine:
        assert mine
        with pytest.raises(CommandError, match="another purge is running"):
            run("payhooks_purge")
    assert len(records(django_db)) == 2


def test_purge_takes_old_expectations_with_the_records(django_db):
    with psycopg.connect(django_db, autocommit=True) as conn:
        payhooks.expect(conn, "razorpay", "order_old", 100, "INR", "old")
        conn.execute("UPDATE payhooks_expectations SET created_at = now() - interval '100 days'")
        run("payhooks_purge")
        assert conn.execute("SELECT count(*) FROM payhooks_expectations").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--limit", "0"), "--limit is at least 1"),
        (("--limit", "-1"), "--limit is at least 1"),
        (("--older-than-s", "-5"), "--older-than-s is 0 or more"),
    ],
)
def test_reconcile_refuses_a_bound_that_would_reconcile_nothing(django_db, args, said):
    """A typo in a cron line (``--limit 0``) made every pass a no-op that exited 0 ("examined 0
    checkout(s)"); ``payhooks reconcile`` refuses it before anything runs, and so does this."""
    with pytest.raises(CommandError, match=said):
        run("payhooks_reconcile", *args)
