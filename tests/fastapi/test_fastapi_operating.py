"""Operating the example shop (examples/fastapi_shop) as docs/fastapi.md, "Operating it", says:
its checkout tells payhooks what each order must be paid, so an underpaid capture is parked
for a person; a checkout whose webhook never came is recovered by ``payhooks reconcile`` through
the shop's own async hooks, once; a parked delivery is found and replayed after the order
exists. Served by real uvicorn, asked by the status-API double over a loopback socket."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import psycopg

from examples.fastapi_shop.app import hooks
from payhooks.aio.claims import ingest_received
from payhooks.aio.reconcile import delivering
from payhooks.events import Provider
from payhooks.intake import idempotency
from payhooks.intake.ingest import restored
from payhooks.reconcile import credentials, reconcile_once
from payhooks.reconcile.running import connecting
from payhooks.sim.gateway import Purchase
from tests.acceptance.conftest import invoke
from tests.factories import ADAPTERS, KEYS
from tests.fastapi import test_fastapi_example as example
from tests.fastapi.test_fastapi_example import PAID, PENDING, REF, checkout, orders, post, razorpay
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import API_KEYS

ROOT = Path(__file__).parents[2]
shop, conn, gateway_api = example.shop, example.conn, reconciling.gateway_api  # their fixtures
merchant_url = example.merchant_url  # the shop's database, migrated
PAYMENT = "pay_shop0000001"


def test_an_underpaid_capture_is_parked_for_a_person_with_both_amounts(shop, conn):
    checkout(shop)
    assert post(shop, razorpay(amount_paise=100)) == (200, "parked")
    assert orders(conn) == PENDING
    held = conn.execute("SELECT expected_paise, paid_paise FROM payhooks_amount_mismatches")
    assert held.fetchall() == [(49_900, 100)]


def reconcile(database_url: str, api_url: str) -> subprocess.CompletedProcess[str]:
    """``payhooks reconcile`` as cron runs it, with the double's API credentials."""
    return invoke(
        {**os.environ, **API_KEYS.env(api_url)}, "reconcile", "--older-than-s", "0",
        "--hooks", "examples.fastapi_shop.app:hooks", "--database-url", database_url,
        timeout=120,
    )  # fmt: skip


def test_a_checkout_whose_webhook_never_came_is_paid_once_by_reconciliation(
    shop, conn, merchant_url, gateway_api
):
    api, api_url = gateway_api
    checkout(shop)
    api.pay(Purchase(provider=Provider.RAZORPAY, cart_id=REF, reference=REF,
                     amount_paise=49_900, items={"TEA": 1}), PAYMENT)  # fmt: skip
    done = reconcile(merchant_url, api_url)
    assert done.returncode == 0, done.stderr
    assert "recovered 1 payment(s) no webhook brought" in done.stdout
    assert orders(conn) == PAID
    paid_at = conn.execute("SELECT paid_at FROM orders").fetchone()[0]
    # The gateway's webhook, late: answered, and nothing happens twice.
    assert post(shop, razorpay()) == (200, "duplicate")
    assert orders(conn) == PAID
    assert conn.execute("SELECT paid_at FROM orders").fetchone()[0] == paid_at


async def replayed(database_url: str, stored: idempotency.Stored) -> str:
    """A stored delivery through the shop's async hooks again, as the route claims it."""
    adapter = ADAPTERS[Provider(stored.provider)]
    again = restored(adapter, event_id=stored.event_id, body=stored.body, headers=stored.headers)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
        receipt = await ingest_received(aconn, again, hooks)
    return receipt.outcome.value


def test_a_parked_capture_is_listed_and_pays_the_order_when_replayed_after_checkout(
    shop, conn, merchant_url
):
    assert post(shop, razorpay()) == (200, "parked")  # the webhook before the checkout
    parked = idempotency.parked(conn)
    assert [(p.provider, p.event_type) for p in parked] == [("razorpay", "payment.captured")]
    checkout(shop)
    assert asyncio.run(replayed(merchant_url, parked[0])) == "processed"
    assert orders(conn) == PAID and idempotency.parked(conn) == []


async def parked_async(database_url: str) -> list[idempotency.Stored]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
        return await idempotency.parked_async(aconn, limit=10)


def test_an_async_app_lists_its_parked_deliveries_on_its_own_connection(shop, conn, merchant_url):
    assert post(shop, razorpay()) == (200, "parked")
    listed = asyncio.run(parked_async(merchant_url))
    assert listed == idempotency.parked(conn)
    assert [(p.provider, p.event_type) for p in listed] == [("razorpay", "payment.captured")]


def test_the_payhooks_parked_command_lists_the_shops_parked_deliveries(shop, conn, merchant_url):
    post(shop, razorpay())
    done = invoke({**os.environ, "DATABASE_URL": merchant_url}, "parked", "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [(p["provider"], p["event_type"]) for p in listed] == [("razorpay", "payment.captured")]


def test_a_replay_without_hooks_on_the_apps_database_says_to_name_them(shop, conn, merchant_url):
    """Without ``--hooks``, ``payhooks replay`` applies the reference shop's handler, whose
    tables the app's database does not hold: it says to pass the app's handler, and changes
    nothing."""
    delivery = razorpay()
    assert post(shop, delivery) == (200, "parked")
    key = delivery.headers["x-razorpay-event-id"]
    done = invoke({**os.environ, **KEYS.env(), "DATABASE_URL": merchant_url}, "replay", key)
    assert done.returncode == 1
    assert "--hooks module:attribute" in done.stderr and "migrate" not in done.stderr
    assert [p.event_id for p in idempotency.parked(conn)] == [key]


def test_a_pass_from_the_apps_own_scheduler_pays_the_order_once(
    shop, conn, merchant_url, gateway_api
):
    """docs/fastapi.md's scheduler pass: the command's pieces, off the event loop."""
    api, api_url = gateway_api
    checkout(shop)
    api.pay(Purchase(provider=Provider.RAZORPAY, cart_id=REF, reference=REF,
                     amount_paise=49_900, items={"TEA": 1}), PAYMENT)  # fmt: skip

    def reconcile_pass():
        found = credentials(API_KEYS.env(api_url))
        deliver = delivering(merchant_url, hooks)
        return reconcile_once(connecting(merchant_url), deliver, found, after_s=0)

    async def scheduled():
        return await asyncio.to_thread(reconcile_pass)

    assert sum(asyncio.run(scheduled()).recovered.values()) == 1
    assert orders(conn) == PAID
