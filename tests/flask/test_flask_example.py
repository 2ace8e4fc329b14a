"""The example shop (examples/flask_shop) on Werkzeug's threaded server over a real socket,
driven as a customer and a gateway drive it: a checkout over HTTP, then signed deliveries
(copies, two events of one payment, a failure, a forgery, a short or foreign-currency payment,
a second payment, a PayU form behind the shop's own form-reading hook). An order is paid once,
by one payment of exactly what it costs, or not at all."""

from __future__ import annotations

import json
import os
import threading
import wsgiref.simple_server
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import sqlalchemy

from examples.flask_shop.app import adapters_from, create_app, mark_paid, migrate
from payhooks import EventKind, Hooks
from payhooks.gateways._common import MAX_JSON_BODY_BYTES
from payhooks.sim.gateway import Delivery
from tests import loopback
from tests.conftest import released_together
from tests.factories import GATEWAY, KEYS
from tests.flask.conftest import engine_for, own_schema, serving, sqlalchemy_url
from tests.shops import REFUSED_SETTINGS, refused_at_start
from tests.wsgi_server import gunicorn_serving

ROOT = Path(__file__).parents[2]
REF = "order_flaskshop01"
SECRETS = {
    "RAZORPAY_WEBHOOK_SECRETS": json.dumps([KEYS.razorpay, "whsec_retired"]),
    "CASHFREE_CLIENT_SECRETS": KEYS.cashfree,
    "PAYU_MERCHANT_KEY": KEYS.payu_key,
    "PAYU_SALTS": KEYS.payu_salt,
}


@pytest.fixture
def search_path(database_url: str) -> dict[str, str]:
    return own_schema(database_url, "flask_shop")


@pytest.fixture
def engine(database_url: str, search_path: dict[str, str]) -> Iterator[sqlalchemy.Engine]:
    made = engine_for(database_url, **search_path)
    migrate(made)
    yield made
    made.dispose()


@pytest.fixture
def db(database_url: str, search_path, engine) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database_url, autocommit=True, **search_path) as conn:
        yield conn


@pytest.fixture
def shop(engine: sqlalchemy.Engine) -> Iterator[str]:
    with serving(create_app(engine, adapters_from(SECRETS))) as base:
        yield base


def checkout(
    base: str,
    ref: str = REF,
    amount_paise: int = 49_900,
    currency: str = "INR",
    gateway: str = "razorpay",
):
    body = {"merchant_ref": ref, "amount_paise": amount_paise, "currency": currency}
    response = loopback.post(f"{base}/orders", json={**body, "gateway": gateway})
    assert response.status_code == 201, response.text
    return response.json()


def razorpay(
    event: str = "payment.captured",
    payment_id: str = "pay_flaskshop001",
    amount_paise: int = 49_900,
    currency: str = "INR",
) -> Delivery:
    return GATEWAY.razorpay(
        event, payment_id=payment_id, order_id=REF, amount_paise=amount_paise, currency=currency
    )


def post(base: str, delivery: Delivery, client: httpx.Client | None = None) -> httpx.Response:
    send = client.post if client else httpx.post
    return send(base + delivery.path, content=delivery.body, headers=delivery.headers)


def status(response: httpx.Response) -> str | None:
    return response.json().get("status") if response.status_code == 200 else None


def orders(db) -> list[tuple[object, ...]]:
    """Each order's reference, status and the payment that paid it."""
    return db.execute(
        "SELECT merchant_ref, status, payment_id FROM orders ORDER BY merchant_ref"
    ).fetchall()


PAID = [(REF, "paid", "pay_flaskshop001")]
PENDING = [(REF, "pending", None)]


def claimed(db) -> int:
    return db.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0]


def test_a_capture_pays_the_order_the_shop_then_shows(shop):
    placed = checkout(shop)
    assert (placed["status"], placed["payment_id"], placed["paid_at"]) == ("pending", None, None)
    assert status(post(shop, razorpay())) == "processed"
    shown = loopback.get(f"{shop}/orders/{REF}").json()
    assert shown.pop("created_at") == placed["created_at"] and shown.pop("paid_at")
    assert shown == {
        "merchant_ref": REF,
        "amount_paise": 49_900,
        "currency": "INR",
        "status": "paid",
        "provider": "razorpay",
        "payment_id": "pay_flaskshop001",
    }


def test_fifty_concurrent_copies_of_one_delivery_pay_the_order_once(shop, db):
    checkout(shop)
    delivery = razorpay()
    answers = released_together(
        list(range(50)),
        lambda _: loopback.Client(timeout=30),
        lambda client, _: status(post(shop, delivery, client)),
    )
    assert answers.count("processed") == 1 and answers.count("duplicate") == 49
    assert orders(db) == PAID


def test_payment_captured_and_order_paid_pay_the_order_once(shop, db):
    checkout(shop)
    assert status(post(shop, razorpay("payment.captured"))) == "processed"
    paid_at = db.execute("SELECT paid_at FROM orders").fetchone()[0]
    assert status(post(shop, razorpay("order.paid"))) == "processed"  # the same payment again
    assert orders(db) == PAID and claimed(db) == 2
    assert db.execute("SELECT paid_at FROM orders").fetchone()[0] == paid_at


def test_an_overpaid_capture_is_parked_and_leaves_the_order_unpaid(shop, db):
    checkout(shop)
    assert status(post(shop, razorpay(amount_paise=49_901))) == "parked"
    assert orders(db) == PENDING


def test_a_capture_in_another_currency_is_parked_and_leaves_the_order_unpaid(shop, db):
    checkout(shop)
    assert status(post(shop, razorpay(currency="USD"))) == "parked"
    assert orders(db) == PENDING


def test_the_handler_ignores_a_short_capture_for_an_order_payhooks_was_not_told_of(shop, db):
    """An order written before the checkout called expect(): the handler's own check."""
    placed = "INSERT INTO orders (merchant_ref, amount_paise, currency) VALUES (%s, 49900, 'INR')"
    db.execute(placed, (REF,))
    assert status(post(shop, razorpay(amount_paise=100))) == "ignored"
    assert orders(db) == PENDING


def test_a_capture_of_the_right_amount_after_a_short_one_pays_the_order(shop, db):
    checkout(shop)
    post(shop, razorpay(payment_id="pay_flaskshort01", amount_paise=100))
    assert status(post(shop, razorpay())) == "processed"
    assert orders(db) == PAID


def test_a_capture_for_an_order_never_checked_out_is_parked(shop, db):
    assert status(post(shop, razorpay())) == "parked"
    outcome = db.execute("SELECT outcome FROM processed_webhooks").fetchone()[0]
    assert (outcome, orders(db)) == ("parked", [])


def test_a_second_payment_for_a_paid_order_does_not_replace_the_first(shop, db):
    checkout(shop)
    post(shop, razorpay())
    assert status(post(shop, razorpay(payment_id="pay_flaskshop002"))) == "ignored"
    assert orders(db) == PAID


def test_ten_payments_at_once_for_one_order_pay_it_once(shop, db):
    checkout(shop)
    payments = {
        f"pay_flaskshop{n:03}": razorpay(payment_id=f"pay_flaskshop{n:03}") for n in range(10)
    }
    answers = dict(
        released_together(
            list(payments),
            lambda _: loopback.Client(timeout=30),
            lambda client, payment_id: (
                payment_id,
                status(post(shop, payments[payment_id], client)),
            ),
        )
    )
    paid_by = [payment_id for payment_id, said in answers.items() if said == "processed"]
    assert len(paid_by) == 1 and list(answers.values()).count("ignored") == 9
    assert orders(db) == [(REF, "paid", paid_by[0])]


def test_a_handler_that_raises_answers_5xx_records_nothing_and_the_retry_succeeds(engine, db):
    failures = [RuntimeError("the shop's mailer is down")]
    hooks = Hooks()
    hooks.on(EventKind.PAYMENT_CAPTURED)(mark_paid)

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def then_fails_once(conn, event):
        if failures:
            raise failures.pop()

    delivery = razorpay()
    with serving(create_app(engine, adapters_from(SECRETS), hooks)) as shop:
        checkout(shop)
        first = post(shop, delivery)
        assert first.status_code >= 500 and (orders(db), claimed(db)) == (PENDING, 0)
        assert status(post(shop, delivery)) == "processed"
    assert orders(db) == PAID


def test_a_forged_signature_answers_401_and_pays_nothing(shop, db):
    checkout(shop)
    delivery = razorpay()
    forged = {**delivery.headers, "x-razorpay-signature": "f" * 64}
    response = loopback.post(shop + delivery.path, content=delivery.body, headers=forged)
    assert response.status_code == 401 and (orders(db), claimed(db)) == (PENDING, 0)


def test_a_payu_post_passes_the_shops_form_reading_hook_and_pays_the_order_once(shop, db):
    checkout(shop, gateway="payu")
    delivery = GATEWAY.payu(txnid=REF, mihpayid="403993715500000002", amount="499.00")
    assert [status(post(shop, delivery)) for _ in range(2)] == ["processed", "duplicate"]
    assert orders(db) == [(REF, "paid", REF)]  # PayU's payment id is the txnid


