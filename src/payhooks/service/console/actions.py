"""What an operator of the reference shop does beyond the core console's actions: queue a dead
letter (an email or alert the worker gave up on) again. Idempotent, and recorded with the
operator's name like the core's (``payhooks.console.actions``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg.rows import class_row

from payhooks.console.actions import Done, Result, record
from payhooks.db import Connection
from payhooks.service import outbox


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    id: int
    kind: str
    recipient: str | None
    subject: str
    attempts: int
    last_error: str | None
    failed_at: datetime


_DEAD = """
SELECT id, kind, recipient, subject, attempts, last_error, failed_at FROM outbox
WHERE failed_at IS NOT NULL ORDER BY failed_at DESC LIMIT %s
"""
_DEAD_COUNT = "SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL"


def dead_letters(conn: Connection, limit: int = 200) -> list[DeadLetter]:
    with conn.cursor(row_factory=class_row(DeadLetter)) as cur:
        return cur.execute(_DEAD, (limit,)).fetchall()


def dead_count(conn: Connection) -> int:
    row = conn.execute(_DEAD_COUNT).fetchone()
    return int(row[0]) if row else 0


def retry_dead_letter(conn: Connection, message_id: int, *, operator: str) -> Result:
    revived = outbox.revive(conn, message_id)
    result = Result(done=Done.QUEUED if revived else Done.ALREADY_QUEUED)
    record(conn, operator, "retry", None, str(message_id), result)
    return result
