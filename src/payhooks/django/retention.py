# mypy: disable-error-code="import-untyped"
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

# Razorpay retries for 24 hours and replays events up to 15 days old: a record purged before
# that could let a replay act twice on anything the merchant did not key by business id.
MIN_RETENTION_DAYS = 15
DEFAULT_RETENTION_DAYS = 90
BATCH_ROWS = 5000

_CUTOFF = "SELECT now() - make_interval(days => %s)"
_EXPIRED = """
SELECT count(*) FROM processed_webhooks WHERE processed_at < %s AND outcome <> 'parked'
"""
_DELETE_BATCH = """
DELETE FROM processed_webhooks
WHERE (provider, event_id) IN (
    SELECT provider, event_id FROM processed_webhooks
    WHERE processed_at < %s AND outcome <> 'parked'
    ORDER BY processed_at
    LIMIT %s
    FOR UPDATE SKIP LOCKED)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Purge:
    cutoff: datetime
    expired: int
    """Records past the window when the purge began."""
    deleted: int


def plan(alias: str, days: int) -> Purge:
    """What a purge would delete now, deleting nothing (``--dry-run``)."""
    with connections[alias].cursor() as cursor:
        cutoff = _one(cursor, _CUTOFF, (days,))
        return Purge(cutoff=cutoff, expired=_one(cursor, _EXPIRED, (cutoff,)), deleted=0)


def purge(alias: str, days: int, *, batch_rows: int = BATCH_ROWS) -> Purge:
    """Delete records older than ``days`` (the cutoff fixed at the start), batch by batch."""
    planned = plan(alias, days)
    deleted = 0
    with connections[alias].cursor() as cursor:
        while True:
            cursor.execute(_DELETE_BATCH, (planned.cutoff, batch_rows))
            deleted += cursor.rowcount
            if cursor.rowcount < batch_rows:
                break
    return Purge(cutoff=planned.cutoff, expired=planned.expired, deleted=deleted)


def _one(cursor: Any, sql: str, params: tuple[object, ...]) -> Any:
    cursor.execute(sql, params)
    return cursor.fetchone()[0]
