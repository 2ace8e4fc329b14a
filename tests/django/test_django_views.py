"""The webhook view over real HTTP, with and without ATOMIC_REQUESTS: answered from the core's
one table, and only after the claim's transaction has committed."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.test import override_settings
from orders.models import Order

from payhooks.gateways import razorpay
from payhooks.intake.endpoint import MAX_GATEWAY_CHARS
from payhooks.sim.gateway import Delivery
from tests import loopback
from tests.django.conftest import PAYHOOKS, post, records
from tests.django.handlers import notified
from tests.factories import GATEWAY, KEYS

KEY = "evt_dj0000000001"
SIGNATURE = "x-razorpay-signature"
CLIPPED = "a" * (MAX_GATEWAY_CHARS - 1) + "\u2026"  # an unknown gateway's name, quoted


def capture(ref: str = "order_dj1", event_id: str = KEY) -> Delivery:
    return GATEWAY.razorpay(
        "payment.captured",
        payment_id="pay_dj000000001",
        order_id=ref,
        amount_paise=49_900,
        event_id=event_id,
    )


def payhooks_with(**changes: object):
    return override_settings(PAYHOOKS={**PAYHOOKS, **changes})


def handled_by(name: str):
    return payhooks_with(HANDLER=f"tests.django.handlers.{name}")


def signed(body: bytes) -> dict[str, str]:
    return {"content-type": "application/json", SIGNATURE: razorpay.sign(body, KEYS.razorpay)}


def orders() -> list[tuple[str, str]]:
    return list(Order.objects.order_by("reference").values_list("reference", "status"))


@pytest.fixture(autouse=True)
def nothing_notified() -> None:
    notified.clear()


@pytest.fixture
def order(django_db):
    return Order.objects.create(reference="order_dj1", amount_paise=49_900)


# --- outcomes ---------------------------------------------------------------------------------


def test_a_signed_capture_is_processed_and_its_order_paid(atomic_requests, site, order, django_db):
    response = post(site, capture())
    assert (response.status_code, response.json()) == (
        200,
        {"status": "processed", "event_id": KEY, "order_id": "order_dj1"},
    )
    assert orders() == [("order_dj1", "paid")]
    assert records(django_db) == [("razorpay", KEY, "processed")]


def test_a_copy_of_a_delivery_is_answered_duplicate(atomic_requests, site, order, django_db):
    first, again = post(site, capture()), post(site, capture())
    assert [first.json()["status"], again.json()["status"]] == ["processed", "duplicate"]
    assert again.status_code == 200 and len(records(django_db)) == 1


def test_a_capture_matching_no_order_is_parked(site, django_db):
    response = post(site, capture(ref="order_unknown"))
    assert (response.status_code, response.json()["status"]) == (200, "parked")
    assert records(django_db) == [("razorpay", KEY, "parked")]


def test_an_event_no_handler_is_registered_for_is_ignored_and_recorded(site, django_db):
    failed = GATEWAY.razorpay(
        "payment.failed", payment_id="pay_dj2", order_id="order_dj1", amount_paise=100
    )
    assert post(site, failed).json()["status"] == "ignored"
    assert [outcome for *_, outcome in records(django_db)] == ["ignored"]


# --- refusals ---------------------------------------------------------------------------------


def test_a_forged_signature_is_answered_401_and_nothing_recorded(site, order, django_db):
    response = post(site, capture(), **{SIGNATURE: "0" * 64})
    assert (response.status_code, response.json()["error"]) == (401, "signature_mismatch")
    assert records(django_db) == [] and orders() == [("order_dj1", "pending")]


def test_a_signature_header_sent_twice_with_different_values_is_refused(site, order, django_db):
    delivery = capture()
    headers = [*delivery.headers.items(), (SIGNATURE, "0" * 64)]
    response = loopback.post(site + delivery.path, content=delivery.body, headers=headers)
    assert (response.status_code, response.json()["error"]) == (401, "signature_mismatch")
    assert records(django_db) == []


def test_identical_copies_of_the_signature_header_are_one_signature(site, order):
    delivery = capture()
    headers = [*delivery.headers.items(), (SIGNATURE, delivery.headers[SIGNATURE])]
    response = loopback.post(site + delivery.path, content=delivery.body, headers=headers)
    assert response.json()["status"] == "processed"


def test_an_authentic_body_that_is_no_event_is_answered_400(site, django_db):
    body = b'{"event": 7}'
    response = loopback.post(f"{site}/webhooks/razorpay", content=body, headers=signed(body))
    assert (response.status_code, response.json()["error"]) == (400, "malformed_payload")
    assert records(django_db) == []


def test_a_body_declared_over_the_gateways_bound_is_answered_413(site):
    body = json.dumps({"event": "x" * razorpay.MAX_JSON_BODY_BYTES}).encode()
    response = loopback.post(f"{site}/webhooks/razorpay", content=body, headers=signed(body))
    assert (response.status_code, response.json()["error"]) == (413, "payload_too_large")


def test_a_chunked_body_is_read_whole_where_the_server_ends_the_input(site, order, django_db):
    """Werkzeug's server, like gunicorn, sets ``wsgi.input_terminated`` for a chunked body."""
    delivery = capture()
    pieces = (delivery.body[at : at + 50] for at in range(0, len(delivery.body), 50))
    response = loopback.post(site + delivery.path, content=pieces, headers=delivery.headers)
    assert (response.status_code, response.json()["status"]) == (200, "processed")
    assert orders() == [("order_dj1", "paid")]


