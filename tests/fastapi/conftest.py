"""A merchant's FastAPI app served by real uvicorn on a loopback port, driven over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest
from psycopg.conninfo import make_conninfo
from starlette.applications import Starlette

from tests import loopback
from tests.conftest import Databases, cloned_from_new, serving_app


@pytest.fixture(scope="session")
def empty_databases(admin_url: str) -> Iterator[Databases]:
    """Empty databases, each given back with what its test made dropped (``Databases``)."""
    with cloned_from_new(admin_url, "payhooks_m_tpl") as made:
        yield made


@pytest.fixture
def merchant_url(admin_url: str, empty_databases: Databases) -> Iterator[str]:
    """A new, empty database, as a merchant's is before they add payhooks: no reference-shop
    tables (the shared template has its own ``orders``)."""
    name = empty_databases.take()
    yield make_conninfo(admin_url, dbname=name)
    empty_databases.give_back(name)


@pytest.fixture(scope="session")
def shop_databases(admin_url: str) -> Iterator[Databases]:
    """Databases as the example shop's ``migrate`` leaves a merchant's new one (payhooks'
    tables and the shop's ``orders``), cloned from one migrated once, each emptied after its
    test and handed to the next, as ``database_url``'s are."""
    from examples.fastapi_shop.app import migrate

    with cloned_from_new(admin_url, "payhooks_shop_tpl", migrate) as made:
        yield made


@pytest.fixture
def shop_url(admin_url: str, shop_databases: Databases) -> Iterator[str]:
    """A merchant's database the example shop has migrated (its tests override
    ``merchant_url`` with it: the shop migrates the database before anything else)."""
    name = shop_databases.take()
    yield make_conninfo(admin_url, dbname=name)
    shop_databases.give_back(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Served:
    base_url: str

    def client(self) -> httpx.Client:
        return loopback.Client(base_url=self.base_url, timeout=30)


@contextmanager
def served(app: Starlette) -> Iterator[Served]:
    """Serve until the block ends; the app's lifespan opens and closes its pool."""
    with serving_app(app) as base_url:
        yield Served(base_url=base_url)
