"""What an unauthenticated client can make the service spend, over a real socket.

Each test measures something deterministic: sizes, line counts, connection-pool counters,
which thread ran, whether a call happened at all. Never how long anything took.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg_pool
import pytest
from fastapi import FastAPI

from payhooks.events import Provider
from payhooks.gateways import payu, razorpay
from payhooks.intake.endpoint import MAX_GATEWAY_CHARS
from payhooks.service import metrics as metrics_module
from payhooks.service.web import ON_LOOP_BYTES, create_app
from tests import loopback
from tests.conftest import serving_app
from tests.factories import ADAPTERS, GATEWAY, KEYS, SETTINGS, purchase
from tests.watched import Watched

TOKEN = "test-token"
PAYU_LIMIT = payu.MAX_BODY_BYTES
CLIPPED = "a" * (MAX_GATEWAY_CHARS - 1) + "\u2026"  # an unknown gateway's name, quoted


@dataclass(frozen=True)
class Running:
    app: FastAPI
    base_url: str

    def client(self, **headers: str) -> httpx.Client:
        return loopback.Client(base_url=self.base_url, timeout=30, headers=headers)

    def api(self) -> httpx.Client:
        return self.client(authorization=f"Bearer {TOKEN}")

    @property
    def pool(self) -> psycopg_pool.ConnectionPool:
        pool: psycopg_pool.ConnectionPool = self.app.state.pool
        return pool


@contextmanager
def running(app: FastAPI) -> Iterator[Running]:
    with serving_app(app) as base_url:
        yield Running(app=app, base_url=base_url)


@pytest.fixture
def service(database_url: str) -> Iterator[Running]:
    with running(create_app(SETTINGS, api_token=TOKEN, url=database_url)) as served:
        yield served


def watched_app(database_url: str, **kwargs: Any) -> tuple[FastAPI, dict[Provider, Watched]]:
    adapters = {provider: Watched(inner=adapter) for provider, adapter in ADAPTERS.items()}
    app = create_app(SETTINGS, api_token=TOKEN, url=database_url, adapters=adapters, **kwargs)
    return app, adapters


def requests_made(pool: psycopg_pool.ConnectionPool) -> int:
    return int(pool.get_stats().get("requests_num", 0))


@contextmanager
def every_connection_taken(pool: psycopg_pool.ConnectionPool) -> Iterator[None]:
    # Each waited for as long as opening it takes (the pool's own 1 s ran out on a loaded
    # machine while it opened the rest): the test is about them all taken, not how fast.
    taken = [pool.getconn(timeout=60) for _ in range(pool.max_size)]
    try:
        yield
    finally:
        for conn in taken:
            pool.putconn(conn)


def metric_lines(service: Running) -> list[str]:
    with service.client() as client:
        return client.get("/metrics").text.splitlines()


def raw_exchange(base_url: str, request: bytes) -> bytes:
    """Send bytes on a fresh socket and return the first answer (the timeout only guards
    against a server that never answers)."""
    address = urlsplit(base_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(request)
        return sock.recv(65536)


def signed(body: bytes) -> dict[str, str]:
    return {"x-razorpay-signature": razorpay.sign(body, KEYS.razorpay)}


# 1. Metric labels come from a closed set.


def test_unknown_provider_segments_are_counted_under_one_label(service):
    with service.client() as client:
        for n in range(5):
            client.post(f"/webhooks/evil-{n}", content=b"{}")
    text = "\n".join(metric_lines(service))
    assert "evil" not in text
    assert 'outcome="provider_not_configured",provider="unknown"} 5.0' in text


def test_metrics_do_not_grow_with_distinct_unknown_providers(service):
    with service.client() as client:
        client.post("/webhooks/first-stranger", content=b"{}")
        before = len(metric_lines(service))
        for n in range(30):
            client.post(f"/webhooks/stranger-{n}", content=b"{}")
    assert len(metric_lines(service)) == before


# 2. Scrapes and probes never take a webhook connection, nor scan history.


def test_scrapes_and_readiness_probes_take_no_webhook_connection(service):
    before = requests_made(service.pool)
    with service.client() as client:
        for _ in range(10):
            assert client.get("/metrics").status_code == 200
            assert client.get("/readyz").status_code == 200
    assert requests_made(service.pool) == before


def test_readiness_answers_while_every_webhook_connection_is_taken(service):
    with every_connection_taken(service.pool), service.client() as client:
        assert client.get("/readyz").status_code == 200


def test_database_gauges_are_scraped_while_every_webhook_connection_is_taken(service):
    with every_connection_taken(service.pool):
        text = "\n".join(metric_lines(service))
    assert "payhooks_outbox_backlog 0.0" in text


def test_unauthenticated_api_requests_take_no_connection(service):
    before = requests_made(service.pool)
    with service.client() as client:
        answers = [
            client.get("/api/products/x").status_code,
            client.post("/api/carts", json={"customer_email": "a@b.c", "items": []}).status_code,
            client.get("/api/orders", params={"cart_id": "c"}).status_code,
        ]
    assert answers == [401, 401, 401]
    assert requests_made(service.pool) == before


def test_an_unauthenticated_api_body_is_not_parsed(service):
    with service.client() as client:
        response = client.post(
            "/api/carts", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert response.status_code == 401


def test_an_api_body_over_its_limit_is_413(service):
    with service.api() as client:
        response = client.post(
            "/api/products",
            content=b"{" + b" " * (64 * 1024) + b"}",
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 413
    assert str(64 * 1024) in response.json()["detail"]


def test_a_streamed_api_body_over_its_limit_is_413(service):
    chunks = (b" " * 4096 for _ in range(17))
    with service.api() as client:
        response = client.post(
            "/api/products", content=chunks, headers={"content-type": "application/json"}
        )
    assert response.status_code == 413


def test_an_authenticated_api_body_under_the_limit_is_served(service):
    with service.api() as client:
        response = client.post(
            "/api/products", json={"sku": "T", "name": "Tea", "price_paise": 1, "stock": 1}
        )
    assert response.status_code == 201


OUTBOX_SEED = [
    """INSERT INTO outbox (kind, dedupe_key, subject, body, sent_at)
       SELECT 'email', 'sent:' || g, 's', 'b', now() FROM generate_series(1, 20000) g""",
    """INSERT INTO outbox (kind, dedupe_key, subject, body)
       SELECT 'email', 'pending:' || g, 's', 'b' FROM generate_series(1, 3) g""",
    """INSERT INTO outbox (kind, dedupe_key, subject, body, failed_at)
       SELECT 'email', 'failed:' || g, 's', 'b', now() FROM generate_series(1, 2) g""",
    "ANALYZE payhooks_outbox",
]


def scans_of(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from scans_of(child)


def test_outbox_gauges_read_only_the_partial_indexes(conn):
    for statement in OUTBOX_SEED:
        conn.execute(statement)
    explained = conn.execute(f"EXPLAIN (FORMAT JSON) {metrics_module.OUTBOX_GAUGES}").fetchone()
    nodes = list(scans_of(explained[0][0]["Plan"]))
    on_outbox = [
        n for n in nodes if n.get("Relation Name") == "payhooks_outbox" or "Index Name" in n
    ]
    assert not [n for n in on_outbox if n["Node Type"] == "Seq Scan"]
    assert {n["Index Name"] for n in on_outbox if "Index Name" in n} == {
        "payhooks_outbox_due",
        "payhooks_outbox_failed",
    }


def test_outbox_gauges_count_what_they_say(conn):
    for statement in OUTBOX_SEED:
        conn.execute(statement)
    backlog, oldest, dead = conn.execute(metrics_module.OUTBOX_GAUGES).fetchone()
    assert (backlog, dead) == (3, 2) and oldest >= 0


def test_metrics_need_the_bearer_token_when_one_is_configured(database_url):
    app = create_app(SETTINGS, api_token=TOKEN, url=database_url, metrics_token="scrape-me")
    with running(app) as served, served.client() as client:
        missing = client.get("/metrics")
        wrong = client.get("/metrics", headers={"authorization": "Bearer nope"})
        right = client.get("/metrics", headers={"authorization": "Bearer scrape-me"})
    assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert missing.headers["www-authenticate"] == "Bearer"


def test_the_api_token_does_not_open_the_metrics(database_url):
    app = create_app(SETTINGS, api_token=TOKEN, url=database_url, metrics_token="scrape-me")
    with running(app) as served, served.api() as client:
        assert client.get("/metrics").status_code == 401


def test_an_empty_metrics_token_is_refused_at_startup():
    with pytest.raises(ValueError, match="metrics token"):
        create_app(SETTINGS, api_token=TOKEN, metrics_token="")


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json"])
def test_docs_and_schema_are_not_served_by_default(service, path):
    with service.client() as client:
        assert client.get(path).status_code == 404


def test_docs_are_served_when_asked_for(database_url):
    app = create_app(SETTINGS, api_token=TOKEN, url=database_url, docs=True)
    with running(app) as served, served.client() as client:
        assert client.get("/openapi.json").status_code == 200


def test_the_schema_is_still_built_in_process():
    app = create_app(SETTINGS, api_token=TOKEN, url="postgresql://unused")
    assert "/api/carts" in app.openapi()["paths"]


# 3. Bounded before authentication, per provider; CPU work on a large body off the event loop.


def test_a_payu_body_over_its_limit_is_413_without_being_verified_or_parsed(database_url):
    app, adapters = watched_app(database_url)
    with running(app) as served, served.client() as client:
        response = client.post("/webhooks/payu", content=b"a=" + b"x" * (PAYU_LIMIT - 1))
    assert response.status_code == 413
    assert adapters[Provider.PAYU].calls == []


def test_the_413_answer_says_the_providers_limit(service):
    with service.client() as client:
        response = client.post("/webhooks/payu", content=b"a=" + b"x" * PAYU_LIMIT)
    assert response.json()["error"] == "payload_too_large"
    assert str(PAYU_LIMIT) in response.json()["detail"]


def test_the_body_limit_is_per_provider(service):
    body = b"{" + b" " * PAYU_LIMIT + b"}"
    with service.client() as client:
        response = client.post("/webhooks/razorpay", content=body, headers=signed(body))
    assert response.status_code == 400  # authentic, read in full, then found malformed


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(service):
    head = (
        "POST /webhooks/payu HTTP/1.1\r\nhost: x\r\n"
        f"content-type: application/x-www-form-urlencoded\r\ncontent-length: {PAYU_LIMIT + 1}"
        "\r\n\r\n"
    )
    answer = raw_exchange(service.base_url, head.encode())
    assert answer.startswith(b"HTTP/1.1 413 ")


def test_a_body_refused_unread_closes_the_connection(service):
    """Else the server would go on receiving the refused body to find the next request."""
    with service.client() as client:
        response = client.post("/webhooks/payu", content=b"a=" + b"x" * PAYU_LIMIT)
    assert response.headers["connection"] == "close"


def test_a_streamed_payu_body_over_its_limit_is_413(database_url):
    app, adapters = watched_app(database_url)
    chunks = (b"x" * 4096 for _ in range(PAYU_LIMIT // 4096 + 1))
    with running(app) as served, served.client() as client:
        response = client.post("/webhooks/payu", content=chunks)
    assert response.status_code == 413
    assert adapters[Provider.PAYU].calls == []


def test_a_gateway_sized_body_is_verified_and_parsed_on_the_event_loop(database_url, conn):
    """Tens of microseconds: cheaper there than a thread hop (docs/performance.md)."""
    app, adapters = watched_app(database_url)
    delivery = purchase(conn, Provider.PAYU).captured()
    with running(app) as served, served.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    assert response.json()["status"] == "processed"
    assert adapters[Provider.PAYU].calls == [("verify", True), ("parse", True)]


def padded_razorpay(size: int, *, signed: bool = True) -> tuple[bytes, dict[str, str]]:
    """An authentic Razorpay capture of at least ``size`` bytes (a long field it ignores)."""
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_big000000001", order_id="order_big", amount_paise=1
    )
    envelope = json.loads(delivery.body)
    envelope["padding"] = "x" * size
    body = json.dumps(envelope).encode()
    signature = razorpay.sign(body, KEYS.razorpay) if signed else "0" * 64
    return body, {**delivery.headers, "x-razorpay-signature": signature}


def test_a_body_over_the_loop_bound_is_verified_and_parsed_off_the_event_loop(database_url):
    app, adapters = watched_app(database_url)
    body, headers = padded_razorpay(ON_LOOP_BYTES)
    with running(app) as served, served.client() as client:
        response = client.post("/webhooks/razorpay", content=body, headers=headers)
    assert response.json()["status"] == "parked"
    assert adapters[Provider.RAZORPAY].calls == [("verify", False), ("parse", False)]


def test_a_large_body_with_a_bad_signature_is_checked_off_the_event_loop(database_url):
    app, adapters = watched_app(database_url)
    body, headers = padded_razorpay(ON_LOOP_BYTES, signed=False)
    with running(app) as served, served.client() as client:
        response = client.post("/webhooks/razorpay", content=body, headers=headers)
    assert response.status_code == 401
    assert adapters[Provider.RAZORPAY].calls == [("verify", False)]


# 4. A header the adapter reads, sent twice with different values, is ambiguous.


def repeated(delivery_headers: Mapping[str, str], name: str, *values: str) -> list[tuple[str, str]]:
    others = [(k, v) for k, v in delivery_headers.items() if k != name]
    return others + [(name, value) for value in values]


def test_two_different_signatures_on_one_request_are_401_naming_the_header(service, conn):
    delivery = purchase(conn).captured()
    good = delivery.headers["x-razorpay-signature"]
    headers = repeated(delivery.headers, "x-razorpay-signature", "0" * 64, good)
    with service.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=headers)
    assert response.status_code == 401
    assert "x-razorpay-signature" in response.json()["detail"]


def test_two_different_event_ids_on_one_request_are_401(service, conn):
    delivery = purchase(conn).captured()
    headers = repeated(delivery.headers, "x-razorpay-event-id", "evt_one", "evt_two")
    with service.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=headers)
    assert response.status_code == 401
    assert "x-razorpay-event-id" in response.json()["detail"]


def test_two_different_cashfree_timestamps_are_401(service, conn):
    delivery = purchase(conn, Provider.CASHFREE).captured()
    stamp = delivery.headers["x-webhook-timestamp"]
    headers = repeated(delivery.headers, "x-webhook-timestamp", stamp + "0", stamp)
    with service.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=headers)
    assert response.status_code == 401


def test_a_signature_repeated_identically_is_accepted(service, conn):
    delivery = purchase(conn).captured()
    good = delivery.headers["x-razorpay-signature"]
    headers = repeated(delivery.headers, "x-razorpay-signature", good, good)
    with service.client() as client:
        response = client.post(delivery.path, content=delivery.body, headers=headers)
    assert response.json()["status"] == "processed"


# 5. Nothing an unauthenticated client sends is echoed or logged at its own size.


def test_a_huge_unknown_provider_is_not_echoed_in_full(service):
    with service.client() as client:
        response = client.post("/webhooks/" + "a" * 50_000, content=b"{}")
    assert response.status_code == 404
    assert len(response.content) < 500


def test_an_unknown_gateways_name_is_quoted_to_the_shared_limit(service):
    with service.client() as client:
        response = client.post("/webhooks/" + "a" * 100, content=b"{}")
    assert response.json()["detail"] == f"provider {CLIPPED!r} is not configured"


def test_a_huge_unknown_provider_is_not_logged_in_full(service, caplog):
    caplog.set_level(logging.WARNING, logger="payhooks")
    with service.client() as client:
        client.post("/webhooks/" + "a" * 50_000, content=b"{}")
    [record] = [r for r in caplog.records if r.getMessage() == "webhook_rejected"]
    assert len(json.dumps(vars(record), default=str)) < 2000


def test_an_attacker_chosen_field_name_is_not_echoed_in_full(service):
    name = "n" * 10_000  # two of them stay under PayU's body limit
    with service.client() as client:
        response = client.post("/webhooks/payu", content=f"{name}=1&{name}=2".encode())
    assert response.status_code == 401
    assert len(response.content) < 500


def test_a_client_that_leaves_mid_body_leaves_no_traceback(database_url, caplog):
    """An unauthenticated client must not be able to write a traceback to the log at will."""
    head = b"POST /webhooks/razorpay HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n0123456789"
    uvicorn_errors = logging.getLogger("uvicorn.error")  # configured by uvicorn at startup
    try:
        with running(create_app(SETTINGS, api_token=TOKEN, url=database_url)) as served:
            uvicorn_errors.addHandler(caplog.handler)
            address = urlsplit(served.base_url)
            with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
                sock.sendall(head)
                answered_after(served)  # the server has taken the connection by now
            answered_after(served)  # and has seen it close
    finally:  # after the server has finished every request
        uvicorn_errors.removeHandler(caplog.handler)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def answered_after(served: Running) -> None:
    with served.client() as client:
        assert client.get("/healthz").status_code == 200


def test_the_shop_api_never_takes_a_webhook_connection(service):
    """A busy storefront must not make deliveries wait for a connection: the API has a pool
    of its own."""
    before = requests_made(service.pool)
    with service.api() as client:
        for _ in range(5):
            assert client.get("/api/products/nothing-here").status_code == 404
    assert requests_made(service.pool) == before
    assert requests_made(service.app.state.api_pool) >= 5


def test_webhooks_answer_while_every_api_connection_is_held(service):
    """Even with the API's pool exhausted, a delivery gets a connection and is answered."""
    api_pool = service.app.state.api_pool
    held = [api_pool.getconn(timeout=60) for _ in range(api_pool.max_size)]
    try:
        delivery = GATEWAY.razorpay(
            "payment.captured", payment_id="pay_held1", order_id="order_held", amount_paise=1
        )
        with service.client() as client:
            answer = client.post(
                "/webhooks/razorpay", content=delivery.body, headers=delivery.headers
            )
        assert answer.status_code == 200 and answer.json()["status"] == "parked"
    finally:
        for conn in held:
            api_pool.putconn(conn)
