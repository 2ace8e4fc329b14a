"""The connection types the core works on, the two drivers that run its statements, and the
one place driver errors are translated.

The claim's steps are written once, with no driver (``payhooks.intake.idempotency``): a step yields
a
``Statement`` and receives its row. ``run`` drives one on a connection, ``run_async`` on an
async one, as httpx keeps one client logic under ``Client`` and ``AsyncClient``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import class_row, dict_row, tuple_row

from payhooks.plumbing.errors import (
    DatabaseAway,
    LockTimeout,
    SerializationConflict,
    TimedOut,
)

Connection = psycopg.Connection[tuple[Any, ...]]
AsyncConnection = psycopg.AsyncConnection[tuple[Any, ...]]
Connect = Callable[[], AbstractContextManager[Connection]]
"""A connection for each piece of a pass's work: a pool's, or one made each time."""
Row = tuple[Any, ...] | None
T = TypeVar("T")
S = TypeVar("S")


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    """One statement of a step, and whether the step reads its row. One it does not read
    costs no round trip of its own in pipeline mode: it travels with the next."""

    sql: str
    params: tuple[object, ...] | Mapping[str, object] = ()
    reads: bool = True


Steps = Generator[Statement, Row, T]
"""A step: yields statements, receives each one's row (None when not read), returns its value."""


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """What a step returned once it has no statement left."""

    value: T


def libpq_url(url: str) -> str:
    """A database URL as libpq reads it: SQLAlchemy names its driver in the scheme
    (``postgresql+psycopg://``, a Flask app's ``DATABASE_URL``), which is ``postgresql://``
    to libpq; anything else is returned as it is."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower().startswith(("postgresql+", "postgres+")):
        return scheme.partition("+")[0] + "://" + rest
    return url


URL_SYNTAX = (
    "is not a connection string libpq can read: write postgresql://user:password@host:port/"
    "dbname with the password percent-encoded (%40 for @), or key=value pairs with a value "
    "holding spaces quoted (password='a b')"
)
"""Why a database URL is refused, in fixed words: libpq's own (``missing "=" after …``,
``invalid percent-encoded token: …``) quote the value, password and all."""


def readable_url(url: str) -> str | None:
    """``url`` as libpq reads it (``libpq_url``), read without connecting; None where libpq
    cannot read it, to be refused in ``URL_SYNTAX``'s words, never the driver's."""
    found = libpq_url(url)
    try:
        conninfo_to_dict(found)
    except (psycopg.Error, ValueError):
        return None
    return found


def advance(steps: Generator[S, Any, T], answer: object) -> S | Done[T]:
    """Send ``steps`` the answer to its last statement: its next one, or ``Done``. The
    drivers below, and the claim's drivers with a handler, loop on this and differ only in
    how they answer (called or awaited)."""
    try:
        return steps.send(answer)
    except StopIteration as done:
        return Done(done.value)


def run(conn: Connection, steps: Steps[T]) -> T:
    """Drive ``steps`` on ``conn``: each statement executed, its row sent back."""
    row: Row = None
    while not isinstance(statement := advance(steps, row), Done):
        row = execute(conn, statement)
    return statement.value


async def run_async(conn: AsyncConnection, steps: Steps[T]) -> T:
    """``run`` on an async connection: the same steps, the driver's calls awaited."""
    row: Row = None
    while not isinstance(statement := advance(steps, row), Done):
        row = await execute_async(conn, statement)
    return statement.value


def query(conn: Connection, sql: str, params: Any = None) -> psycopg.Cursor[tuple[Any, ...]]:
    """``conn.execute``, its rows tuples whatever the connection's ``row_factory``: payhooks
    reads its rows by position, and a merchant's connection may give dicts (``dict_row``) to
    the merchant's own code, which keeps them."""
    return conn.cursor(row_factory=tuple_row).execute(sql, params)


async def query_async(
    conn: AsyncConnection, sql: str, params: Any = None
) -> psycopg.AsyncCursor[tuple[Any, ...]]:
    """``query`` on an async connection."""
    return await conn.cursor(row_factory=tuple_row).execute(sql, params)


