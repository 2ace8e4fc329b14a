"""The connection type the core works on, and the one place driver errors are translated."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from payhooks.errors import DatabaseUnavailable, LockTimeout

Connection = psycopg.Connection[tuple[Any, ...]]


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
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc
