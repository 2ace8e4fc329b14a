"""``payhooks.metrics``: Prometheus from the core's tables for a merchant's own app, scraped
over real HTTP (ASGI under uvicorn, WSGI under werkzeug), bounded to one read per period."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from werkzeug.serving import make_server

import payhooks
from payhooks import Applied, EventKind, Hooks, Outcome, ingest
from payhooks.metrics import CoreMetrics, Snapshot, asgi_app, wsgi_app
from tests.conftest import free_port, serving_app
from tests.factories import ADAPTERS, GATEWAY


def _parked_and_short(conn) -> None:
    """One delivery the merchant's handler parks, one capture paid short of its expectation."""
    hooks = Hooks()
    hooks.on(EventKind.PAYMENT_CAPTURED)(lambda c, e: Applied(outcome=Outcome.PARKED))
    payhooks.expect(conn, "razorpay", "order_met2", 49_900)
    for ref, amount in (("order_met1", 100), ("order_met2", 100)):
        d = GATEWAY.razorpay("payment.captured", payment_id=f"pay_{ref}", order_id=ref,
                             amount_paise=amount)  # fmt: skip
        ingest(conn, ADAPTERS[d.provider], d.body, d.headers, hooks)


def _value(text: str, name: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return line.rsplit(" ", 1)[1]
    return None


@contextmanager
def wsgi_serving(app) -> Iterator[str]:
    port = free_port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()


def test_a_starlette_app_mounts_the_core_metrics(conn, database_url):
    _parked_and_short(conn)
    app = Starlette(routes=[Mount("/metrics", asgi_app(database_url))])
    with serving_app(app) as base:
        text = httpx.get(f"{base}/metrics/", timeout=10).text
    assert _value(text, "payhooks_parked_deliveries") == "2.0"
    assert _value(text, "payhooks_amount_mismatches") == "1.0"
    assert float(_value(text, "payhooks_last_delivery_timestamp_seconds")) > 0
    assert 'payhooks_reconcile_api_errors_total{gateway="payu"} 0.0' in text


def test_a_wsgi_app_answers_the_same(conn, database_url):
    _parked_and_short(conn)
    with wsgi_serving(wsgi_app(database_url)) as base:
        text = httpx.get(f"{base}/", timeout=10).text
    assert _value(text, "payhooks_parked_deliveries") == "2.0"


def test_with_the_database_away_the_series_are_absent_not_zero():
    with wsgi_serving(wsgi_app("postgresql://nobody@127.0.0.1:1/none")) as base:
        answer = httpx.get(f"{base}/", timeout=10)
    assert answer.status_code == 200
    assert "payhooks_parked_deliveries" not in answer.text


def test_a_flood_of_scrapes_reads_the_database_once_per_period():
    reads = []
    now = [0.0]

    def read_now() -> Snapshot:
        reads.append(now[0])
        return Snapshot(parked=len(reads), amount_mismatches=0, last_delivery_timestamp=0)

    metrics = CoreMetrics(read_now, ttl_seconds=5, clock=lambda: now[0])
    for _ in range(50):
        list(metrics.collect())
    now[0] = 5.0
    list(metrics.collect())
    assert reads == [0.0, 5.0]


@pytest.mark.parametrize("gateway", ["razorpay"])
def test_an_unknown_gateway_in_the_totals_is_left_out(conn, gateway):
    from payhooks.metrics import read_totals

    conn.execute(
        "INSERT INTO payhooks_reconcile_totals (provider, examined) VALUES (%s, 3), ('stripe', 1)",
        (gateway,),
    )
    assert [row[0] for row in read_totals(conn)] == [gateway]


def test_a_scrape_waiting_on_a_hung_database_never_stalls_the_apps_event_loop():
    """A socket that accepts and never answers: the scrape waits out its connect timeout on a
    thread, and the app answers another request on its loop meanwhile."""
    import socket
    import time

    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)
    url = f"postgresql://nobody@127.0.0.1:{hung.getsockname()[1]}/none"
    app = Starlette(
        routes=[
            Route("/ping", lambda request: PlainTextResponse("pong")),
            Mount("/metrics", asgi_app(url)),
        ]
    )
    finished: dict[str, float] = {}
    with serving_app(app) as base:

        def scrape() -> None:
            httpx.get(f"{base}/metrics/", timeout=30)
            finished["scrape"] = time.monotonic()

        scraping = threading.Thread(target=scrape)
        scraping.start()
        time.sleep(0.3)  # the scrape is waiting on the database by now
        assert httpx.get(f"{base}/ping", timeout=30).text == "pong"
        finished["ping"] = time.monotonic()
        scraping.join()
    hung.close()
    assert finished["ping"] < finished["scrape"]
