"""The library path: a minimal FastAPI app that mounts ``payhooks.fastapi.router``.

    python bench/_library.py --port 8001

The same gateways (from the environment, as ``payhooks serve`` reads them), the same database
and the same handler (the reference shop's ``payments.apply_event``) as the service, on a
pool the way a merchant would open one: what the integration costs, and nothing else.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg_pool
import uvicorn
from fastapi import FastAPI

from payhooks.fastapi import router
from payhooks.service.config import Settings
from payhooks.service.shop import payments


def create() -> FastAPI:
    settings = Settings.from_env(os.environ)
    pool = psycopg_pool.ConnectionPool(
        os.environ["DATABASE_URL"],
        min_size=2,
        max_size=settings.pool_size,
        kwargs={"autocommit": True},
        open=False,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool.open()
        try:
            yield
        finally:
            pool.close()

    app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    adapters = settings.adapters().values()
    app.include_router(router(adapters=adapters, hooks=payments.apply_event, pool=pool))

    @app.get("/readyz")
    async def readyz() -> dict[str, str]:
        return {"status": "ready"}

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(create(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
