"""The HTTP contract over a real socket: outcome and error statuses, body limit, API, probes."""

from __future__ import annotations

import logging
import threading
import time

import psycopg
import pytest

from payhooks.events import Provider, Received
from payhooks.gateways import razorpay
from payhooks.service.config import Settings
from payhooks.service.web import create_app
from tests import loopback
from tests.conftest import serving
from tests.factories import GATEWAY, KEYS, SETTINGS, purchase


def stored(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0]


def post(service, delivery, **overrides):
    headers = {**delivery.headers, **overrides.pop("headers", {})}
    with service.client() as client:
        return client.post(
            delivery.path, content=overrides.pop("body", delivery.body), headers=headers
        )


def signed(body: bytes) -> dict[str, str]:
    return {"x-razorpay-signature": razorpay.sign(body, KEYS.razorpay)}


def test_processed_answer_carries_status_event_id_and_order_id(service, conn):
    buy = purchase(conn)
    response = post(service, buy.captured())
    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "processed" and body["order_id"]
    assert body["event_id"].startswith("evt_")


def test_duplicate_answers_200_duplicate(service, conn):
    delivery = purchase(conn).captured()
    post(service, delivery)
    response = post(service, delivery)
    assert (response.status_code, response.json()["status"]) == (200, "duplicate")


def test_bad_signature_is_401_and_stores_nothing(service, conn):
    response = post(service, purchase(conn).captured(), headers={"x-razorpay-signature": "0" * 64})
    assert response.status_code == 401
    assert response.json()["error"] == "signature_mismatch"
    assert stored(service.database_url) == 0


def test_missing_signature_is_401(service, conn):
    delivery = purchase(conn).captured()
    headers = {k: v for k, v in delivery.headers.items() if k != "x-razorpay-signature"}
    with service.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=headers)
    assert response.status_code == 401


def test_non_ascii_signature_header_is_401(service, conn):
    delivery = purchase(conn).captured()
    response = post(service, delivery, headers={"x-razorpay-signature": "é".encode()})
    assert response.status_code == 401
    assert stored(service.database_url) == 0


def test_authentic_but_malformed_body_is_400_and_stores_nothing(service):
    body = b'{"event": "payment.captured", "payload": {}}'
    with service.client() as client:
        response = client.post("/webhooks/razorpay", content=body, headers=signed(body))
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_payload"
    assert stored(service.database_url) == 0


def test_body_over_one_mebibyte_is_413_and_stores_nothing(service):
    body = b"{" + b" " * (1024 * 1024) + b"}"
    with service.client() as client:
        response = client.post("/webhooks/razorpay", content=body, headers=signed(body))
    assert response.status_code == 413
    assert stored(service.database_url) == 0


def test_chunked_body_over_the_limit_is_413(service):
    chunks = (b"x" * 65536 for _ in range(17))
    with service.client() as client:
        response = client.post("/webhooks/razorpay", content=chunks)
    assert response.status_code == 413


def test_unknown_event_type_answers_ignored(service):
    delivery = GATEWAY.razorpay(
        "payment.downtime.started",
        payment_id="pay_s00000000001",
        order_id="order_s",
        amount_paise=1,
    )
    assert post(service, delivery).json()["status"] == "ignored"


def test_unmatched_event_answers_parked(service):
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_p00000000001", order_id="order_unknown", amount_paise=1
    )
    assert post(service, delivery).json()["status"] == "parked"


def test_provider_without_secret_is_not_served(database_url):
    only_razorpay = Settings(
        webhook_secrets={"PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": (KEYS.razorpay,)}
    )
    delivery = GATEWAY.payu(txnid="t1", mihpayid="1", amount="1.00")
    with serving(only_razorpay, database_url) as service:
        response = post(service, delivery)
    assert response.status_code == 404
    assert response.json()["error"] == "provider_not_configured"


def test_unknown_provider_is_404(service):
    with service.client() as client:
        assert client.post("/webhooks/stripe", content=b"{}").status_code == 404


def test_database_unavailable_answers_503_and_readyz_says_so():
    dead = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_d00000000001", order_id="order_d", amount_paise=1
    )
    with serving(SETTINGS, dead) as service:
        response = post(service, delivery)
        with service.client() as client:
            ready = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["error"] == "database_unavailable"
    assert ready.status_code == 503


def test_bug_in_apply_answers_500_and_leaves_nothing_behind(service, conn):
    buy = purchase(conn)
    conn.execute("ALTER TABLE orders RENAME TO orders_gone")
    response = post(service, buy.captured())
    assert response.status_code == 500
    assert "Traceback" not in response.text
    # JSON, as every error of the HTTP interface (docs/api.md): it was the server's plain text
    assert response.json() == {
        "error": "internal_error",
        "detail": "the delivery failed; logged as webhook_failed, with its traceback",
    }
    assert response.headers["connection"] == "close"
    assert stored(service.database_url) == 0
    assert conn.execute("SELECT status FROM carts").fetchone()[0] == "open"


