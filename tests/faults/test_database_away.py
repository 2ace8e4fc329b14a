"""The service and the worker while their database is away and after it is back, through a
loopback proxy the test cuts (every connection reset, new ones refused) and restores
(``payhooks.sim.proxy``): nothing is restarted, and nothing an operator does brings them back.
``bench/database_away.py`` measures how long each change takes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from payhooks.console.pages import OwnPool
from payhooks.service import database, outbox
from payhooks.service.worker import Worker, WorkerOptions
from payhooks.sim.gateway_api import GatewayApi
from payhooks.sim.gateway_api import serving as serving_api
from tests.conftest import Inbox, serving, smtp_server
from tests.factories import SETTINGS, purchase
from tests.faults.conftest import eventually
from tests.reconcile.conftest import API_KEYS, orders_of, paid_at_gateway, settings_for

LIVENESS_S = 30.0
"""How long a recovery may take before the test calls it missing: a bound on waiting, not a
figure the service is held to."""


def post(client: httpx.Client, delivery) -> int:
    return client.post(delivery.path, content=delivery.body, headers=delivery.headers).status_code


def ready(client: httpx.Client) -> int:
    return client.get("/readyz").status_code


def count(conn, sql: str, *params) -> int:
    return int(conn.execute(sql, params).fetchone()[0])


def test_while_the_database_is_away_every_delivery_is_503_and_its_retry_is_applied(proxy, conn):
    first_captures = [purchase(conn).captured() for _ in range(3)]  # answered on the loop
    authorisations = [purchase(conn).delivery("authorized") for _ in range(3)]  # in a thread
    with serving(SETTINGS, proxy.url) as service, service.client() as client:
        assert post(client, purchase(conn).captured()) == 200
        proxy.cut()
        during = [post(client, d) for d in (*first_captures, *authorisations)]
        proxy.restore()
        eventually(lambda: ready(client) == 200, timeout=LIVENESS_S)
        retried = [post(client, d) for d in (*first_captures, *authorisations)]
        retried += [post(client, d) for d in (*first_captures, *authorisations)]
    assert during == [503] * 6
    # Each pool hands out at most one dead connection, and a pool whose reconnection was backing
    # off while the database was away (psycopg_pool's delays double from 1 s) answers 503 until
    # its next attempt: the first round may see a few; the second finds every pool connected.
    assert retried[6:] == [200] * 6, retried
    assert count(conn, "SELECT count(*) FROM orders") == 4
    assert count(conn, "SELECT count(*) FROM outbox WHERE kind = 'email'") == 4
    assert count(conn, "SELECT count(*) FROM payments WHERE status = 'authorized'") == 3


def test_readiness_goes_false_while_the_database_is_away_and_true_again_by_itself(proxy):
    with serving(SETTINGS, proxy.url) as service, service.client() as client:
        assert ready(client) == 200
        proxy.cut()
        eventually(lambda: ready(client) == 503, timeout=LIVENESS_S)
        assert client.get("/healthz").status_code == 200  # alive: no restart is called for
        proxy.restore()
        eventually(lambda: ready(client) == 200, timeout=LIVENESS_S)


def test_after_a_quiet_outage_each_webhook_pool_hands_out_a_dead_connection_once_at_most(
    proxy, conn
):
    """No delivery came while the database was away, so every idle connection of both pools
    is dead when it is back: the first one found makes the pool drop the others."""
    with serving(SETTINGS, proxy.url) as service, service.client() as client:
        for _ in range(3):  # both pools hold a few idle connections
            assert post(client, purchase(conn).captured()) == 200
            assert post(client, purchase(conn).delivery("authorized")) == 200
        proxy.cut()
        eventually(lambda: ready(client) == 503, timeout=LIVENESS_S)
        proxy.restore()
        eventually(lambda: ready(client) == 200, timeout=LIVENESS_S)
        on_the_loop = [post(client, purchase(conn).captured()) for _ in range(6)]
        in_a_thread = [post(client, purchase(conn).delivery("authorized")) for _ in range(6)]
    assert on_the_loop[1:] == [200] * 5 and on_the_loop[0] in (200, 503)
    assert in_a_thread[1:] == [200] * 5 and in_a_thread[0] in (200, 503)


def test_after_an_outage_a_checked_pool_hands_out_a_live_connection_at_once(proxy):
    """The shop API's and the console's pools try each connection before handing it out. With
    several idle connections dead after the database came back, the first dead one found makes
    the pool try the others at once: the caller gets a live connection on this request, not
    after one pause per dead connection (psycopg_pool's own check pauses 1 s, 2 s, 4 s, ...
    between them, longer than the pool's wait for 3 dead connections or more)."""
    pool = database.open_pool(proxy.url, SETTINGS, deadline=False, checked=True, wait_s=5.0)
    try:
        held = [pool.getconn(timeout=60) for _ in range(4)]  # it grows to 4 idle connections
        for conn in held:
            pool.putconn(conn)
        proxy.cut()
        proxy.restore()
        with database.connection(pool) as conn:  # raised DatabaseUnavailable: none in time
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()


def test_after_an_outage_the_consoles_own_pool_in_a_merchants_app_hands_out_a_live_one(proxy):
    """The console mounted in a merchant's app opens a pool of its own on a database address
    (``OwnPool``): its idle connections dead after an outage or a failover, the next page still
    gets a live one (it was handed a dead one, and the page failed, once per idle connection)."""
    own = OwnPool(proxy.url)
    try:
        held = [own().getconn(timeout=60) for _ in range(2)]  # its every connection
        for conn in held:
            own().putconn(conn)
        proxy.cut()
        proxy.restore()
        for _ in range(3):
            with own().connection() as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        own.close()


@pytest.fixture
def gateway_api() -> Iterator[tuple[GatewayApi, str]]:
    api = GatewayApi(API_KEYS)
    with serving_api(api) as url:
        yield api, url


def test_the_worker_and_the_reconciler_resume_after_the_database_comes_back(
    proxy, conn, gateway_api
):
    api, api_url = gateway_api
    box = Inbox()
    with smtp_server(box) as smtp_port:
        settings = replace(
            settings_for(api_url),
            smtp_url=f"smtp://127.0.0.1:{smtp_port}",
            mail_from="shop@example.com",
            alert_email="ops@example.com",
            reconcile_after_s=1,  # not asked before the test has paid it at the gateway
        )
        pool = database.open_pool(proxy.url, settings, max_size=4, deadline=False)
        options = WorkerOptions(
            poll_seconds=0.05, purge_every_seconds=None, reconcile_every_seconds=0.0
        )
        worker = Worker(pool, settings, options, jitter=lambda: 0.0)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            proxy.cut()
            eventually(lambda: worker._failures > 0, timeout=LIVENESS_S)
            _queue(conn, "while-away")
            proxy.restore()
            eventually(lambda: "subject while-away" in _subjects(box), timeout=LIVENESS_S)
            unheard = purchase(conn)  # paid after the outage; its webhook never comes
            paid_at_gateway(api, unheard)
            eventually(lambda: orders_of(conn, unheard.cart_id) != [], timeout=LIVENESS_S)
            assert thread.is_alive()
        finally:
            worker.stop()
            thread.join(timeout=30)
            pool.close()
    assert not thread.is_alive()
    assert len(orders_of(conn, unheard.cart_id)) == 1
    assert _subjects(box).count("subject while-away") == 1


def _queue(conn, key: str) -> None:
    outbox.enqueue(
        conn,
        outbox.Message(
            kind=outbox.MessageKind.EMAIL,
            dedupe_key=key,
            recipient="buyer@example.com",
            subject=f"subject {key}",
            body="body",
        ),
    )


def _subjects(box: Inbox) -> list[str]:
    return [str(message["Subject"]) for message in box.messages]
