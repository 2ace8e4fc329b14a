"""The example shop (examples/django_shop) served over a real socket and driven over HTTP as a
gateway drives it: concurrent copies, two events for one payment, a failure then its retry, a
forgery; and run from its own manage.py."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import psycopg
import pytest
import uvicorn
from django.test import override_settings
from orders.models import Order

from payhooks.gateways._common import MAX_JSON_BODY_BYTES
from payhooks.sim.gateway import Delivery
from tests import loopback
from tests.conftest import free_port, released_together
from tests.django.conftest import EXAMPLE, PAYHOOKS, post, records
from tests.factories import GATEWAY, KEYS, payu_authorised_post
from tests.wsgi_server import gunicorn_serving

REF = "order_shop1"
PAYMENT = "pay_shop00000001"


def razorpay(event: str = "payment.captured") -> Delivery:
    return GATEWAY.razorpay(event, payment_id=PAYMENT, order_id=REF, amount_paise=129_900)


def orders() -> list[tuple[str, str, str]]:
    return list(Order.objects.values_list("reference", "status", "payment_id"))


@pytest.fixture
def checkout(django_db) -> Order:
    """The shop's checkout made the order, under the gateway's order id, before payment."""
    return Order.objects.create(reference=REF, amount_paise=129_900)


def test_fifty_concurrent_copies_of_one_delivery_pay_the_order_once(site, checkout, django_db):
    delivery = razorpay()
    answers = released_together(
        list(range(50)),
        lambda _: loopback.Client(timeout=60),
        lambda client, _: post_with(client, site, delivery).json()["status"],
    )
    assert sorted(set(answers)) == ["duplicate", "processed"] and answers.count("processed") == 1
    assert len(records(django_db)) == 1
    assert orders() == [(REF, "paid", PAYMENT)]


def post_with(client: httpx.Client, site: str, delivery: Delivery) -> httpx.Response:
    return client.post(site + delivery.path, content=delivery.body, headers=delivery.headers)


def test_payment_captured_and_order_paid_are_two_deliveries_and_one_paid_order(
    site, checkout, django_db
):
    captured, paid = post(site, razorpay()), post(site, razorpay("order.paid"))
    assert [captured.json()["order_id"], paid.json()["order_id"]] == [REF, REF]
    assert [outcome for *_, outcome in records(django_db)] == ["processed", "processed"]
    assert orders() == [(REF, "paid", PAYMENT)]


def test_a_handler_failure_is_answered_5xx_leaves_nothing_and_the_retry_is_applied(
    site, checkout, django_db
):
    """The order row is held by another transaction (staff editing it): the handler cannot
    lock it in time, the delivery is answered 503, and the gateway's retry applies it."""
    delivery = razorpay()
    with psycopg.connect(django_db) as staff:
        staff.execute("SELECT 1 FROM orders_order WHERE reference = %s FOR UPDATE", (REF,))
        with override_settings(PAYHOOKS={**PAYHOOKS, "LOCK_TIMEOUT_MS": 50}):
            refused = post(site, delivery)
        assert refused.status_code == 503
        assert records(django_db) == [] and orders() == [(REF, "pending", "")]
    assert post(site, delivery).json()["status"] == "processed"
    assert orders() == [(REF, "paid", PAYMENT)]


def test_payus_browser_post_to_the_return_page_pays_the_order_once_under_atomic_requests(
    site, checkout, django_db
):
    """docs/django.md, "PayU's return page": the browser's post and PayU's server post of one
    payment, through the shop's page and the webhook, with ``ATOMIC_REQUESTS`` on."""
    delivery = GATEWAY.payu(txnid=REF, mihpayid="403993715500000009", amount="1299.00")
    page = loopback.post(site + "/payu/return", content=delivery.body, headers=delivery.headers,
                         timeout=30)  # fmt: skip
    assert page.status_code == 200, page.text
    assert page.text == f"Thank you: your payment for order {REF} is received."
    assert post(site, delivery).json()["status"] == "duplicate"  # PayU's server post
    assert [(ref, status) for ref, status, _ in orders()] == [(REF, "paid")]


