"""A merchant's FastAPI app when its database goes away and comes back (a restart, a failover)
while its pool sits idle: every idle connection is dead, and the first delivery handed one is
answered 503 (the gateway retries); the pool then tries the others at once, so the next
deliveries are applied, not answered 503 once per idle connection. The operators' reads
(health, timeline) answer 503 as the webhook does meanwhile, and so do the console's pages.
Through the loopback proxy of ``payhooks.sim.proxy``, cut and restored by the test, or
``pg_terminate_backend``."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from psycopg_pool import ConnectionPool
from starlette.applications import Starlette

from payhooks.console import close, console
from payhooks.operations.operators import add_operator
from payhooks.sim.proxy import Proxy
from payhooks.starlette import health_route, lifespan, timeline_route
from tests.acceptance.conftest import wait_until
from tests.factories import ADAPTERS
from tests.fastapi.conftest import served
from tests.fastapi.merchant import KINDS, Merchant, capture, prepare, sync_hooks
from tests.fastapi.test_fastapi_router import orders

REFS = [f"order_away{i:04d}" for i in range(6)]
PAYMENTS = [f"pay_away{i:010d}" for i in range(6)]


@pytest.mark.parametrize("kind", KINDS)
def test_after_a_quiet_outage_a_merchants_pool_answers_one_delivery_503_and_applies_the_rest(
    conn,
    kind: str,
    proxy: Proxy,
):
    prepare(conn, *REFS)
    deliveries = [capture(ref, payment_id=paid) for ref, paid in zip(REFS, PAYMENTS, strict=True)]
    merchant = Merchant(proxy.url, kind, min_size=4, max_size=4)
    with served(merchant.app) as app, app.client() as client:
        with merchant.every_connection_taken():
            pass  # all four connections opened, and idle again
        proxy.cut()
        proxy.restore()
        answers = [
            client.post(d.path, content=d.body, headers=d.headers).status_code for d in deliveries
        ]
        answers += [  # the gateway's retry of whichever was answered 503
            client.post(d.path, content=d.body, headers=d.headers).status_code for d in deliveries
        ]
    assert answers == [503] + [200] * 11, answers
    assert sorted(orders(conn)) == [(r, p, 1) for r, p in zip(REFS, PAYMENTS, strict=True)]


READS = [("/payhooks/health", {}), ("/payhooks/timeline", {"q": REFS[0]})]
ENDED = """
SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
"""


def reading_app(url: str) -> Starlette:
    """The operators' two reads, each on its connection of its own to the pool's database."""
    pool = ConnectionPool(url, open=False)  # never opened: the reads do not borrow from it
    routes = [health_route(pool=pool, allow=lambda request: True),
              timeline_route(pool=pool, allow=lambda request: True)]  # fmt: skip
    return Starlette(routes=routes, lifespan=lifespan(routes))


def read(client) -> list[tuple[int, object]]:
    answers = [client.get(path, params=query) for path, query in READS]
    return [(a.status_code, a.json().get("error")) for a in answers]


@pytest.mark.parametrize("outage", ["terminated", "away"])
def test_the_operators_reads_answer_503_json_while_the_database_is_gone_and_read_after(
    conn, database_url, proxy: Proxy, outage: str
):
    """``pg_terminate_backend`` ends their connections (a restart, an administrator); a cut
    proxy refuses every new one (the database away). Either way the answer is the webhook's,
    503 ``database_unavailable`` in JSON, and the next read after it is back reads."""
    url = database_url if outage == "terminated" else proxy.url
    with served(reading_app(url)) as app, app.client() as client:
        before = read(client)  # their connections opened
        if outage == "terminated":
            conn.execute(ENDED)
        else:
            proxy.cut()
        during = [*read(client), *read(client)]  # the lost connection, then a new one tried
        if outage == "away":
            proxy.restore()
        after = read(client)
    assert before == [(200, None)] * 2
    gone = [(503, "database_unavailable")] * 2
    assert during == (gone + [(200, None)] * 2 if outage == "terminated" else gone * 2), during
    assert after == [(200, None)] * 2


@pytest.mark.parametrize("outage", ["terminated", "away"])
def test_the_consoles_pages_answer_503_while_the_database_is_gone_and_read_after(
    conn, database_url, proxy: Proxy, outage: str
):
    """The console's pages read on its own pool, which tests each connection it hands out: one
    ended under it is replaced at once; none to be had is its error page, 503, never a 500.
    Once the database is back, psycopg_pool's next attempt (its delays double from 1 s,
    docs/operations.md) serves them again."""
    add_operator(conn, "asha", "twelve chars at least")
    url = database_url if outage == "terminated" else proxy.url
    operators = console(url, adapters=ADAPTERS.values(), hooks=sync_hooks())
    app = FastAPI()
    app.mount("/ops", operators)
    pages = ["/ops/", "/ops/search?q=order_away0000", "/ops/parked", "/ops/deliveries"]
    try:
        with served(app) as running, running.client() as client:
            login = {"name": "asha", "password": "twelve chars at least"}
            assert client.post("/ops/login", data=login).status_code == 303
            before = [client.get(page).status_code for page in pages]
            if outage == "terminated":
                conn.execute(ENDED)
                during = [client.get(page) for page in pages]
            else:
                proxy.cut()
                during = [client.get(page) for page in pages[:2]]  # each waits for the pool
                proxy.restore()
                wait_until(lambda: client.get(pages[0]).status_code == 200, timeout=120,
                           what="the console's pool to reconnect")  # fmt: skip
            after = [client.get(page).status_code for page in pages]
    finally:
        close(operators)
    assert before == [200] * 4
    if outage == "terminated":
        assert [page.status_code for page in during] == [200] * 4
    else:
        assert [page.status_code for page in during] == [503] * 2
        assert all("The database is not answering" in page.text for page in during)
    assert after == [200] * 4
