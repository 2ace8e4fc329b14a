"""``payhooks.metrics``: Prometheus from the core's tables for a merchant's own app, scraped
over real HTTP (ASGI under uvicorn, WSGI under werkzeug), bounded to one read per period."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from werkzeug.serving import make_server

import payhooks
from payhooks import Applied, EventKind, Hooks, Outcome, ingest
from payhooks.operations.metrics import CoreMetrics, Snapshot, asgi_app, wsgi_app
from tests import loopback
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
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()


def test_a_starlette_app_mounts_the_core_metrics(conn, database_url):
    _parked_and_short(conn)
    app = Starlette(routes=[Mount("/metrics", asgi_app(database_url))])
    with serving_app(app) as base:
        text = loopback.get(f"{base}/metrics/", timeout=10).text
    assert _value(text, "payhooks_parked_deliveries") == "2.0"
    assert _value(text, "payhooks_amount_mismatches") == "1.0"
    assert float(_value(text, "payhooks_last_delivery_timestamp_seconds")) > 0
    assert 'payhooks_reconcile_api_errors_total{gateway="payu"} 0.0' in text


def test_a_wsgi_app_answers_the_same(conn, database_url):
    _parked_and_short(conn)
    with wsgi_serving(wsgi_app(database_url)) as base:
        text = loopback.get(f"{base}/", timeout=10).text
    assert _value(text, "payhooks_parked_deliveries") == "2.0"


def test_with_the_database_away_the_series_are_absent_not_zero():
    with wsgi_serving(wsgi_app("postgresql://nobody@127.0.0.1:1/none")) as base:
        answer = loopback.get(f"{base}/", timeout=10)
    assert answer.status_code == 200
    assert "payhooks_parked_deliveries" not in answer.text
    # ... and a rule can tell: an alert on a gauge that went absent would clear meanwhile.
    assert _value(answer.text, "payhooks_database_readable") == "0.0"


def test_a_scrape_that_read_the_database_says_so(conn, database_url):
    with wsgi_serving(wsgi_app(database_url)) as base:
        text = loopback.get(f"{base}/", timeout=10).text
    assert _value(text, "payhooks_database_readable") == "1.0"


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
    from payhooks.operations.metrics import read_totals

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
            loopback.get(f"{base}/metrics/", timeout=30)
            finished["scrape"] = time.monotonic()

        scraping = threading.Thread(target=scrape)
        scraping.start()
        hung.settimeout(60)  # a liveness bound
        waiting, _ = hung.accept()  # the scrape is waiting on the database now, unanswered
        assert loopback.get(f"{base}/ping", timeout=30).text == "pong"
        finished["ping"] = time.monotonic()
        scraping.join()
        waiting.close()
    hung.close()
    assert finished["ping"] < finished["scrape"]


def _families(text: str) -> dict[str, tuple[str, str, frozenset[str]]]:
    """Each family's name: its help, its type and the label names its samples carry."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        family.name: (
            family.documentation,
            family.type,
            frozenset(label for sample in family.samples for label in sample.labels),
        )
        for family in text_string_to_metric_families(text)
    }


def test_the_service_exposes_every_series_a_merchant_app_gets_once(service, conn):
    """The reference service's /metrics registers the core's metrics: every series a merchant
    app mounting ``payhooks.metrics`` gets, with the same help and labels, each said once."""
    _parked_and_short(conn)
    app = Starlette(routes=[Mount("/metrics", asgi_app(service.database_url))])
    with serving_app(app) as base:
        core = _families(loopback.get(f"{base}/metrics/", timeout=10).text)
    with service.client() as client:
        text = client.get("/metrics").text
    theirs = _families(text)
    assert core  # the database was read
    assert {name: theirs.get(name) for name in core} == core
    helps = [line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")]
    assert len(helps) == len(set(helps))
    assert _value(text, "payhooks_parked_deliveries") == "2.0"


def test_the_service_defines_none_of_the_cores_series_itself():
    """What the service adds is its own: without the core's collector, no core name is left."""
    from payhooks.service.metrics import Metrics

    core = {
        family.name
        for family in CoreMetrics(
            lambda: Snapshot(parked=0, amount_mismatches=0, last_delivery_timestamp=0)
        ).collect()
    }
    metrics = Metrics()
    metrics.registry.unregister(metrics.core)
    own = {family.name for family in metrics.registry.collect()}
    assert own and not own & core