def test_payus_return_page_says_a_failed_a_pending_and_an_authorised_payment_apart(
    site, checkout, django_db
):
    """docs/django.md, "PayU's return page": it thanked the customer for anything PayU posted
    (a failure on furl included: "your payment is received (order pending)")."""
    failed = GATEWAY.payu(txnid="order_ret_1", mihpayid="403993715500000011", amount="1299.00",
                          status="failure")  # fmt: skip
    pending = GATEWAY.payu(txnid="order_ret_2", mihpayid="403993715500000012", amount="1299.00",
                           status="pending")  # fmt: skip
    authorised = payu_authorised_post("order_ret_3", "403993715500000013", "1299.00")
    unknown = GATEWAY.payu(txnid="order_ret_4", mihpayid="403993715500000014", amount="1299.00")
    pages = [
        loopback.post(site + "/payu/return", content=post.body, headers=post.headers, timeout=30)
        for post in (failed, pending, authorised, unknown)
    ]
    assert [(page.status_code, page.text) for page in pages] == [
        (200, "Your payment for order order_ret_1 did not go through."),
        (200, "Your payment for order order_ret_2 is being completed: we will write to you."),
        (200, "Your payment for order order_ret_3 is being completed: we will write to you."),
        (
            200,
            "We have your payment for order order_ret_4 and are checking it: we will write to you.",
        ),
    ]


def test_a_second_payment_of_a_paid_order_is_ignored_and_logged(site, checkout, django_db):
    """A second payment of a paid order (a second tab) is answered ``ignored`` and logged
    (``order_paid_twice``) for a person to refund, and the order keeps its first payment, as
    docs/django.md shows."""
    post(site, razorpay())
    twice = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_shop00000002", order_id=REF, amount_paise=129_900
    )
    answer = post(site, twice).json()
    assert (answer["status"], answer["order_id"]) == ("ignored", REF)
    assert orders() == [(REF, "paid", PAYMENT)]


def test_an_underpaid_capture_does_not_pay_the_order(site, checkout, django_db):
    underpaid = GATEWAY.razorpay(
        "payment.captured", payment_id=PAYMENT, order_id=REF, amount_paise=100
    )
    answer = post(site, underpaid).json()
    assert (answer["status"], answer["order_id"]) == ("ignored", REF)
    assert orders() == [(REF, "pending", "")]


def test_a_forged_delivery_is_answered_401_and_changes_nothing(site, checkout, django_db):
    forged = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_forged", order_id=REF, amount_paise=1
    )
    response = post(site, forged, **{"x-razorpay-signature": "f" * 64})
    assert response.status_code == 401
    assert records(django_db) == [] and orders() == [(REF, "pending", "")]


# --- the same project under ASGI -----------------------------------------------------------


