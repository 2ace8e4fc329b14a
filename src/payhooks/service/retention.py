"""Retention: the core's purge (``payhooks.operations.retention``), and the service's own records.

The delivery records, payment claims and expectations go as in a merchant's app; then sent
outbox messages and the console's delivery log as old, ended console sessions and day-old
failed logins. The purge's progress is kept in ``maintenance_runs`` for the metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from payhooks.operations.retention import (
    BATCH_ROWS,
    Aged,
    Purge,
    delete_expired,
    exclusively,
    plan,
    unbounded,
)
from payhooks.plumbing.db import Connection

PurgeResult = Purge

SENT = Aged(
    table="payhooks_outbox",
    past="x.sent_at < %(cutoff)s AND x.alert_key IS NULL AND x.kind <> 'event'",
    named="concat_ws(' ', 'sent message', x.id)",
    order="ORDER BY x.sent_at",
)
"""The service's sent messages (emails, chat): they hold customers' addresses. The relayed
events are the core's (``retention.RELAYED``)."""
_START = """
INSERT INTO maintenance_runs (task, started_at, rows_expected, rows_done)
VALUES ('purge', now(), %s, 0)
ON CONFLICT (task) DO UPDATE SET started_at = now(), finished_at = NULL,
    rows_expected = excluded.rows_expected, rows_done = 0
"""
_PROGRESS = "UPDATE maintenance_runs SET rows_done = rows_done + %s WHERE task = 'purge'"
_FINISH = "UPDATE maintenance_runs SET finished_at = now() WHERE task = 'purge'"


def purge(
    conn: Connection,
    days: int,
    *,
    batch_rows: int = BATCH_ROWS,
    on_batch: Callable[[int], None] | None = None,
    planned: PurgeResult | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> PurgeResult:
    """The core's purge of records older than ``days`` (fixed at the start), its progress
    recorded batch by batch; then sent outbox messages and delivery log lines older than that
    (they hold customers' addresses and references); the console's ended sessions and
    day-old failed logins go in the core's."""
    with unbounded(conn):
        planned = planned or plan(conn, days)
        conn.execute(_START, (planned.expired,))
    done = delete_expired(
        conn,
        planned,
        batch_rows=batch_rows,
        on_batch=on_batch,
        within_batch=lambda rows: conn.execute(_PROGRESS, (rows,)),
        stop=stop,
        also=(SENT,),
    )
    conn.execute(_FINISH)
    return done


def purge_exclusively(
    conn: Connection, days: int, *, holder: Connection, **options: Any
) -> PurgeResult | None:
    """``purge`` unless another process is purging (None then): one purge at a time, the
    same lock as the core's purge (``payhooks.operations.retention.exclusively``)."""
    with exclusively(holder) as mine:
        return purge(conn, days, **options) if mine else None
