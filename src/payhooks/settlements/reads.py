"""How far each gateway's settlement report was read whole (``payhooks_settlement_reads``,
core migration 0031): the last day, India's, read whole with every day after the first one
read whole too.

A fetch (``payhooks.reconcile.settling``) that read a gateway's report whole moves its day on
(``moved``): to the last day of its range that was over when it was read (today's report is
still growing), when the range starts no later than the day after the one recorded; never
back. A fetch that leaves days unread between them leaves it where it is, and says so. The
first fetch that reads a day that is over starts it there: what came before is taken as read,
as before payhooks kept it. So the worker fetches from the day after it (the days it missed
while a gateway was down, or the worker was, read when it can again), and the review
(``flags.review``) flags a capture unsettled only when its gateway's cycle and the margin end
on a day read: never on the word of a report with a day of its cycle left unread."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from payhooks.events import Provider
from payhooks.gateways._settlements import INDIA
from payhooks.plumbing.db import Connection, query

UNREAD_DAYS = 3
"""Days over and not read whole, past which a gateway's reads are said behind (the
``settlements_unread`` alert): the worker reads each day once it is over, every six hours."""

_READ = "SELECT provider, read_through FROM payhooks_settlement_reads WHERE provider = ANY(%s)"
# Started, or moved on by a range that starts no later than the day after it; never back.
_MOVE = """
INSERT INTO payhooks_settlement_reads AS r (provider, read_through)
VALUES (%(provider)s, %(through)s)
ON CONFLICT (provider) DO UPDATE SET read_through = excluded.read_through, read_at = now()
WHERE r.read_through < excluded.read_through AND r.read_through >= %(start)s::date - 1
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
    rows = query(conn, _BEHIND, (today - timedelta(days=UNREAD_DAYS + 1),)).fetchall()
    return [Behind(provider=p, read_through=d, read_at=at) for p, d, at in rows]


def moved(
    conn: Connection, provider: Provider, start: date, end: date, *, today: date
) -> date | None:
    """``provider``'s report for ``start`` to ``end`` read whole on ``today`` (India's): its
    last day read whole moved on as far as that allows (the days of the range that were over,
    when the range meets the days read before); returns where it stands now (None: no day
    over read yet). Commits."""
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
