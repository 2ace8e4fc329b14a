"""PhonePe and Juspay in the example shop (examples/fastapi_shop), over real HTTP: their
callbacks prove only who sent them, so each is answered ``confirming`` and pays nothing by
itself; ``payhooks reconcile --hooks`` (the confirmation pass inside it) asks the gateway's
status API, an HTTP double on a loopback socket, and the order is paid once, by what the API
reports. A forged callback under the right credential pays nothing, and is refuted."""

from __future__ import annotations

import os
import subprocess

import psycopg
import pytest

from examples.fastapi_shop.app import adapters_from, create_app, migrate
from payhooks.events import Provider
from payhooks.sim.gateway import Purchase
from tests.acceptance.conftest import invoke
from tests.factories import GATEWAY, KEYS
from tests.fastapi import test_fastapi_example as example
from tests.fastapi.conftest import served
from tests.fastapi.test_fastapi_example import PENDING, REF, checkout, orders, post
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import API_KEYS

SECRETS = {
    "PHONEPE_WEBHOOK_CREDENTIALS": KEYS.phonepe,
    "JUSPAY_WEBHOOK_CREDENTIALS": KEYS.juspay,
}
gateway_api = reconciling.gateway_api  # its fixture
merchant_url = example.merchant_url  # the shop's database, migrated
PAYMENT = {Provider.PHONEPE: "OM2601010000001", Provider.JUSPAY: "payhooks_demo-shop-1"}


@pytest.fixture
def shop(merchant_url: str):
    migrate(merchant_url)
    with served(create_app(merchant_url, adapters_from(SECRETS))) as up:
        yield up


@pytest.fixture
def conn(merchant_url: str, shop):
    with psycopg.connect(merchant_url, autocommit=True) as connection:
        yield connection


def callback(provider: Provider, payment_id: str):
    if provider is Provider.PHONEPE:
        return GATEWAY.phonepe(
            "checkout.order.completed", merchant_order_id=REF, amount_paise=49_900,
            transaction_id=payment_id,
        )  # fmt: skip
    return GATEWAY.juspay("ORDER_SUCCEEDED", order_id=REF, txn=payment_id, amount_paise=49_900)


def reconcile(database_url: str, api_url: str) -> subprocess.CompletedProcess[str]:
    """``payhooks reconcile``, in this process."""
    return invoke(
        {**os.environ, **API_KEYS.env(api_url)}, "reconcile",
        "--hooks", "examples.fastapi_shop.app:hooks", "--database-url", database_url,
        timeout=120,
    )  # fmt: skip


def confirm(database_url: str, api_url: str) -> subprocess.CompletedProcess[str]:
    """``payhooks confirm --once``, in this process too."""
    return invoke(
        {**os.environ, **API_KEYS.env(api_url)}, "confirm", "--once",
        "--hooks", "examples.fastapi_shop.app:hooks", "--database-url", database_url,
        timeout=120,
    )  # fmt: skip


def outcome_of(conn, provider: Provider) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT event_type, outcome FROM processed_webhooks WHERE provider = %s"
        " AND event_id NOT LIKE 'reconcile:%%' ORDER BY processed_at",
        (provider.value,),
    )
    return rows.fetchall()


@pytest.mark.parametrize("provider", [Provider.PHONEPE, Provider.JUSPAY])
def test_a_callback_pays_the_order_once_the_api_confirms_it(
    shop, conn, merchant_url, gateway_api, provider
):
    api, api_url = gateway_api
    checkout(shop, gateway=provider.value)
    api.pay(Purchase(provider=provider, cart_id=REF, reference=REF, amount_paise=49_900,
                     items={"TEA": 1}), PAYMENT[provider])  # fmt: skip
    sent = callback(provider, PAYMENT[provider])
    assert post(shop, sent) == (200, "confirming")
    assert post(shop, sent) == (200, "duplicate")  # the gateway's retry of it
    assert orders(conn) == PENDING  # a claim pays nothing by itself
    done = reconcile(merchant_url, api_url)
    assert done.returncode == 0, done.stderr
    assert "1 callback(s) confirmed by the API, 0 refuted" in done.stdout
    paid = conn.execute("SELECT status, provider, payment_id FROM orders").fetchall()
    assert paid == [("paid", provider.value, PAYMENT[provider])]  # what the API reported
    assert [o for _, o in outcome_of(conn, provider)] == ["confirmed"]