def test_a_bug_in_reading_a_delivery_is_answered_500_and_logged_noted_and_counted(
    service, conn, caplog, monkeypatch
):
    """A bug before the claim (the adapter's parse) was answered the server's plain 500 and
    shown only by uvicorn's own log; it is the step's ``webhook_failed`` now, as a handler's
    bug is: its traceback logged, the request in the delivery log and the metrics."""
    from payhooks.gateways.razorpay.adapter import Razorpay

    def broken(self, body, headers):  # type: ignore[no-untyped-def]
        raise KeyError("a bug in the adapter")

    caplog.set_level(logging.INFO, logger="payhooks")
    monkeypatch.setattr(Razorpay, "parse", broken)
    response = post(service, purchase(conn).captured())
    assert (response.status_code, response.json()["error"]) == (500, "internal_error")
    [failed] = [r for r in caplog.records if r.getMessage() == "webhook_failed"]
    assert failed.exc_info and failed.provider == "razorpay" and "KeyError" in failed.error
    with service.client() as client:
        metrics = client.get("/metrics").text
    assert 'outcome="internal_error",provider="razorpay"' in metrics.replace(" ", "")


def test_metrics_count_deliveries_by_provider_and_outcome(service, conn):
    delivery = purchase(conn).captured()
    post(service, delivery)
    post(service, delivery)
    with service.client() as client:
        text = client.get("/metrics").text
    assert 'payhooks_deliveries_total{outcome="processed",provider="razorpay"} 1.0' in text
    assert 'payhooks_deliveries_total{outcome="duplicate",provider="razorpay"} 1.0' in text


def test_health_and_readiness(service):
    with service.client() as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").status_code == 200


def test_api_without_a_bearer_token_is_401(service):
    with loopback.Client(base_url=service.base_url) as client:
        assert client.get("/api/products/x").status_code == 401


def test_an_empty_api_token_is_refused_at_startup():
    with pytest.raises(ValueError, match="must not be empty"):
        create_app(SETTINGS, api_token="")


def test_unconfigured_provider_is_counted_and_logged(database_url, caplog):
    only_razorpay = Settings(
        webhook_secrets={"PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": (KEYS.razorpay,)}
    )
    with serving(only_razorpay, database_url) as service, service.client() as client:
        client.post("/webhooks/payu", content=b"x=1")
        text = client.get("/metrics").text
    assert 'outcome="provider_not_configured",provider="payu"' in text
    assert any(r.getMessage() == "webhook_rejected" for r in caplog.records)


def test_api_requires_the_bearer_token(service):
    with service.client() as client:
        response = client.get("/api/products/x", headers={"authorization": "Bearer wrong"})
    assert response.status_code == 401


def test_shop_api_from_product_to_paid_order(service):
    with service.client() as client:
        assert (
            client.post(
                "/api/products",
                json={"sku": "TEA", "name": "Tea", "price_paise": 25000, "stock": 4},
            ).status_code
            == 201
        )
        cart = client.post(
            "/api/carts",
            json={"customer_email": "a@example.com", "items": [{"sku": "TEA", "quantity": 2}]},
        ).json()
        assert (cart["amount_paise"], cart["currency"], cart["status"]) == (50000, "INR", "open")
        checkout = client.post(
            f"/api/carts/{cart['cart_id']}/checkout", json={"provider": "razorpay"}
        )
        again = client.post(f"/api/carts/{cart['cart_id']}/checkout", json={"provider": "razorpay"})
        reference = checkout.json()["gateway_order_id"]
        assert checkout.status_code == 201 and again.json()["gateway_order_id"] == reference
        delivery = GATEWAY.razorpay(
            "payment.captured",
            payment_id="pay_api000000001",
            order_id=reference,
            amount_paise=50000,
        )
        event_id = client.post(
            delivery.path, content=delivery.body, headers=delivery.headers
        ).json()["event_id"]
        paid = client.get(f"/api/carts/{cart['cart_id']}").json()
        order = client.get(f"/api/orders/{paid['order_id']}").json()
        listed = client.get("/api/orders", params={"cart_id": cart["cart_id"]}).json()
        payment = client.get("/api/payments/razorpay/pay_api000000001").json()
        product = client.get("/api/products/TEA").json()
    assert paid["status"] == "paid"
    assert order["event_id"] == event_id and order["payment_id"] == "pay_api000000001"
    assert listed["orders"] == [order]
    assert payment["status"] == "captured" and payment["needs_refund"] is False
    assert product["stock"] == 2


