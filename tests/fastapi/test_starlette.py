"""``payhooks.starlette``: the webhook route in a plain Starlette app under uvicorn, with no
FastAPI in it (nor needed to import it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Mount

from payhooks.starlette import HoldingRoute, lifespan, route
from tests.factories import ADAPTERS
from tests.fastapi.conftest import served
from tests.fastapi.merchant import REF, async_hooks, capture, prepare


def test_a_plain_starlette_app_takes_the_route_and_processes_a_capture_once(conn, database_url):
    prepare(conn, REF)
    pool = AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False)

    @asynccontextmanager
    async def opens_the_pool(app: Starlette) -> AsyncIterator[None]:
        await pool.open(wait=True)
        yield
        await pool.close()

    routes = [route(adapters=ADAPTERS.values(), hooks=async_hooks(), pool=pool)]
    app = Starlette(routes=routes, lifespan=lifespan(routes, around=opens_the_pool))
    delivery = capture()
    with served(app) as running, running.client() as client:
        first = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        again = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    assert (first.json()["status"], again.json()["status"]) == ("processed", "duplicate")
    assert conn.execute("SELECT paid_count FROM merchant_orders").fetchall() == [(1,)]


def test_a_path_that_does_not_name_the_gateway_is_refused_when_the_route_is_made(database_url):
    """``path="/payments/hooks"`` (the router's ``prefix`` carried over): every delivery would
    be a 500 with no order made, so it is refused at start, saying what to write."""
    pool = AsyncConnectionPool(database_url, open=False)
    with pytest.raises(ValueError, match=r"'/payments/hooks/\{provider\}'"):
        route(adapters=ADAPTERS.values(), hooks=async_hooks(), pool=pool, path="/payments/hooks")
    made = route(adapters=ADAPTERS.values(), hooks=async_hooks(), pool=pool,
                 path="/payments/hooks/{provider}", delivery_log=False)  # fmt: skip
    assert made.path == "/payments/hooks/{provider}"


def test_the_starlette_route_is_built_without_fastapi_importable():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["fastapi"] = None  # any import of it fails
        from psycopg_pool import ConnectionPool
        from payhooks import Hooks
        from payhooks.fastapi import AsyncHooks
        from payhooks.gateways.razorpay import Razorpay
        from payhooks.starlette import route
        pool = ConnectionPool("dbname=unused", open=False)
        made = route(adapters=[Razorpay(secrets=("s",))], hooks=Hooks(), pool=pool)
        assert AsyncHooks and made.path == "/webhooks/{provider}", made.path
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


def test_the_apps_lifespan_lets_go_of_a_mounted_routes_hold_before_its_own_ends():
    said: list[str] = []

    async def answer(request: object) -> Response:
        return Response()

    held = HoldingRoute(
        "/x", answer, name="x", methods=["GET"], release=lambda: said.append("let go")
    )

    @asynccontextmanager
    async def own(app: object) -> AsyncIterator[dict[str, int]]:
        said.append("opened")
        yield {"pool": 1}
        said.append("closed")

    async def run() -> None:
        async with lifespan([Mount("/pay", routes=[held])], around=own)(None) as state:
            said.append(f"serving with {state}")

    anyio.run(run)
    assert said == ["opened", "serving with {'pool': 1}", "let go", "closed"]