@pytest.mark.parametrize("provider", [Provider.PHONEPE, Provider.JUSPAY])
def test_a_forged_callback_under_the_right_credential_pays_nothing_and_is_refuted(
    shop, conn, merchant_url, gateway_api, provider
):
    api, api_url = gateway_api
    checkout(shop, gateway=provider.value)
    api.pay(Purchase(provider=provider, cart_id=REF, reference=REF, amount_paise=49_900,
                     items={"TEA": 1}), PAYMENT[provider], "FAILED" if provider is
            Provider.PHONEPE else "AUTHORIZATION_FAILED")  # fmt: skip
    assert post(shop, callback(provider, PAYMENT[provider])) == (200, "confirming")
    done = confirm(merchant_url, api_url)  # the loop a merchant runs beside the app, once
    assert done.returncode == 0, done.stderr
    assert "0 callback(s) confirmed by the API, 1 refuted" in done.stdout
    assert orders(conn) == PENDING
    assert [o for _, o in outcome_of(conn, provider)] == ["refuted"]
    assert "callback_refuted" in done.stderr


def test_a_refuted_callback_is_on_the_consoles_timeline_and_raises_its_banner(
    shop, conn, merchant_url, gateway_api
):
    """The operator sees what the API said of each callback, and a banner: a refuted callback
    carried the right credential, so someone else may hold it."""
    from tests.fastapi.test_fastapi_console import CONSOLE, logged_in

    api, api_url = gateway_api
    checkout(shop, gateway="phonepe")
    post(shop, callback(Provider.PHONEPE, PAYMENT[Provider.PHONEPE]))
    with logged_in(shop, merchant_url) as client:
        page = client.get(f"{CONSOLE}/orders/phonepe/{REF}").text
        assert "waiting for the status API (asked 0 times)" in page
        api.pay(Purchase(provider=Provider.PHONEPE, cart_id=REF, reference=REF,
                         amount_paise=49_900, items={"TEA": 1}), PAYMENT[Provider.PHONEPE],
                "FAILED")  # fmt: skip
        assert confirm(merchant_url, api_url).returncode == 0
        page = client.get(f"{CONSOLE}/orders/phonepe/{REF}").text
        assert "refuted by the status API" in page
        assert "the status API reports another state" in page
        home = client.get(f"{CONSOLE}/").text
        assert "carried the right webhook credential but the gateway&#39;s API refuted" in home


def test_the_librarys_confirmation_pass_from_an_apps_own_scheduler(
    shop, conn, merchant_url, gateway_api
):
    """docs/fastapi.md: "from your own scheduler" the confirmation pass is
    ``payhooks.aio.reconcile.run(url, hooks, confirm_only=True)``: it confirms the callback
    waiting and asks nothing about a checkout with no payment (a reconcile pass's work). The
    docs named ``Reconciler.confirm_due()``, whose clients, options and delivery nothing built
    for an app."""
    from examples.fastapi_shop.app import hooks
    from payhooks.aio.reconcile import run

    api, api_url = gateway_api
    provider = Provider.PHONEPE
    checkout(shop, gateway=provider.value)
    api.pay(Purchase(provider=provider, cart_id=REF, reference=REF, amount_paise=49_900,
                     items={"TEA": 1}), PAYMENT[provider])  # fmt: skip
    assert post(shop, callback(provider, PAYMENT[provider])) == (200, "confirming")
    environ = API_KEYS.env(api_url)
    tally = run(merchant_url, hooks, environ=environ, after_s=0, confirm_only=True)
    assert (tally.confirmed[provider], sum(tally.examined.values())) == (1, 0), tally
    paid = conn.execute("SELECT status, provider, payment_id FROM orders").fetchall()
    assert paid == [("paid", provider.value, PAYMENT[provider])]
