"""Retention: delivery records are kept for a window, then deleted in small batches.

Small batches, each its own short transaction, so ingest keeps flowing while a million old
rows go. Parked rows are kept until they are applied: they are unfinished money business.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from payhooks.db import Connection
from payhooks.retention import (
    BATCH_ROWS,
    CUTOFF,
    DELETE_BATCH,
    EXPIRED,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeResult:
    cutoff: datetime
    expired: int
    deleted: int


_DELETE_SENT = """
DELETE FROM outbox WHERE id IN (
    SELECT id FROM outbox WHERE sent_at < %s ORDER BY sent_at LIMIT %s FOR UPDATE SKIP LOCKED)
"""
# The console's records: the delivery log ages out with the deliveries; ended sessions and
# old login failures (the rate limit looks back an hour at most) are not kept at all.
_DELETE_LOGGED = """
DELETE FROM deliveries WHERE id IN (
    SELECT id FROM deliveries WHERE received_at < %s ORDER BY received_at LIMIT %s)
"""
_DELETE_ENDED_SESSIONS = "DELETE FROM console_sessions WHERE expires_at < now()"
_DELETE_OLD_FAILURES = (
    "DELETE FROM console_login_failures WHERE failed_at < now() - interval '1 day'"
)
_PURGE_LOCK = 0x70757267  # "purg": one purge at a time, whichever process runs it
_START = """
INSERT INTO maintenance_runs (task, started_at, rows_expected, rows_done)
VALUES ('purge', now(), %s, 0)
ON CONFLICT (task) DO UPDATE SET started_at = now(), finished_at = NULL,
    rows_expected = excluded.rows_expected, rows_done = 0
"""
_PROGRESS = "UPDATE maintenance_runs SET rows_done = rows_done + %s WHERE task = 'purge'"
_FINISH = "UPDATE maintenance_runs SET finished_at = now() WHERE task = 'purge'"


_TRY_LOCK = "SELECT pg_try_advisory_xact_lock(%s)"
_UNBOUNDED = "SELECT set_config('statement_timeout', '0', true)"


def plan(conn: Connection, days: int) -> PurgeResult:
    """What a purge would delete now, deleting nothing (``--dry-run``)."""
    cutoff = conn.execute(CUTOFF, (days,)).fetchone()[0]  # type: ignore[index]
    expired = conn.execute(EXPIRED, (cutoff,)).fetchone()[0]  # type: ignore[index]
    return PurgeResult(cutoff=cutoff, expired=expired, deleted=0)


@contextlib.contextmanager
def _unbounded(conn: Connection) -> Iterator[None]:
    """A transaction with no statement timeout (counting ten million rows may take longer
    than a webhook may), set for it alone: no session state, which a transaction pooler
    would hand to another client."""
    with conn.transaction():
        conn.execute(_UNBOUNDED)
        yield


def purge(
    conn: Connection,
    days: int,
    *,
    batch_rows: int = BATCH_ROWS,
    on_batch: Callable[[int], None] | None = None,
    planned: PurgeResult | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> PurgeResult:
    """Delete records older than ``days`` (fixed at the start), batch by batch, each its own
    transaction; then sent outbox messages and delivery log lines older than that (they hold
    customers' addresses and references), ended console sessions and day-old failed logins."""
    with _unbounded(conn):
        planned = planned or plan(conn, days)
        conn.execute(_START, (planned.expired,))
    deleted = 0
    while not stop():
        with _unbounded(conn):
            done = conn.execute(DELETE_BATCH, (planned.cutoff, batch_rows)).rowcount
            conn.execute(_PROGRESS, (done,))
        deleted += done
        if on_batch is not None:
            on_batch(done)
        if done < batch_rows:
            break
    for statement in (_DELETE_SENT, _DELETE_LOGGED):
        while not stop() and _delete_old(conn, statement, planned.cutoff, batch_rows):
            pass
    conn.execute(_DELETE_ENDED_SESSIONS)
    conn.execute(_DELETE_OLD_FAILURES)
    conn.execute(_FINISH)
    return PurgeResult(cutoff=planned.cutoff, expired=planned.expired, deleted=deleted)


def _delete_old(conn: Connection, statement: str, cutoff: datetime, batch_rows: int) -> int:
    with _unbounded(conn):
        return conn.execute(statement, (cutoff, batch_rows)).rowcount


def purge_exclusively(
    conn: Connection, days: int, *, holder: Connection, **options: Any
) -> PurgeResult | None:
    """``purge`` unless another process is purging (None then): one purge at a time.

    The lock is held by a transaction left open on ``holder`` for the whole purge, not by a
    session: behind a transaction pooler a session-level lock would stay with a server
    session that other clients go on using, and its unlock could reach another session. An
    open transaction keeps its server session, and ends with its client."""
    with holder.transaction():
        if not holder.execute(_TRY_LOCK, (_PURGE_LOCK,)).fetchone()[0]:  # type: ignore[index]
            return None
        return purge(conn, days, **options)
