"""Delivery records are kept for a window, then deleted in small batches.

Each batch is its own short transaction (Django's autocommit), so deliveries keep flowing
while a million old records go. Parked records are kept until applied: they are unfinished
money business. Plain SQL on the real key (provider, event_id): the model's one-column key
would let a batch reach a recent record of another gateway sharing a delivery key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections

from payhooks.retention import (
    BATCH_ROWS,
    CUTOFF,
    DELETE_BATCH,
    EXPIRED,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Purge:
    cutoff: datetime
    expired: int
    """Records past the window when the purge began."""
    deleted: int


def plan(alias: str, days: int) -> Purge:
    """What a purge would delete now, deleting nothing (``--dry-run``)."""
    with connections[alias].cursor() as cursor:
        cutoff = _one(cursor, CUTOFF, (days,))
        return Purge(cutoff=cutoff, expired=_one(cursor, EXPIRED, (cutoff,)), deleted=0)


def purge(alias: str, days: int, *, batch_rows: int = BATCH_ROWS) -> Purge:
    """Delete records older than ``days`` (the cutoff fixed at the start), batch by batch."""
    planned = plan(alias, days)
    deleted = 0
    with connections[alias].cursor() as cursor:
        while True:
            cursor.execute(DELETE_BATCH, (planned.cutoff, batch_rows))
            deleted += cursor.rowcount
            if cursor.rowcount < batch_rows:
                break
    return Purge(cutoff=planned.cutoff, expired=planned.expired, deleted=deleted)


def _one(cursor: Any, sql: str, params: tuple[object, ...]) -> Any:
    cursor.execute(sql, params)
    return cursor.fetchone()[0]
