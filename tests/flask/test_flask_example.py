"""The example shop (examples/flask_shop) on Werkzeug's threaded server over a real socket,
driven as a gateway drives it: signed deliveries over HTTP, copies, two events of one payment,
a failure, a forgery, a PayU form behind the shop's own form-reading hook. The shop's
``orders`` table must end with one row per paid reference."""

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

from examples.flask_shop.app import adapters_from, create_app, migrate, place_order
from payhooks import EventKind, Hooks
from payhooks.providers._common import MAX_JSON_BODY_BYTES
from payhooks.sim.gateway import Delivery
from tests.conftest import released_together
from tests.factories import GATEWAY, KEYS
from tests.flask.conftest import engine_for, own_schema, serving, sqlalchemy_url
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


def razorpay(event: str = "payment.captured", payment_id: str = "pay_flaskshop001") -> Delivery:
    return GATEWAY.razorpay(event, payment_id=payment_id, order_id=REF, amount_paise=49_900)


def post(base: str, delivery: Delivery, client: httpx.Client | None = None) -> httpx.Response:
    send = client.post if client else httpx.post
    return send(base + delivery.path, content=delivery.body, headers=delivery.headers)


def status(response: httpx.Response) -> str | None:
    return response.json().get("status") if response.status_code == 200 else None


def orders(db) -> list[tuple[object, ...]]:
    return db.execute("SELECT merchant_ref, payment_id, amount_paise FROM orders").fetchall()


def claimed(db) -> int:
    return db.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0]


def test_a_capture_places_the_order_the_shop_then_shows(shop):
    assert status(post(shop, razorpay())) == "processed"
    shown = httpx.get(f"{shop}/orders/{REF}").json()
    assert (shown["payment_id"], shown["amount_paise"]) == ("pay_flaskshop001", 49_900)


def test_fifty_concurrent_copies_of_one_delivery_place_one_order(shop, db):
    delivery = razorpay()
    answers = released_together(
        list(range(50)),
        lambda _: httpx.Client(timeout=30),
        lambda client, _: status(post(shop, delivery, client)),
    )
    assert answers.count("processed") == 1 and answers.count("duplicate") == 49
    assert orders(db) == [(REF, "pay_flaskshop001", 49_900)]


def test_payment_captured_and_order_paid_place_one_order(shop, db):
    answers = [status(post(shop, razorpay(event))) for event in ("payment.captured", "order.paid")]
    assert answers == ["processed", "processed"]  # two deliveries, one payment
    assert orders(db) == [(REF, "pay_flaskshop001", 49_900)] and claimed(db) == 2


def test_a_handler_that_raises_answers_5xx_records_nothing_and_the_retry_succeeds(engine, db):
    failures = [RuntimeError("the shop's mailer is down")]
    hooks = Hooks()
    hooks.on(EventKind.PAYMENT_CAPTURED)(place_order)

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def then_fails_once(conn, event):
        if failures:
            raise failures.pop()

    delivery = razorpay()
    with serving(create_app(engine, adapters_from(SECRETS), hooks)) as shop:
        first = post(shop, delivery)
        assert first.status_code >= 500 and (orders(db), claimed(db)) == ([], 0)
        assert status(post(shop, delivery)) == "processed"
    assert len(orders(db)) == 1


def test_a_forged_signature_answers_401_and_places_nothing(shop, db):
    delivery = razorpay()
    forged = {**delivery.headers, "x-razorpay-signature": "f" * 64}
    response = httpx.post(shop + delivery.path, content=delivery.body, headers=forged)
    assert response.status_code == 401 and (orders(db), claimed(db)) == ([], 0)


def test_a_payu_post_passes_the_shops_form_reading_hook_and_places_one_order(shop, db):
    delivery = GATEWAY.payu(txnid=REF, mihpayid="403993715500000002", amount="499.00")
    assert [status(post(shop, delivery)) for _ in range(2)] == ["processed", "duplicate"]
    assert orders(db) == [(REF, REF, 49_900)]


def test_the_shops_hook_does_read_the_form_of_a_webhook_post(shop, db):
    """What makes the test above a trap: the shop's spam check parses every POST's form."""
    response = httpx.post(
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


def test_under_gunicorn_a_chunked_capture_places_the_order(gunicorn_shop, db):
    delivery = razorpay()
    response = httpx.post(
        gunicorn_shop + delivery.path, content=chunked(delivery.body), headers=delivery.headers
    )
    assert status(response) == "processed" and len(orders(db)) == 1


def test_under_gunicorn_a_chunked_body_over_the_bound_is_413(gunicorn_shop, db):
    delivery = razorpay()
    padded = delivery.body + b" " * MAX_JSON_BODY_BYTES
    response = httpx.post(
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
        response = httpx.post(
            f"http://127.0.0.1:{server.server_port}{delivery.path}",
            content=iter([delivery.body]),
            headers=delivery.headers,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert (response.status_code, response.json()["error"]) == (411, "length_required")
    assert (orders(db), claimed(db)) == ([], 0)
