"""What about the money needs a person: a captured payment its gateway has not settled within
its documented cycle and a margin (``payhooks_unsettled``), and a settlement line that names a
payment payhooks does not know (``UNMATCHED``: not when it was recorded, nor applied since);
and, counted for the alerts, the report lines a fetch could not read (``unreadable``).

``review`` finds the first kind, and matches lines again against payments applied since they
were recorded. It reads ``payhooks_payments`` by the time each capture was applied, which no
index serves (a capture's own insert stays as cheap as it was), so it runs once per fetch
(``payhooks.reconcile.settling``), not per minute; what it found is a small table the alerts
(``payhooks.operations.alerts``) and the console read cheaply. A flag goes the moment a
settled line names its payment (``payhooks.settlements.records``), and comes back at the next
review if that payout fails or is reversed, however old the capture."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from payhooks.events import EventKind, Provider
from payhooks.gateways import GATEWAYS
from payhooks.gateways._settlements import INDIA
from payhooks.plumbing.db import Connection, query

DEFAULT_MARGIN_HOURS = 48
DEFAULT_MARGIN = timedelta(hours=DEFAULT_MARGIN_HOURS)
"""Past its gateway's cycle, how long a capture may wait for its payout before it is flagged
(``PAYHOOKS_SETTLEMENT_MARGIN_HOURS``): bank holidays lengthen every cycle."""
MARGIN_HOURS = range(1, 24 * 60 + 1)
"""The margins a setting may name, in whole hours (the environment's variable and Django's
``SETTLEMENT_MARGIN_HOURS`` alike): at least one, at most sixty days."""
REVIEW_DAYS = 45
"""Captures that fell due this long ago or less (past their gateway's cycle and the margin)
are reviewed; one flagged before stays flagged. A capture a payout that failed or came back
covered is flagged whatever its age."""

_INDIA_OFFSET = INDIA.utcoffset(None)
# The days of a report are India's: its day X ends at X + 1, 00:00 there.

SETTLED = """EXISTS (
    SELECT 1 FROM payhooks_settlement_lines settled_line
    JOIN payhooks_settlements settled_payout
      ON settled_payout.provider = settled_line.provider
     AND settled_payout.settlement_id = settled_line.settlement_id
    WHERE settled_line.provider = {alias}.provider
      AND settled_line.payment_id = {alias}.payment_id
      AND settled_line.kind = 'payment' AND settled_payout.state = 'settled')"""
"""A payment (``{alias}``'s) is settled: a line of kind payment names it in a payout that is
settled (not pending, failed nor reversed). Its own aliases are names no statement gives its
tables, so that ``{alias}`` is never one of them (a line ``l`` outside was read as the line
inside, and every payment read as settled)."""
_FLAG = (
    """
INSERT INTO payhooks_unsettled (provider, payment_id, gateway_order_id, captured_at, due_at)
SELECT p.provider, p.payment_id, p.gateway_order_id, p.applied_at, p.applied_at + g.allowed
FROM unnest(%(providers)s::text[], %(allowed)s::interval[]) AS g (provider, allowed)
LEFT JOIN payhooks_settlement_reads r ON r.provider = g.provider
JOIN payhooks_payments p ON p.provider = g.provider AND p.kind = %(captured)s
WHERE p.applied_at < %(now)s - g.allowed AND p.applied_at >= %(now)s - g.allowed - %(window)s
  AND (r.provider IS NULL
       OR (p.applied_at >= (r.read_from::timestamp AT TIME ZONE 'UTC') - %(india)s
           AND p.applied_at + g.allowed
               < ((r.read_through + 1)::timestamp AT TIME ZONE 'UTC') - %(india)s))
  AND NOT """
    + SETTLED.format(alias="p")
    + """
  AND NOT EXISTS (SELECT 1 FROM payhooks_settlement_unreadable r
                  WHERE r.provider = p.provider AND r.payment_id = p.payment_id)
ON CONFLICT (provider, payment_id) DO NOTHING
"""
)
# The captures a payout that failed or came back covered, whatever their age: the gateway said
# so, which needs no report read whole. Through the payouts (few fail) and their lines' key.
# The line itself names the capture: its record goes with the purge after a refund's year, and
# a payout may come back later still (then the line's time, else when it was recorded, stands
# for the capture's; a line that matched no payment when recorded is no capture of this app's).
_FLAG_CAME_BACK = (
    """
INSERT INTO payhooks_unsettled (provider, payment_id, gateway_order_id, captured_at, due_at)
SELECT l.provider, l.payment_id, coalesce(p.gateway_order_id, l.gateway_order_id), c.at,
       c.at + g.allowed
FROM unnest(%(every)s::text[], %(every_allowed)s::interval[]) AS g (provider, allowed)
JOIN payhooks_settlements s ON s.provider = g.provider AND s.state IN ('failed', 'reversed')
JOIN payhooks_settlement_lines l
  ON l.provider = s.provider AND l.settlement_id = s.settlement_id AND l.kind = 'payment'
LEFT JOIN payhooks_payments p
  ON p.provider = l.provider AND p.payment_id = l.payment_id AND p.kind = %(captured)s
CROSS JOIN LATERAL (SELECT coalesce(p.applied_at, l.occurred_at, l.recorded_at) AS at) AS c
WHERE (p.provider IS NOT NULL OR l.matched) AND c.at < %(now)s - g.allowed AND NOT """
    + SETTLED.format(alias="l")
    + """
ON CONFLICT (provider, payment_id) DO NOTHING
"""
)
_CLEAR = "DELETE FROM payhooks_unsettled u WHERE " + SETTLED.format(alias="u")
TURN = 0x73746C64  # "stld": the review and the recording of report lines take turns
LINES_TURN = "SELECT pg_advisory_xact_lock_shared(%s)"
"""Taken (with ``TURN``) by a recording that writes report lines, before any of them: shared,
so recordings run side by side, and each waits for a review in progress to commit."""
_REVIEW_TURN = "SELECT pg_advisory_xact_lock(%s)"
# Lines recorded before their payment was applied (a webhook late, reconciliation since).
_MATCH_AGAIN = """
UPDATE payhooks_settlement_lines l
SET matched = true, gateway_order_id = coalesce(l.gateway_order_id, p.gateway_order_id)
FROM payhooks_payments p
WHERE l.matched = false AND p.provider = l.provider AND p.payment_id = l.payment_id
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Review:
    """What a review found: captures newly flagged unsettled, flags cleared (their payment
    settled), and lines matched to a payment applied since they were recorded."""

    flagged: int
    cleared: int
    matched: int

    def summary(self) -> str:
        """One line for the command's output."""
        return (
            f"{self.flagged} capture(s) newly flagged unsettled, {self.cleared} flag(s) cleared, "
            f"{self.matched} line(s) matched again"
        )


def allowed(margin: timedelta = DEFAULT_MARGIN) -> Mapping[Provider, timedelta]:
    """How long each gateway that documents its cycle has to settle a capture: its cycle
    (``Gateway.settles``) and ``margin``. A gateway that documents none is not reviewed."""
    return {p: g.settles.cycle + margin for p, g in GATEWAYS.items() if g.settles is not None}


def review(
    conn: Connection,
    now: datetime,
    margin: timedelta = DEFAULT_MARGIN,
    *,
    providers: Collection[Provider] | None = None,
) -> Review:
    """Flag the captures past their gateway's cycle and ``margin`` (fallen due in the last
    ``REVIEW_DAYS``) that no settled line names, and those a payout that failed or came back
    covered (whatever their age); clear the flags a settled line now answers, and match lines
    again; in one transaction. Of the first kind only the captures of ``providers`` are
    flagged (by default every gateway that documents a cycle): a fetch reviews the gateways
    whose report it read whole, never one whose report failed, since an error says nothing of
    what was paid out; nor a capture a report line payhooks could not read names (that line,
    kept for a person, may be its payout); nor a capture whose cycle and margin end after the
    last day of its gateway's report read whole (``payhooks.settlements.reads``): its payout
    may be on a day not read yet (a fetch missed while the gateway was down), and the fetch
    that reads that day reviews it; nor a capture of a day before the first one read whole
    (its payout may be on a day never read). A gateway no fetch has read a day of whole is
    reviewed by its cycle alone: a fetch (``payhooks.reconcile.settling``) never asks for
    one. The second is the gateway's own word, flagged for every gateway.

    A recording of report lines (``records.recording``) and the review take turns
    (``TURN``: the review alone, or any number of recordings), each before its first
    statement. Without it neither sees the other's uncommitted rows: the review would flag a
    capture whose settled line commits beside it, after that line's own clear found no flag,
    and the payment would read unsettled until the next review. Whichever comes second waits,
    and its statements see what the first committed."""
    every = allowed(margin)
    limits = {p: span for p, span in every.items() if providers is None or p in providers}
    params = {
        "providers": [p.value for p in limits],
        "allowed": list(limits.values()),
        "every": [p.value for p in every],
        "every_allowed": list(every.values()),
        "captured": EventKind.PAYMENT_CAPTURED.value,
        "now": now,
        "window": timedelta(days=REVIEW_DAYS),
        "india": _INDIA_OFFSET,
    }
    with conn.transaction():
        conn.execute(_REVIEW_TURN, (TURN,))
        matched = conn.execute(_MATCH_AGAIN).rowcount
        cleared = conn.execute(_CLEAR).rowcount
        flagged = conn.execute(_FLAG, params).rowcount
        flagged += conn.execute(_FLAG_CAME_BACK, params).rowcount
    return Review(flagged=flagged, cleared=cleared, matched=matched)


@dataclass(frozen=True, slots=True, kw_only=True)
class Count:
    """How many of one flag a gateway has, and since when."""

    provider: str
    count: int
    since: datetime


_UNSETTLED = """
SELECT provider, count(*), min(captured_at) FROM payhooks_unsettled GROUP BY 1 ORDER BY 1
"""
UNMATCHED = """(l.matched = false AND NOT EXISTS (
    SELECT 1 FROM payhooks_payments p
    WHERE p.provider = l.provider AND p.payment_id = l.payment_id) AND NOT EXISTS (
    SELECT 1 FROM payhooks_settlement_lines k
    WHERE k.provider = l.provider AND k.payment_id = l.payment_id AND k.matched))"""
"""A settlement line (``l``) naming a payment payhooks does not know: unknown when the line was
recorded and not applied since (the next review matches that one again), nor named by a line
matched before (a payment whose record the purge has taken is known by its settled line). The
one definition
the alert, the lists (``payhooks.settlements.listing``), the console and the admin read, so
they never disagree; through the partial index payhooks_settlement_lines_unmatched."""
_UNMATCHED = (
    "SELECT l.provider, count(*), min(l.recorded_at) FROM payhooks_settlement_lines l WHERE "
    + UNMATCHED
    + " GROUP BY 1 ORDER BY 1"
)


_UNREADABLE = """
SELECT provider, count(*), min(first_seen_at) FROM payhooks_settlement_unreadable
GROUP BY 1 ORDER BY 1
"""


def _counts(conn: Connection, sql: str) -> list[Count]:
    return [Count(provider=p, count=n, since=t) for p, n, t in query(conn, sql)]


def unsettled(conn: Connection) -> list[Count]:
    """Captures flagged unsettled, by gateway, with the oldest capture."""
    return _counts(conn, _UNSETTLED)


def unmatched(conn: Connection) -> list[Count]:
    """Settlement lines naming a payment payhooks does not know, by gateway, with the first
    recorded."""
    return _counts(conn, _UNMATCHED)


def unreadable(conn: Connection) -> list[Count]:
    """Report lines payhooks could not read (kept by a fetch, core migration 0026), by gateway,
    with the first met."""
    return _counts(conn, _UNREADABLE)


__all__ = [
    "DEFAULT_MARGIN",
    "DEFAULT_MARGIN_HOURS",
    "LINES_TURN",
    "MARGIN_HOURS",
    "REVIEW_DAYS",
    "SETTLED",
    "TURN",
    "UNMATCHED",
    "Count",
    "Review",
    "allowed",
    "review",
    "unmatched",
    "unreadable",
    "unsettled",
]