def test_cashfree_is_served_too(shop, db):
    checkout(shop, amount_paise=100, gateway="cashfree")
    delivery = GATEWAY.cashfree(
        "PAYMENT_SUCCESS_WEBHOOK", order_id=REF, cf_payment_id="5114910", order_amount=1
    )
    assert status(post(shop, delivery)) == "processed"
    assert orders(db) == [(REF, "paid", "5114910")]


def test_an_order_not_checked_out_is_404(shop):
    assert loopback.get(f"{shop}/orders/order_nosuch").status_code == 404


def test_a_second_checkout_under_one_reference_is_409_and_keeps_the_first(shop, db):
    checkout(shop)
    again = {"merchant_ref": REF, "amount_paise": 100, "currency": "INR"}
    assert loopback.post(f"{shop}/orders", json=again).status_code == 409
    assert db.execute("SELECT amount_paise FROM orders").fetchall() == [(49_900,)]


@pytest.mark.parametrize(
    "change",
    [
        {"amount_paise": 0},
        {"amount_paise": -100},
        {"amount_paise": 499.0},
        {"amount_paise": "49900"},
        {"amount_paise": True},
        {"amount_paise": 2**63},
        {"currency": "inr"},
        {"currency": "RUPEE"},
        {"currency": None},
        {"gateway": "stripe"},
        {"merchant_ref": ""},
        {"merchant_ref": "x" * 65},
        {"merchant_ref": "order/1"},
        {"merchant_ref": 12345},
        {"extra": "field"},
    ],
)
def test_checkout_refuses_bad_input_with_400(shop, db, change):
    body = {"merchant_ref": REF, "amount_paise": 49_900, "currency": "INR", **change}
    response = loopback.post(f"{shop}/orders", json=body)
    assert response.status_code == 400 and orders(db) == []


def test_checkout_refuses_a_body_that_is_not_json_with_400(shop, db):
    response = loopback.post(
        f"{shop}/orders", content=b"[1, 2", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and orders(db) == []


def test_the_shops_hook_does_read_the_form_of_a_webhook_post(shop, db):
    """What makes the test above a trap: the shop's spam check parses every POST's form."""
    response = loopback.post(
        f"{shop}/webhooks/payu",
        content=b"website=spam.example",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 400 and claimed(db) == 0


# --- under gunicorn, and under a server that does not end chunked input ----------------------


def chunked(body: bytes, size: int = 100) -> Iterator[bytes]:
    return (body[at : at + size] for at in range(0, len(body), size))


@pytest.fixture
def gunicorn_shop(database_url, search_path, engine) -> Iterator[str]:
    url = sqlalchemy_url(database_url, **search_path).render_as_string(hide_password=False)
    env = {**os.environ, **SECRETS, "DATABASE_URL": url}
    with gunicorn_serving("tests.flask.gunicorn_app:app", cwd=ROOT, env=env) as base:
        yield base


def test_under_gunicorn_a_chunked_capture_pays_the_order(gunicorn_shop, db):
    checkout(gunicorn_shop)
    delivery = razorpay()
    response = loopback.post(
        gunicorn_shop + delivery.path, content=chunked(delivery.body), headers=delivery.headers
    )
    assert status(response) == "processed" and orders(db) == PAID


def test_under_gunicorn_a_chunked_body_over_the_bound_is_413(gunicorn_shop, db):
    delivery = razorpay()
    padded = delivery.body + b" " * MAX_JSON_BODY_BYTES
    response = loopback.post(
        gunicorn_shop + delivery.path, content=chunked(padded, 64 * 1024), headers=delivery.headers
    )
    assert response.status_code == 413 and (orders(db), claimed(db)) == ([], 0)


def test_a_chunked_body_the_server_cannot_end_is_411_not_a_signature_mismatch(engine, db):
    """wsgiref sets no ``wsgi.input_terminated``: Werkzeug then gives an empty body."""
    app = create_app(engine, adapters_from(SECRETS))
    server = wsgiref.simple_server.make_server("127.0.0.1", 0, app)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    delivery = razorpay()
    try:
        response = loopback.post(
            f"http://127.0.0.1:{server.server_port}{delivery.path}",
            content=iter([delivery.body]),
            headers=delivery.headers,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert (response.status_code, response.json()["error"]) == (411, "length_required")
    assert (orders(db), claimed(db)) == ([], 0)


@pytest.mark.parametrize(("variable", "value"), REFUSED_SETTINGS)
def test_a_webhook_setting_payhooks_refuses_stops_the_shop_at_start_naming_it(variable, value):
    refused_at_start("flask_shop", variable, value)
