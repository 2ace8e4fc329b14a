"""A Flask app served for real: Werkzeug's threaded server on a loopback socket, and the
merchant's SQLAlchemy engine on the test's own database."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy
from flask import Flask
from psycopg.conninfo import conninfo_to_dict
from werkzeug.serving import make_server

from payhooks import db


def engine_for(conninfo: str, **connect_args: str) -> sqlalchemy.Engine:
    """The engine a merchant makes from their URL: ``postgresql+psycopg://``."""
    params = {key: str(value) for key, value in conninfo_to_dict(conninfo).items()}
    url = sqlalchemy.URL.create(
        "postgresql+psycopg",
        username=params.pop("user", None),
        password=params.pop("password", None),
        host=params.pop("host", None),
        port=int(params.pop("port")) if "port" in params else None,
        database=params.pop("dbname", None),
        query=params,
    )
    return sqlalchemy.create_engine(url, connect_args=connect_args)


@pytest.fixture
def engine(database_url: str) -> Iterator[sqlalchemy.Engine]:
    made = engine_for(database_url)
    yield made
    made.dispose()


@contextmanager
def serving(app: Flask) -> Iterator[str]:
    """The app on a real socket, one thread per request; yields its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
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