def execute(conn: Connection, statement: Statement) -> Row:
    """Runs a claim step's statement; its first row when the step reads one."""
    cursor = query(conn, statement.sql, statement.params)
    return cursor.fetchone() if statement.reads else None


async def execute_async(conn: AsyncConnection, statement: Statement) -> Row:
    """``execute`` on an async connection."""
    cursor = await query_async(conn, statement.sql, statement.params)
    return await cursor.fetchone() if statement.reads else None


Named = dict[str, Any]
"""A row by its columns' names, for the read sides that show what they read."""


def named_rows(conn: Connection, sql: str, params: Any = ()) -> list[Named]:
    """Every row of a read, each by its columns' names."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql, params).fetchall()


def named_row(conn: Connection, sql: str, params: Any = ()) -> Named | None:
    """The first row of a read by its columns' names, or ``None`` when it has none."""
    found = named_rows(conn, sql, params)
    return found[0] if found else None


def shaped_rows(conn: Connection, shape: type[T], sql: str, params: Any = ()) -> list[T]:
    """Every row of a read as a ``shape``: a value object whose fields are the columns."""
    with conn.cursor(row_factory=class_row(shape)) as cur:
        return cur.execute(sql, params).fetchall()


CONFLICT_STATES = frozenset({"40001", "40P01"})
"""The SQLSTATEs of a transaction the server gave up for another: run again, it may pass."""


def conflict(
    exc: BaseException | None, event_id: str | None = None
) -> SerializationConflict | None:
    """``SerializationConflict`` when ``exc`` is the driver's 40001 or 40P01, for the edges
    that see it wrapped by an ORM (Django's ``__cause__``, SQLAlchemy's ``orig``)."""
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate in CONFLICT_STATES:
        return SerializationConflict(sqlstate, event_id)
    return None


ROW_REFUSALS = ("23", "27", "44", "09", "P0")
"""SQLSTATE classes a row's own constraints and triggers raise (integrity, triggered data
change, check option, triggered action, PL/pgSQL's ``RAISE``): a refusal of that row, which the
others of its batch need not share. Anything else (the connection, a pooler, a bug) is not."""


def first_line(exc: BaseException) -> str:
    """What an error says on its first line (a database's error goes on with its DETAIL and
    CONTEXT on lines of their own), else its type's name."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def row_refused(conn: Connection | AsyncConnection, exc: psycopg.Error) -> bool:
    """Whether ``exc`` is a refusal of the row a statement wrote (``ROW_REFUSALS``) on a
    connection still whole: the rest of a batch may go on without that row."""
    return not conn.broken and (exc.sqlstate or "")[:2] in ROW_REFUSALS


@contextlib.contextmanager
def translated(event_id: str | None = None) -> Iterator[None]:
    """Turn the driver's transient failures into payhooks errors; let bugs through."""
    try:
        yield
    except pg_errors.LockNotAvailable as exc:
        raise LockTimeout(event_id) from exc
    except (pg_errors.SerializationFailure, pg_errors.DeadlockDetected) as exc:
        raise SerializationConflict(str(exc.sqlstate), event_id) from exc
    except (pg_errors.QueryCanceled, pg_errors.TransactionTimeout) as exc:
        raise TimedOut(str(exc.sqlstate)) from exc
    except psycopg.OperationalError as exc:
        raise DatabaseAway(f"database unavailable: {type(exc).__name__}") from exc


def written_down(
    connect: Connect,
    write: Callable[[Connection], object],
    log: logging.Logger,
    event: str,
    **fields: object,
) -> None:
    """``write`` on a connection of its own, for one item of a pass (why its turn failed, when
    it is due again). The database refusing it is that item's alone: logged as ``event``, and
    the item's lease brings it back. The database out of reach (``DatabaseAway``) is raised:
    it is the whole pass's."""
    try:
        with connect() as conn:
            write(conn)
    except DatabaseAway:
        raise
    except Exception:
        log.exception(event, extra=fields)
