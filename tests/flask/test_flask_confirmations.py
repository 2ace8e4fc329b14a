"""PhonePe and Juspay in the example shop (examples/flask_shop), on Werkzeug's threaded server
over a real socket: their callbacks prove only who sent them, so each is answered
``confirming`` and pays nothing by itself. ``payhooks confirm --hooks
examples.flask_shop.app:hooks`` (the loop docs/flask.md has a merchant run beside the app, here
one pass of it) or a ``payhooks reconcile --hooks`` pass asks the gateway's status API, an HTTP
double on a loopback socket, and the order is paid once, by what the API reports. A forged
callback under the right credential pays nothing, and is refuted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy
from psycopg.conninfo import make_conninfo

from examples.flask_shop.app import adapters_from, create_app
from payhooks.events import Provider
from payhooks.sim.gateway import Delivery, Purchase
from payhooks.sim.gateway_api import Fault
from tests import loopback
from tests.factories import GATEWAY, KEYS
from tests.flask import test_flask_example as example
from tests.flask.conftest import serving
from tests.flask.test_flask_example import PENDING, REF, SECRETS, checkout, orders, post
from tests.flask.test_flask_operating import payhooks_command
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import API_KEYS

CREDENTIALS = {
    "PHONEPE_WEBHOOK_CREDENTIALS": KEYS.phonepe,
    "JUSPAY_WEBHOOK_CREDENTIALS": KEYS.juspay,
}
PAYMENT = {Provider.PHONEPE: "OM2601010000001", Provider.JUSPAY: "payhooks_demo-flask-1"}
FAILED = {Provider.PHONEPE: "FAILED", Provider.JUSPAY: "AUTHORIZATION_FAILED"}
search_path, engine, db = example.search_path, example.engine, example.db
gateway_api = reconciling.gateway_api  # their fixtures


@pytest.fixture
def shop(engine: sqlalchemy.Engine) -> Iterator[str]:
    with serving(create_app(engine, adapters_from({**SECRETS, **CREDENTIALS}))) as base:
        yield base


def callback(provider: Provider) -> Delivery:
    """What the gateway posts for a successful payment, under the dashboard's credential."""
    if provider is Provider.PHONEPE:
        return GATEWAY.phonepe(
            "checkout.order.completed", merchant_order_id=REF, amount_paise=49_900,
            transaction_id=PAYMENT[provider],
        )  # fmt: skip
    return GATEWAY.juspay(
        "ORDER_SUCCEEDED", order_id=REF, txn=PAYMENT[provider], amount_paise=49_900
    )


def answer(shop: str, delivery: Delivery) -> tuple[int, str | None]:
    response = post(shop, delivery)
    return response.status_code, response.json().get("status")


def paid_at_gateway(api, provider: Provider, status: str | None = None) -> None:
    """The customer's payment, as the gateway's status API will report it."""
    purchase = Purchase(
        provider=provider, cart_id=REF, reference=REF, amount_paise=49_900, items={"TEA": 1}
    )
    api.pay(purchase, PAYMENT[provider], status)


def outcomes(db, provider: Provider) -> list[str]:
    """What became of the gateway's callbacks (not reconciliation's own claims)."""
    rows = db.execute(
        "SELECT outcome FROM processed_webhooks WHERE provider = %s"
        " AND event_id NOT LIKE 'reconcile:%%' ORDER BY processed_at",
        (provider.value,),
    )
    return [outcome for (outcome,) in rows]


