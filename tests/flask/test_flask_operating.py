"""Operating the example shop (examples/flask_shop) as docs/flask.md, "Operating it", says: its
checkout tells payhooks what each order must be paid, so an underpaid capture is parked for a
person; a checkout whose webhook never came is recovered by ``payhooks reconcile`` through the
shop's own hooks, once; a parked delivery is found and replayed after the order exists. On
Werkzeug's server over a real socket, asked by the status-API double over a loopback socket."""

from __future__ import annotations

import json
import os
import subprocess

import psycopg
from psycopg.conninfo import make_conninfo

from examples.flask_shop.app import hooks
from payhooks.events import Provider
from payhooks.intake import idempotency
from payhooks.intake.ingest import replay
from payhooks.reconcile import run
from payhooks.sim.gateway import Purchase
from tests.acceptance.conftest import invoke
from tests.factories import ADAPTERS
from tests.flask import test_flask_example as example
from tests.flask.test_flask_example import (
    PAID,
    PENDING,
    REF,
    checkout,
    orders,
    post,
    razorpay,
    status,
)
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import API_KEYS

PAYMENT = "pay_flaskshop001"
search_path, engine, db, shop = example.search_path, example.engine, example.db, example.shop
gateway_api = reconciling.gateway_api  # their fixtures


def test_an_underpaid_capture_is_parked_for_a_person_with_both_amounts(shop, db):
    checkout(shop)
    assert status(post(shop, razorpay(amount_paise=100))) == "parked"
    assert orders(db) == PENDING
    held = db.execute("SELECT expected_paise, paid_paise FROM payhooks_amount_mismatches")
    assert held.fetchall() == [(49_900, 100)]


def payhooks_command(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The command, in this process (tests/reconcile/test_merchant.py runs the installed one)."""
    return invoke({**os.environ, **env}, *args, timeout=120)


def test_a_checkout_whose_webhook_never_came_is_paid_once_by_reconciliation(
    shop, db, database_url, search_path, gateway_api
):
    api, api_url = gateway_api
    checkout(shop)
    api.pay(Purchase(provider=Provider.RAZORPAY, cart_id=REF, reference=REF,
                     amount_paise=49_900, items={"TEA": 1}), PAYMENT)  # fmt: skip
    url = make_conninfo(database_url, **search_path)  # the shop's database: its schema
    done = payhooks_command(
        "reconcile", "--older-than-s", "0", "--hooks", "examples.flask_shop.app:hooks",
        "--database-url", url, env=API_KEYS.env(api_url),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "recovered 1 payment(s) no webhook brought" in done.stdout
    assert orders(db) == PAID
    paid_at = db.execute("SELECT paid_at FROM orders").fetchone()[0]
    # The gateway's webhook, late: answered, and nothing happens twice.
    assert status(post(shop, razorpay())) == "duplicate"
    assert orders(db) == PAID
    assert db.execute("SELECT paid_at FROM orders").fetchone()[0] == paid_at


def test_a_parked_capture_is_listed_and_pays_the_order_when_replayed_after_checkout(
    shop, db, database_url, search_path
):
    assert status(post(shop, razorpay())) == "parked"  # the webhook before the checkout
    parked = idempotency.parked(db)
    assert [(p.provider, p.event_type) for p in parked] == [("razorpay", "payment.captured")]
    checkout(shop)
    with psycopg.connect(database_url, autocommit=True, **search_path) as conn:
        receipt = replay(conn, ADAPTERS[Provider.RAZORPAY], parked[0], hooks)
    assert receipt.outcome.value == "processed"
    assert orders(db) == PAID and idempotency.parked(db) == []


def test_the_payhooks_parked_command_lists_the_shops_parked_deliveries(
    shop, database_url, search_path
):
    post(shop, razorpay())
    url = make_conninfo(database_url, **search_path)
    done = payhooks_command("parked", "--json", env={"DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [(p["provider"], p["event_type"]) for p in listed] == [("razorpay", "payment.captured")]


def test_a_pass_from_the_apps_own_scheduler_pays_the_order_once(
    shop, db, database_url, search_path, gateway_api
):
    """docs/flask.md's scheduler pass: payhooks.reconcile.run on the shop's database."""
    api, api_url = gateway_api
    checkout(shop)
    api.pay(Purchase(provider=Provider.RAZORPAY, cart_id=REF, reference=REF,
                     amount_paise=49_900, items={"TEA": 1}), PAYMENT)  # fmt: skip
    url = make_conninfo(database_url, **search_path)
    tally = run(url, hooks, environ=API_KEYS.env(api_url), after_s=0)
    assert sum(tally.recovered.values()) == 1
    assert orders(db) == PAID
