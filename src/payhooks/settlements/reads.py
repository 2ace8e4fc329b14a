"""How far each gateway's settlement report was read whole (``payhooks_settlement_reads``,
core migrations 0031 and 0032): the days, India's, from ``read_from`` to ``read_through``,
each read whole.

A fetch (``payhooks.reconcile.settling``) that read a gateway's report whole counts the days
of its range that were over when it was read (today's report is still growing) (``moved``):
the first such fetch starts the row with them; a later one whose days meet or overlap those
kept joins them, moving ``read_through`` on or ``read_from`` back, never the other way. A
fetch whose days lie apart from them (days unread between) leaves the row where it is, and
says so. No day before ``read_from`` is taken as read. So a catch-up (the worker's fetch,
``payhooks settlements --catch-up``) fetches from the day after ``read_through`` (the days it
missed while a gateway was down, or the worker was, read when it can again), a gateway's
first one reads back as far as the review looks (``payhooks.reconcile.settling.first_days``),
and the review (``flags.review``) flags a capture unsettled only when it was captured on or
after ``read_from`` and its gateway's cycle and the margin end on a day read: never on the
word of a report with a day of its cycle left unread."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from payhooks.events import Provider
from payhooks.gateways._settlements import INDIA
from payhooks.plumbing.db import Connection, query, shaped_rows

UNREAD_DAYS = 3
"""Days over and not read whole, past which a gateway's reads are said behind (the
``settlements_unread`` alert): the worker reads each day once it is over, every six hours."""

_READ = "SELECT provider, read_through FROM payhooks_settlement_reads WHERE provider = ANY(%s)"
# Started, or joined by days that meet or overlap those kept: read_through moved on (read_at
# says when it last was), read_from moved back; neither the other way.
_MOVE = """
INSERT INTO payhooks_settlement_reads AS r (provider, read_from, read_through)
VALUES (%(provider)s, %(start)s, %(through)s)
ON CONFLICT (provider) DO UPDATE SET
    read_from = least(r.read_from, excluded.read_from),
    read_through = greatest(r.read_through, excluded.read_through),
    read_at = CASE WHEN excluded.read_through > r.read_through THEN now() ELSE r.read_at END
WHERE excluded.read_from <= r.read_through + 1 AND excluded.read_through >= r.read_from - 1
  AND (excluded.read_from < r.read_from OR excluded.read_through > r.read_through)
RETURNING read_through
"""


def read_through(conn: Connection, providers: Collection[Provider]) -> dict[Provider, date]:
    """The last day read whole of each of ``providers`` that has one."""
    rows = query(conn, _READ, ([p.value for p in providers],)).fetchall()
    return {Provider(provider): day for provider, day in rows}


@dataclass(frozen=True, slots=True, kw_only=True)
class Behind:
    """A gateway whose report was last read whole through ``read_through``: captures whose
    cycle ends after it are not reviewed until the days since are read."""

    provider: str
    read_through: date
    read_at: datetime


_BEHIND = """
SELECT provider, read_through, read_at FROM payhooks_settlement_reads
WHERE read_through < %s ORDER BY provider
"""


def behind(conn: Connection, now: datetime) -> list[Behind]:
    """The gateways with more than ``UNREAD_DAYS`` days over (India's) not read whole."""
    today = now.astimezone(INDIA).date()
    return shaped_rows(conn, Behind, _BEHIND, (today - timedelta(days=UNREAD_DAYS + 1),))


def moved(
    conn: Connection, provider: Provider, start: date, end: date, *, today: date
) -> date | None:
    """``provider``'s report for ``start`` to ``end`` read whole on ``today`` (India's): the
    days of the range that were over counted read (the row started with them, or joined to
    the days read before when they meet or overlap them); returns its last day read whole now
    (None: no day over read yet). Commits."""
    through = min(end, today - timedelta(days=1))
    with conn.transaction():
        if through >= start:
            row = query(
                conn, _MOVE, {"provider": provider.value, "through": through, "start": start}
            ).fetchone()
            if row is not None:
                return row[0]  # type: ignore[no-any-return]
        return read_through(conn, [provider]).get(provider)


__all__ = ["UNREAD_DAYS", "Behind", "behind", "moved", "read_through"]