@contextmanager
def runserver() -> Iterator[str]:
    """Django's own development server (``manage.py runserver``): a WSGI server that does not
    end chunked input."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer

    server = WSGIServer(("127.0.0.1", 0), WSGIRequestHandler)
    server.set_app(WSGIHandler())
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_chunked_body_the_server_cannot_end_is_411_not_a_signature_mismatch(order, django_db):
    delivery = capture()
    with runserver() as site:
        response = loopback.post(
            site + delivery.path,
            content=iter([delivery.body]),
            headers={**delivery.headers, "connection": "close"},
        )
    assert (response.status_code, response.json()["error"]) == (411, "length_required")
    assert "wsgi.input_terminated" in response.json()["detail"]
    assert records(django_db) == [] and orders() == [("order_dj1", "pending")]


def test_a_gateway_with_no_secret_configured_is_answered_404(site):
    delivery = GATEWAY.payu(txnid="order_dj1", mihpayid="403993715500000001", amount="499.00")
    with payhooks_with(PAYU_MERCHANT_KEY="", PAYU_SALTS=[]):
        response = post(site, delivery)
    assert (response.status_code, response.json()["error"]) == (404, "provider_not_configured")


@pytest.mark.parametrize(
    "changes", [{"PHONEPE_WEBHOOK_CREDENTIALS": ["nocolon"]}, {"LOCK_TIMEOUT_MS": "2000"}]
)
def test_a_setting_refused_as_a_delivery_reads_it_is_answered_503_naming_it_in_the_log(
    site, order, django_db, caplog, changes
):
    """Under a server that runs no ``manage.py check`` (gunicorn): every gateway is answered
    503, which it retries, with no traceback; the log names the setting, the answer does not."""
    caplog.set_level(logging.WARNING, logger="payhooks.django")
    with payhooks_with(**changes):
        response = post(site, capture())
    assert (response.status_code, response.json()["error"]) == (503, "settings_refused")
    (key,) = changes
    logged = [r for r in caplog.records if r.name == "payhooks.django"]
    assert [(r.getMessage(), r.reason, r.exc_info) for r in logged] == [
        ("webhook_unavailable", "settings_refused", None)
    ]
    assert f'PAYHOOKS["{key}"]' in logged[0].detail and key not in response.text
    assert records(django_db) == [] and orders() == [("order_dj1", "pending")]


def test_an_unknown_gateways_name_is_quoted_to_the_shared_limit(site):
    response = loopback.post(f"{site}/webhooks/" + "a" * 100, content=b"{}")
    assert response.json()["detail"] == f"provider {CLIPPED!r} is not configured"


def test_an_unknown_gateway_is_answered_404(site):
    response = loopback.post(f"{site}/webhooks/stripe", content=b"{}")
    assert response.status_code == 404


def test_only_post_is_served(site):
    assert loopback.get(f"{site}/webhooks/razorpay").status_code == 405


# --- the transaction --------------------------------------------------------------------------


def test_orm_writes_in_a_handler_commit_with_the_claim(atomic_requests, site, django_db):
    with handled_by("creating"):
        response = post(site, capture(ref="order_new"))
    assert response.json()["status"] == "processed"
    assert orders() == [("order_new", "paid")] and len(records(django_db)) == 1


def test_a_handler_that_raises_after_an_orm_write_leaves_nothing(atomic_requests, site, django_db):
    with handled_by("failing"):
        response = post(site, capture(ref="order_new"))
    assert response.status_code == 500
    assert orders() == [] and records(django_db) == []


@pytest.mark.parametrize(
    "handler",
    [
        "committing",
        "committing_on_the_connection",
        "committing_caught",
        "committing_on_the_connection_caught",
        "rolling_back_the_connection_caught",
    ],
)
def test_a_handler_that_commits_is_refused_500_naming_the_cause_and_leaves_nothing(
    atomic_requests, site, django_db, handler
):
    """Refused even when the handler catches the error and carries on (docs/django.md)."""
    with handled_by(handler):
        response = post(site, capture())
    assert (response.status_code, response.json()["error"]) == (500, "handler_committed")
    assert "commit()" in response.json()["detail"] or "rollback()" in response.json()["detail"]
    assert orders() == [] and records(django_db) == []


@pytest.mark.parametrize("handler", ["committing_as_sql", "committing_as_sql_then_writing"])
def test_a_handler_that_commits_as_sql_is_refused_500_and_the_retry_is_applied(
    site, order, django_db, handler
):
    with handled_by(handler):
        response = post(site, capture())
    assert (response.status_code, response.json()["error"]) == (500, "handler_committed")
    assert records(django_db) == []  # the claim it committed is undone: not final
    retry = post(site, capture())
    assert (retry.status_code, retry.json()["status"]) == (200, "processed")
    assert orders() == [("order_dj1", "paid")] and len(records(django_db)) == 1


def test_the_retry_after_a_handler_failed_is_applied(site, order, django_db):
    with handled_by("failing"):
        assert post(site, capture()).status_code == 500
    response = post(site, capture())
    assert response.json()["status"] == "processed" and orders() == [("order_dj1", "paid")]


def test_work_a_handler_leaves_to_on_commit_runs_once_the_claim_commits(site, django_db):
    with handled_by("notifying"):
        post(site, capture())
        post(site, capture())
    assert notified == [KEY]


def test_work_a_failed_handler_left_to_on_commit_never_runs(site, django_db):
    with handled_by("notifying_then_failing"):
        assert post(site, capture()).status_code == 500
    assert notified == []


def test_a_twin_held_past_the_lock_timeout_is_answered_503(site, order, django_db):
    """A copy still in flight on another connection holds the key: the next copy waits
    ``LOCK_TIMEOUT_MS``, then is answered 503 so the gateway retries it later."""
    delivery = capture()
    with psycopg.connect(django_db) as twin:
        twin.execute(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome,"
            " payload_sha256, body) VALUES ('razorpay', %s, 'payment.captured', 'processed',"
            " 'in-flight', '')",
            (KEY,),
        )
        with payhooks_with(LOCK_TIMEOUT_MS=50):
            response = post(site, delivery)
        assert (response.status_code, response.json()["error"]) == (503, "database_unavailable")
        twin.rollback()
    assert post(site, delivery).json()["status"] == "processed"


def test_inside_an_atomic_block_of_the_merchants_the_view_refuses_and_claims_nothing(
    site, order, django_db
):
    """Wrapped in a transaction of the merchant's own, the claim could only be answered after
    the view returned: every delivery and retry would get 503. The view refuses to claim at
    all (5xx, so the gateway retries) and says why in the log; nothing is recorded."""
    delivery = capture()
    with override_settings(ROOT_URLCONF="tests.django.urls"):
        response = loopback.post(
            f"{site}/inside-atomic/razorpay", content=delivery.body, headers=delivery.headers
        )
    assert response.status_code == 500
    assert post(site, delivery).json()["status"] == "processed"  # nothing was claimed before
