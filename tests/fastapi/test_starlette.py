"""``payhooks.starlette``: the webhook route in a plain Starlette app under uvicorn, with no
FastAPI in it (nor needed to import it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette

from payhooks.starlette import route
from tests.factories import ADAPTERS
from tests.fastapi.conftest import served
from tests.fastapi.merchant import REF, async_hooks, capture, prepare


def test_a_plain_starlette_app_takes_the_route_and_processes_a_capture_once(conn, database_url):
    prepare(conn, REF)
    pool = AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await pool.open(wait=True)
        yield
        await pool.close()

    app = Starlette(
        routes=[route(adapters=ADAPTERS.values(), hooks=async_hooks(), pool=pool)],
        lifespan=lifespan,
    )
    delivery = capture()
    with served(app) as running, running.client() as client:
        first = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        again = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    assert (first.json()["status"], again.json()["status"]) == ("processed", "duplicate")
    assert conn.execute("SELECT paid_count FROM merchant_orders").fetchall() == [(1,)]


def test_the_starlette_route_is_built_without_fastapi_importable():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["fastapi"] = None  # any import of it fails
        from psycopg_pool import ConnectionPool
        from payhooks import Hooks
        from payhooks.fastapi import AsyncHooks
        from payhooks.providers.razorpay import Razorpay
        from payhooks.starlette import route
        pool = ConnectionPool("dbname=unused", open=False)
        made = route(adapters=[Razorpay(secrets=("s",))], hooks=Hooks(), pool=pool)
        assert AsyncHooks and made.path == "/webhooks/{provider}", made.path
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr
