"""A Flask app served for real: Werkzeug's threaded server on a loopback socket, and the
merchant's SQLAlchemy engine on the test's own database."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
import sqlalchemy
from flask import Flask
from psycopg.conninfo import conninfo_to_dict
from werkzeug.serving import make_server

from payhooks.plumbing import db


def sqlalchemy_url(conninfo: str, **query: str) -> sqlalchemy.URL:
    """The URL a merchant writes, ``postgresql+psycopg://``, for a psycopg conninfo."""
    params = {key: str(value) for key, value in conninfo_to_dict(conninfo).items()}
    host = params.get("host", "")
    if not host.startswith("/"):  # a socket folder (the embedded server) stays in the query
        params.pop("host", None)
    return sqlalchemy.URL.create(
        "postgresql+psycopg",
        username=params.pop("user", None),
        password=params.pop("password", None),
        host=None if host.startswith("/") else (host or None),
        port=int(params.pop("port")) if "port" in params else None,
        database=params.pop("dbname", None),
        query={**params, **query},
    )


def engine_for(conninfo: str, **query: str) -> sqlalchemy.Engine:
    return sqlalchemy.create_engine(sqlalchemy_url(conninfo, **query))


def own_schema(conninfo: str, name: str) -> dict[str, str]:
    """The fixture's database holds the reference service's tables, its own ``orders`` among
    them. A schema of its own, first and only on the search path, shows a merchant's app what
    a merchant's database holds: its tables and, once migrated, payhooks'. Returns the
    connection option that selects it."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"'.encode())
    return {"options": f"-c search_path={name}"}


@pytest.fixture
def engine(database_url: str) -> Iterator[sqlalchemy.Engine]:
    made = engine_for(database_url)
    yield made
    made.dispose()


@contextmanager
def serving(app: Flask) -> Iterator[str]:
    """The app on a real socket, one thread per request; yields its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def claimed(conn: db.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()
    return int(row[0]) if row else 0