@contextmanager
def asgi_served() -> Iterator[str]:
    from django.core.handlers.asgi import ASGIHandler

    port = free_port()
    config = uvicorn.Config(
        ASGIHandler(), host="127.0.0.1", port=port, lifespan="off", log_level="error"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_under_asgi_a_capture_pays_the_order(checkout):
    with asgi_served() as site:
        assert post(site, razorpay()).json()["status"] == "processed"
    assert orders() == [(REF, "paid", PAYMENT)]


def test_under_asgi_a_signature_sent_twice_with_different_values_is_refused(checkout, django_db):
    delivery = razorpay()
    headers = [*delivery.headers.items(), ("x-razorpay-signature", "0" * 64)]
    with asgi_served() as site:
        response = loopback.post(site + delivery.path, content=delivery.body, headers=headers)
    assert response.status_code == 401 and records(django_db) == []


def test_under_asgi_a_chunked_capture_pays_the_order(checkout, django_db):
    delivery = razorpay()
    with asgi_served() as site:
        response = loopback.post(
            site + delivery.path, content=chunked(delivery.body), headers=delivery.headers
        )
    assert response.status_code == 200 and response.json()["status"] == "processed"
    assert orders() == [(REF, "paid", PAYMENT)]


def test_under_asgi_a_chunked_body_over_the_bound_is_413_past_djangos_own_limit(
    checkout, django_db
):
    delivery = razorpay()
    padding = b" " * (4 * 1024 * 1024)  # past the bound and DATA_UPLOAD_MAX_MEMORY_SIZE
    with asgi_served() as site:
        response = loopback.post(
            site + delivery.path,
            content=chunked(delivery.body + padding, 64 * 1024),
            headers=delivery.headers,
        )
    assert response.status_code == 413 and response.json()["error"] == "payload_too_large"
    assert records(django_db) == [] and orders() == [(REF, "pending", "")]


# --- the same project under gunicorn ---------------------------------------------------------


@contextmanager
def gunicorn_served(url: str) -> Iterator[str]:
    env = {**os.environ, **KEYS.env(), "DATABASE_URL": url}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    with gunicorn_serving("django_shop.wsgi:application", cwd=EXAMPLE, env=env) as site:
        yield site


def chunked(body: bytes, size: int = 100) -> Iterator[bytes]:
    """The body in pieces: httpx sends it ``Transfer-Encoding: chunked``, no Content-Length."""
    return (body[at : at + size] for at in range(0, len(body), size))


def test_under_gunicorn_a_chunked_capture_pays_the_order(checkout, django_db):
    delivery = razorpay()
    with gunicorn_served(django_db) as site:
        response = loopback.post(
            site + delivery.path, content=chunked(delivery.body), headers=delivery.headers
        )
    assert response.status_code == 200 and response.json()["status"] == "processed"
    assert orders() == [(REF, "paid", PAYMENT)]


def test_under_gunicorn_a_chunked_body_over_the_bound_is_413(checkout, django_db):
    delivery = razorpay()
    padding = b" " * MAX_JSON_BODY_BYTES  # JSON allows trailing blanks: the bound, not the JSON
    with gunicorn_served(django_db) as site:
        response = loopback.post(
            site + delivery.path,
            content=chunked(delivery.body + padding, 64 * 1024),
            headers=delivery.headers,
        )
    assert response.status_code == 413 and response.json()["error"] == "payload_too_large"
    assert records(django_db) == [] and orders() == [(REF, "pending", "")]


# --- its own manage.py ----------------------------------------------------------------------


def manage(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **KEYS.env(), "DATABASE_URL": url}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_shop_passes_djangos_checks_from_its_own_settings(django_db):
    done = manage(django_db, "check")
    assert done.returncode == 0, done.stderr


def test_the_shops_manage_py_lists_parked_deliveries(site, django_db):
    post(site, razorpay())  # no checkout: parked
    done = manage(django_db, "payhooks_parked")
    assert done.returncode == 0 and REF in done.stdout and "1 parked" in done.stdout


# --- operating it: expect, reconciliation --------------------------------------------------


def test_an_underpaid_capture_never_reaches_the_shops_handler(site, django_db):
    from orders.checkout import create_order

    create_order("razorpay", REF, 129_900)
    short = GATEWAY.razorpay("payment.captured", payment_id=PAYMENT, order_id=REF, amount_paise=100)
    assert post(site, short).json()["status"] == "parked"
    assert orders() == [(REF, "pending", "")]
    with psycopg.connect(django_db) as conn:
        held = conn.execute(
            "SELECT expected_paise, paid_paise FROM payhooks_amount_mismatches"
        ).fetchall()
    assert held == [(129_900, 100)]


def test_reconciliation_pays_an_order_whose_webhook_never_came_once(site, django_db):
    from django.core.management import call_command
    from orders.checkout import create_order

    from payhooks.events import Provider
    from payhooks.sim.gateway import Purchase
    from payhooks.sim.gateway_api import GatewayApi, serving
    from tests.reconcile.conftest import API_KEYS

    create_order("razorpay", REF, 129_900)
    api = GatewayApi(API_KEYS)
    api.pay(Purchase(provider=Provider.RAZORPAY, cart_id=REF, reference=REF,
                     amount_paise=129_900, items={"TEA": 1}), PAYMENT)  # fmt: skip
    with serving(api) as url:
        keys = {k.removeprefix("PAYHOOKS_"): v for k, v in API_KEYS.env(url).items()}
        with override_settings(PAYHOOKS={**PAYHOOKS, **keys, "RECONCILE_AFTER_S": 0}):
            out = io.StringIO()
            call_command("payhooks_reconcile", stdout=out)
    assert "recovered 1 payment(s) no webhook brought" in out.getvalue()
    assert orders() == [(REF, "paid", PAYMENT)]
    # The gateway's webhook, late: answered, and nothing happens twice.
    assert post(site, razorpay()).json()["status"] == "duplicate"
    assert orders() == [(REF, "paid", PAYMENT)]


def test_the_shops_metrics_count_what_waits_for_a_person(site, django_db):
    from orders.checkout import create_order

    create_order("razorpay", REF, 129_900)
    short = GATEWAY.razorpay("payment.captured", payment_id=PAYMENT, order_id=REF, amount_paise=100)
    post(site, short)
    text = loopback.get(f"{site}/metrics", timeout=10).text
    assert "payhooks_amount_mismatches 1.0" in text
    assert "payhooks_parked_deliveries 1.0" in text


def test_a_mismatch_is_resolved_from_manage_py(site, django_db):
    from django.core.management import CommandError, call_command
    from orders.checkout import create_order

    create_order("razorpay", REF, 129_900)
    short = GATEWAY.razorpay("payment.captured", payment_id=PAYMENT, order_id=REF, amount_paise=100)
    key = post(site, short).json()["event_id"]
    out = io.StringIO()
    call_command("payhooks_resolve", key, provider="razorpay", note="refunded", stdout=out)
    assert "resolved razorpay" in out.getvalue()
    assert ("razorpay", key, "ignored") in records(django_db)
    with pytest.raises(CommandError, match="is not parked"):
        call_command("payhooks_resolve", key, provider="razorpay", note="again")
