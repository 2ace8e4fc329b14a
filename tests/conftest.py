"""Real PostgreSQL for every test: DATABASE_URL when set, else an embedded server.

Each test gets its own database cloned from a migrated template (fast, isolated).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from payhooks import db


@pytest.fixture(scope="session")
def admin_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    return db.embedded_url(tmp_path_factory.mktemp("embedded-pg"))


@pytest.fixture(scope="session")
def template_db(admin_url: str) -> Iterator[str]:
    name = f"payhooks_tpl_{uuid.uuid4().hex[:10]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    with psycopg.connect(make_conninfo(admin_url, dbname=name), autocommit=True) as conn:
        db.migrate(conn)
    yield name
    _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(admin_url: str, template_db: str) -> Iterator[str]:
    name = f"payhooks_t_{uuid.uuid4().hex[:12]}"
    _admin(admin_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield make_conninfo(admin_url, dbname=name)
    _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def conn(database_url: str) -> Iterator[db.Connection]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


def _admin(url: str, sql: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.encode())


DATA = Path(__file__).parent / "data"
