"""Replaying every parked delivery a filter takes (a gateway, a time range), ``BATCH`` at a
time, each through the same path as the Replay button and recorded as its own line of the
action log (docs/console.md, "Replaying many at once").

A bulk replay is fixed by the moment its operator confirmed it (``as_of``, the database's
clock): it takes the deliveries parked before then that no one has replayed since. So a
second submit of the same form, a reload, or a second operator's, replays nothing already
replayed and says 0; a delivery still parked after its replay is not tried again by it; and a
filter of more than ``BATCH`` is worked through by submitting again, the count left said each
time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from payhooks.console.lists import Window, exact
from payhooks.plumbing.db import Connection

BATCH = 50
"""Deliveries replayed by one submit, at most: each is a replay of its own."""

_MATCHING = """
FROM processed_webhooks w
WHERE w.outcome = 'parked' AND w.processed_at < %(end)s
  AND (%(start)s::timestamptz IS NULL OR w.processed_at >= %(start)s)
  AND (%(provider)s::text IS NULL OR w.provider = %(provider)s)
  AND NOT EXISTS (
      SELECT 1 FROM payhooks_console_actions a
      WHERE a.target = w.event_id AND a.provider = w.provider AND a.action = 'replay'
        AND a.at >= %(as_of)s)
"""
_LEFT = "SELECT count(*)" + _MATCHING
_NEXT = (
    "SELECT w.provider, w.event_id"
    + _MATCHING
    + "ORDER BY w.processed_at, w.event_id LIMIT %(limit)s"
)
_NOW = "SELECT now()"


@dataclass(frozen=True, slots=True, kw_only=True)
class Chosen:
    """The parked deliveries of a gateway (or every gateway) in a time range, as they stood
    when the operator confirmed (``as_of``)."""

    gateway: str | None
    window: Window
    as_of: datetime

    @property
    def end(self) -> datetime:
        return min(self.window.end, self.as_of)

    def params(self) -> dict[str, object]:
        return {
            "start": self.window.start,
            "end": self.end,
            "provider": self.gateway,
            "as_of": self.as_of,
        }

    def fields(self) -> dict[str, str]:
        """The form's fields that say this replay again: the same deliveries, the same moment."""
        return {
            "gateway": self.gateway or "",
            "from": exact(self.window.start) if self.window.start else "",
            "to": exact(self.window.end) if self.window.end_given else "",
            "as_of": exact(self.as_of),
        }


def now(conn: Connection) -> datetime:
    """The database's clock, which the action log's times are written by."""
    row = conn.execute(_NOW).fetchone()
    assert row is not None
    at: datetime = row[0]
    return at


def left(conn: Connection, chosen: Chosen) -> int:
    """How many deliveries the replay has yet to take."""
    row = conn.execute(_LEFT, chosen.params()).fetchone()
    return int(row[0]) if row else 0


def next_batch(conn: Connection, chosen: Chosen, limit: int | None = None) -> list[tuple[str, str]]:
    """The next deliveries to replay (``BATCH`` at most), oldest first: (gateway, key)."""
    rows = conn.execute(_NEXT, {**chosen.params(), "limit": limit or BATCH}).fetchall()
    return [(str(provider), str(event_id)) for provider, event_id in rows]


__all__ = ["BATCH", "Chosen", "left", "next_batch", "now"]
