"""The parked deliveries, as an operator lists them: ``payhooks parked`` and Django's
``manage.py payhooks_parked`` print this one list, each in its own format."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg.rows import class_row

from payhooks.plumbing.db import Connection

_WAITING = """
SELECT provider, event_id, event_type, merchant_ref, processed_at AS received_at,
       octet_length(body) AS body_bytes
FROM processed_webhooks WHERE outcome = 'parked' ORDER BY processed_at, event_id
LIMIT %s
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Parked:
    """A delivery that matched nothing (or was parked for its amount, or by a handler) and
    waits to be applied: ``payhooks replay`` takes its ``event_id``."""

    provider: str
    event_id: str
    event_type: str
    merchant_ref: str | None
    received_at: datetime
    body_bytes: int


def waiting(conn: Connection, limit: int | None = None) -> list[Parked]:
    """The parked deliveries, oldest first, at most ``limit`` (all, when None); it only
    reads."""
    with conn.cursor(row_factory=class_row(Parked)) as cur:
        return cur.execute(_WAITING, (limit,)).fetchall()


__all__ = ["Parked", "waiting"]
