"""What the route refuses, and how, before any hook runs: over a real socket, on the merchant's
app. Each test checks sizes, answers, rows or which thread ran; never how long anything took."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit

import pytest
from psycopg_pool import ConnectionPool
from starlette.applications import Starlette

from payhooks import Provider
from payhooks.fastapi import router
from payhooks.gateways import payu, razorpay
from payhooks.intake.endpoint import MAX_GATEWAY_CHARS
from tests.factories import ADAPTERS, KEYS
from tests.fastapi.conftest import served
from tests.fastapi.merchant import KINDS, REF, Merchant, capture, prepare, sync_hooks
from tests.watched import Watched

PAYU_LIMIT = payu.MAX_BODY_BYTES
CLIPPED = "a" * (MAX_GATEWAY_CHARS - 1) + "\u2026"  # an unknown gateway's name, quoted


@pytest.fixture
def app(conn, database_url):
    prepare(conn, REF)
    with served(Merchant(database_url, "sync").app) as running:
        yield running


def claimed(conn) -> int:
    return conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0]


def repeated(headers: Mapping[str, str], name: str, *values: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items() if k != name] + [(name, v) for v in values]


def test_an_unknown_provider_is_404(app):
    with app.client() as client:
        response = client.post("/webhooks/stripe", content=b"{}")
    assert response.status_code == 404
    assert response.json()["error"] == "provider_not_configured"


def test_a_gateway_without_an_adapter_is_404(conn, database_url):
    merchant = Merchant(database_url, "sync", adapters=[ADAPTERS[Provider.RAZORPAY]])
    with served(merchant.app) as running, running.client() as client:
        response = client.post("/webhooks/payu", content=b"a=1")
    assert response.status_code == 404


def test_an_unknown_gateways_name_is_quoted_to_the_shared_limit(app):
    with app.client() as client:
        response = client.post("/webhooks/" + "a" * 100, content=b"{}")
    assert response.json()["detail"] == f"provider {CLIPPED!r} is not configured"


def test_a_huge_unknown_provider_is_not_echoed_in_full(app):
    with app.client() as client:
        response = client.post("/webhooks/" + "a" * 50_000, content=b"{}")
    assert response.status_code == 404 and len(response.content) < 500


def test_a_forged_signature_is_401_and_nothing_is_recorded(app, conn):
    delivery = capture()
    forged = {**delivery.headers, "x-razorpay-signature": "0" * 64}
    with app.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=forged)
    assert response.status_code == 401 and claimed(conn) == 0


def test_two_different_signatures_on_one_request_are_401(app, conn):
    delivery = capture()
    good = delivery.headers["x-razorpay-signature"]
    headers = repeated(delivery.headers, "x-razorpay-signature", "0" * 64, good)
    with app.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=headers)
    assert response.status_code == 401
    assert "x-razorpay-signature" in response.json()["detail"] and claimed(conn) == 0


def test_two_different_event_ids_on_one_request_are_401(app, conn):
    delivery = capture()
    headers = repeated(delivery.headers, "x-razorpay-event-id", "evt_one", "evt_two")
    with app.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=headers)
    assert response.status_code == 401 and claimed(conn) == 0


def test_a_signature_repeated_identically_is_accepted(app):
    delivery = capture()
    good = delivery.headers["x-razorpay-signature"]
    headers = repeated(delivery.headers, "x-razorpay-signature", good, good)
    with app.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=headers)
    assert response.json()["status"] == "processed"


def test_an_authentic_body_that_is_not_an_event_is_400(app, conn):
    body = b'{"event": "payment.captured", "payload": {}}'
    signed = {"x-razorpay-signature": razorpay.sign(body, KEYS.razorpay)}
    with app.client() as client:
        response = client.post("/webhooks/razorpay", content=body, headers=signed)
    assert response.status_code == 400 and claimed(conn) == 0
    assert response.json()["error"] == "malformed_payload"


def test_a_body_over_the_gateways_bound_is_413_and_closes_the_connection(app):
    with app.client() as client:
        response = client.post("/webhooks/payu", content=b"a=" + b"x" * PAYU_LIMIT)
    assert response.status_code == 413
    assert response.headers["connection"] == "close"
    assert str(PAYU_LIMIT) in response.json()["detail"]


def test_the_bound_is_the_gateways_own(app):
    body = b"{" + b" " * PAYU_LIMIT + b"}"  # over PayU's bound, under Razorpay's
    signed = {"x-razorpay-signature": razorpay.sign(body, KEYS.razorpay)}
    with app.client() as client:
        response = client.post("/webhooks/razorpay", content=body, headers=signed)
    assert response.status_code == 400  # read in full, authentic, then found malformed


def test_a_declared_length_over_the_bound_is_refused_before_the_body_is_sent(app):
    head = (
        "POST /webhooks/payu HTTP/1.1\r\nhost: x\r\n"
        f"content-type: application/x-www-form-urlencoded\r\ncontent-length: {PAYU_LIMIT + 1}"
        "\r\n\r\n"
    )
    address = urlsplit(app.base_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(head.encode())
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413 ")


def test_a_streamed_body_over_the_bound_is_413_unverified(conn, database_url):
    watched = Watched(inner=ADAPTERS[Provider.PAYU])
    chunks = (b"x" * 4096 for _ in range(PAYU_LIMIT // 4096 + 1))
    merchant = Merchant(database_url, "sync", adapters=[watched])
    with served(merchant.app) as running, running.client() as client:
        response = client.post("/webhooks/payu", content=chunks)
    assert response.status_code == 413 and watched.calls == []


def test_a_chunked_delivery_under_uvicorn_is_read_whole_and_processed(app):
    delivery = capture()
    pieces = (delivery.body[at : at + 50] for at in range(0, len(delivery.body), 50))
    with app.client() as client:
        response = client.post(delivery.path, content=pieces, headers=delivery.headers)
    assert (response.status_code, response.json()["status"]) == (200, "processed")


@pytest.mark.parametrize("kind", KINDS)
def test_verification_and_parsing_run_off_the_event_loop(conn, database_url, kind):
    prepare(conn, REF)
    watched = Watched(inner=ADAPTERS[Provider.RAZORPAY])
    delivery = capture()
    merchant = Merchant(database_url, kind, adapters=[watched])
    with served(merchant.app) as running, running.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    assert response.json()["status"] == "processed"
    assert watched.calls == [("verify", False), ("parse", False)]


def test_outcomes_are_logged_by_stable_names_without_the_body(app, caplog):
    caplog.set_level(logging.INFO, logger="payhooks.fastapi")
    delivery = capture(event_id="evt_fa_logged")
    with app.client() as client:
        client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        client.post("/webhooks/razorpay", content=b"{}", headers={"x-razorpay-signature": "0"})
    # Only the answers' lines: a delivery log left by an earlier test may warn meanwhile.
    answers = [r for r in caplog.records if r.getMessage().startswith("webhook_")]
    logged = [(r.getMessage(), getattr(r, "event_id", None)) for r in answers]
    assert logged == [("webhook_processed", "evt_fa_logged"), ("webhook_rejected", None)]
    assert not any(delivery.body.decode() in repr(vars(r)) for r in caplog.records)


def test_a_plain_starlette_app_serves_the_route(conn, database_url):
    prepare(conn, REF)
    pool = ConnectionPool(database_url, min_size=1, max_size=2, open=False)
    routes = router(adapters=ADAPTERS.values(), hooks=sync_hooks(), pool=pool).routes
    delivery = capture()
    pool.open(wait=True)
    try:
        with served(Starlette(routes=routes)) as running, running.client() as client:
            response = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    finally:
        pool.close()
    assert response.json()["status"] == "processed"