@pytest.mark.parametrize("provider", [Provider.PHONEPE, Provider.JUSPAY])
def test_a_callback_pays_the_order_once_payhooks_confirm_has_the_apis_word(
    shop, db, database_url, search_path, gateway_api, provider
):
    api, api_url = gateway_api
    checkout(shop, gateway=provider.value)
    paid_at_gateway(api, provider)
    sent = callback(provider)
    assert answer(shop, sent) == (200, "confirming")  # at once: no API is asked in the request
    assert answer(shop, sent) == (200, "duplicate")  # the gateway's retry of it
    assert orders(db) == PENDING  # a claim pays nothing by itself
    url = make_conninfo(database_url, **search_path)  # the shop's database: its schema
    done = payhooks_command(
        "confirm", "--once", "--hooks", "examples.flask_shop.app:hooks",
        "--database-url", url, env=API_KEYS.env(api_url),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 callback(s) confirmed by the API, 0 refuted" in done.stdout
    assert orders(db) == [(REF, "paid", PAYMENT[provider])]  # what the API reported
    assert outcomes(db, provider) == ["confirmed"]
    paid_at = db.execute("SELECT paid_at FROM orders").fetchone()[0]
    assert answer(shop, sent) == (200, "duplicate")  # a late retry changes nothing
    assert db.execute("SELECT paid_at FROM orders").fetchone()[0] == paid_at
    shown = loopback.get(f"{shop}/orders/{REF}").json()
    assert (shown["status"], shown["provider"]) == ("paid", provider.value)


def waiting_callback(shop, api, provider: Provider, database_url: str, search_path):
    """A checkout paid at the gateway whose callback waits ``confirming``: the shop's database
    URL, and ``payhooks confirm --once`` on it through the shop's hooks."""
    checkout(shop, gateway=provider.value)
    paid_at_gateway(api, provider)
    assert answer(shop, callback(provider)) == (200, "confirming")
    url = make_conninfo(database_url, **search_path)
    return url, ("confirm", "--once", "--hooks", "examples.flask_shop.app:hooks",
                 "--database-url", url)  # fmt: skip


def test_confirm_once_exits_1_while_the_status_api_fails_and_confirms_once_it_answers(
    shop, db, database_url, search_path, gateway_api
):
    """A cron job running ``payhooks confirm --once`` learns the API failed (exit 1, the
    trouble on stderr), as ``payhooks reconcile`` tells it; the callback waits, and the next
    pass confirms it."""
    api, api_url = gateway_api
    provider = Provider.PHONEPE  # its token, then its status: the first call fails
    _, confirming = waiting_callback(shop, api, provider, database_url, search_path)
    api.fail_next(provider, Fault(status=503))
    down = payhooks_command(*confirming, env=API_KEYS.env(api_url))
    assert down.returncode == 1
    assert "0 callback(s) confirmed by the API, 0 refuted" in down.stdout
    said = "payhooks: 1 gateway API error(s) (phonepe 1); those callbacks are asked again later"
    assert said in down.stderr
    assert orders(db) == PENDING
    # A pass inside its backoff asks nothing, and still says the callback waits after an
    # error: a cron landing there saw success while the order stayed unpaid. (The backoff is
    # 2 s, which a busy machine can outlast between two commands: held out of reach here.)
    db.execute("UPDATE payhooks_confirmations SET next_attempt_at = now() + interval '1 hour'")
    held = payhooks_command(*confirming, env=API_KEYS.env(api_url))
    assert held.returncode == 1, held.stderr
    assert "1 callback(s) waiting to be asked again after an error (phonepe 1)" in held.stderr
    db.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    up = payhooks_command(*confirming, env=API_KEYS.env(api_url))
    assert up.returncode == 0, up.stderr
    assert orders(db) == [(REF, "paid", PAYMENT[provider])]


def test_confirm_once_names_a_gateway_whose_callbacks_wait_for_want_of_its_credentials(
    shop, db, database_url, search_path, gateway_api
):
    """Juspay's callbacks waited, never asked about, while only another gateway's API
    credentials were set, and ``payhooks confirm --once`` exited 0 with an empty pass: a cron
    job never noticed. They are named on standard error, with the variables to set, and
    ``--once`` exits 1, as ``payhooks refunds send`` does for its intents."""
    api, api_url = gateway_api
    provider = Provider.JUSPAY
    url, confirming = waiting_callback(shop, api, provider, database_url, search_path)
    others = {k: v for k, v in API_KEYS.env(api_url).items() if "JUSPAY" not in k}
    said = (
        "payhooks: Juspay: 1 callback(s) waiting, never confirmed: its API credentials are not "
        "set (PAYHOOKS_JUSPAY_MERCHANT_ID and PAYHOOKS_JUSPAY_API_KEY)"
    )
    waiting = payhooks_command(*confirming, env=others)
    assert waiting.returncode == 1
    assert said in waiting.stderr
    # a reconcile pass confirms the waiting callbacks too (docs/flask.md): it says so as well
    reconciling = ("reconcile", "--hooks", "examples.flask_shop.app:hooks", "--database-url", url)
    passed = payhooks_command(*reconciling, env=others)
    assert passed.returncode == 1
    assert said in passed.stderr
    assert orders(db) == PENDING
    done = payhooks_command(*confirming, env=API_KEYS.env(api_url))
    assert done.returncode == 0, done.stderr
    assert "Juspay" not in done.stderr
    assert orders(db) == [(REF, "paid", PAYMENT[provider])]


@pytest.mark.parametrize("provider", [Provider.PHONEPE, Provider.JUSPAY])
def test_a_forged_callback_under_the_right_credential_pays_nothing_and_is_refuted(
    shop, db, database_url, search_path, gateway_api, provider
):
    api, api_url = gateway_api
    checkout(shop, gateway=provider.value)
    paid_at_gateway(api, provider, FAILED[provider])  # the API knows the payment failed
    assert answer(shop, callback(provider)) == (200, "confirming")
    url = make_conninfo(database_url, **search_path)
    done = payhooks_command(
        "reconcile", "--hooks", "examples.flask_shop.app:hooks",
        "--database-url", url, env=API_KEYS.env(api_url),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "0 callback(s) confirmed by the API, 1 refuted" in done.stdout
    assert "callback_refuted" in done.stderr
    assert orders(db) == PENDING
    assert outcomes(db, provider) == ["refuted"]