def test_an_identifier_holding_a_slash_is_read_back_by_its_own_route(service):
    """A SKU holding a ``/`` was created (201) and never found again: ``/api/products/a%2Fb``
    reached no route (404 "Not Found"). So with a gateway's payment or dispute id."""
    with service.client() as client:
        made = client.post(
            "/api/products", json={"sku": "TEA/500G", "name": "Tea", "price_paise": 100, "stock": 1}
        )
        assert made.status_code == 201
        found = client.get("/api/products/TEA%2F500G")
        assert found.status_code == 200 and found.json()["sku"] == "TEA/500G"
        payment = client.get("/api/payments/razorpay/pay%2F1")
        dispute = client.get("/api/disputes/razorpay/disp%2F1")
    assert payment.status_code == 404 and "pay/1" in payment.text
    assert dispute.status_code == 404 and "disp/1" in dispute.text


@pytest.mark.parametrize(
    ("path", "payload", "status"),
    [
        (
            "/api/carts",
            {"customer_email": "a@example.com", "items": [{"sku": "NOPE", "quantity": 1}]},
            422,
        ),
        ("/api/carts", {"customer_email": "a@example.com", "items": []}, 422),
        ("/api/products", {"sku": "", "name": "x", "price_paise": 1, "stock": 1}, 422),
        ("/api/carts/cart_missing/checkout", {"provider": "razorpay"}, 404),
    ],
)
def test_bad_api_requests_get_clear_errors(service, path, payload, status):
    with service.client() as client:
        response = client.post(path, json=payload)
    assert response.status_code == status
    assert "detail" in response.json()


def test_registering_a_reference_owned_by_another_cart_is_409(service):
    with service.client() as client:
        client.post("/api/products", json={"sku": "A", "name": "A", "price_paise": 1, "stock": 1})
        carts = [
            client.post(
                "/api/carts",
                json={"customer_email": "a@example.com", "items": [{"sku": "A", "quantity": 1}]},
            ).json()
            for _ in range(2)
        ]
        body = {"provider": Provider.CASHFREE.value, "gateway_order_id": "shared-ref"}
        first = client.post(f"/api/carts/{carts[0]['cart_id']}/checkout", json=body)
        second = client.post(f"/api/carts/{carts[1]['cart_id']}/checkout", json=body)
    assert (first.status_code, second.status_code) == (201, 409)


def test_product_sku_taken_twice_is_409(service):
    with service.client() as client:
        item = {"sku": "B", "name": "B", "price_paise": 1, "stock": 1}
        assert client.post("/api/products", json=item).status_code == 201
        assert client.post("/api/products", json=item).status_code == 409


def test_json_error_bodies_never_carry_a_traceback(service):
    with service.client() as client:
        response = client.post(
            "/api/carts", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert response.status_code == 422
    assert "detail" in response.json()
    assert "Traceback" not in response.text and 'File "' not in response.text


def test_twin_behind_a_slow_first_attempt_answers_503_then_duplicate(database_url, conn):
    from dataclasses import replace

    from payhooks.intake import idempotency
    from tests.factories import ADAPTERS

    delivery = purchase(conn).captured()
    event = ADAPTERS[Provider.RAZORPAY].parse(delivery.body, delivery.headers)
    quick = replace(SETTINGS, lock_timeout_ms=300)
    with serving(quick, database_url) as service:
        with psycopg.connect(database_url, autocommit=True) as slow, slow.transaction():
            idempotency.claim(slow, Received(event=event, body=delivery.body))
            stuck = post(service, delivery)
        retried = post(service, delivery)
    assert stuck.status_code == 503
    assert retried.json()["status"] == "duplicate"


def test_whole_transaction_over_its_deadline_answers_503_and_leaves_nothing(database_url, conn):
    from dataclasses import replace

    buy = purchase(conn)
    tight = replace(SETTINGS, lock_timeout_ms=5000, transaction_timeout_ms=400)
    locked = threading.Event()

    def hold_stock_row() -> None:
        with psycopg.connect(database_url, autocommit=True) as other, other.transaction():
            other.execute("SELECT 1 FROM product_stock WHERE sku = %s FOR UPDATE", (buy.sku,))
            locked.set()
            time.sleep(0.8)

    with serving(tight, database_url) as service:
        holder = threading.Thread(target=hold_stock_row)
        holder.start()
        locked.wait(5)
        answer = post(service, buy.captured())
        holder.join()
        after = post(service, buy.captured())
    # PostgreSQL 17+ bounds the whole transaction; on every server the client does too.
    assert answer.status_code == 503
    assert after.status_code == 200
