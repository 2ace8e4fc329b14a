"""Which expected checkouts reconciliation asks about, and what it remembers between passes.

A checkout is a gateway order the merchant told payhooks it expects (``payhooks.expect``). It
is due when it is older than the configured age and younger than the window, and its next
attempt time has come; whether the merchant's order is paid does not matter: a second
payment, on another gateway, must be found and flagged like a webhook's. Nor does a capture
of its own end it at Razorpay or Cashfree: their order can carry several payments (a retry, a
second tab, a late UPI), so a captured checkout (one with a capture in ``payhooks_payments``)
is still asked, at intervals from an hour growing to a day (``settled_backoff``), until the
window ends; never before the ones with no capture, which a pass asks first. A PayU txnid is
one payment, so a captured PayU checkout is final. Nothing is asked about past the window.

A pass reads about as many rows as it leases, however many checkouts the window holds. An
expectation old enough is enrolled once: its row in ``payhooks_reconcile`` is written, due at
once, saying whether a capture is known. Due rows are read in the order of an index on
(gateway, captured, next attempt), those with no capture first, a bounded number at a time; a
row found captured since it was enrolled moves to the captured rows, and one found past the
window is put back to its creation, out of the window's reach (a longer window reaches it
again): each once in its life.

A pass claims due checkouts by pushing their next attempt time forward by a lease: a second
worker's claim waits on the first's row and then finds it no longer due, so two workers never
ask about the same checkout at once, and a worker that dies mid-pass only delays its
checkouts by the lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.plumbing.db import Connection

Row = tuple[Any, ...]

LEASE = timedelta(minutes=10)
# A pass starts no checkout after this long, so every one it asks about is still its own: the
# lease outlives the last call by a full call's timeout at least.
PASS_BUDGET = timedelta(minutes=4)
FIRST_RETRY = timedelta(minutes=1)
LONGEST_RETRY = timedelta(hours=6)
SETTLED_FIRST_RETRY = timedelta(hours=1)
SETTLED_LONGEST_RETRY = timedelta(days=1)
FINAL_WHEN_CAPTURED = frozenset(p.value for p, g in GATEWAYS.items() if g.final_when_captured)
"""Gateways whose order is one payment: once it is captured there is nothing left to find
(``Gateway.final_when_captured``)."""
ENROLL_BATCH = 1000
SWEEP_ROWS = 50
"""Rows a claim reads beyond those it may lease: room to move captured and past-window rows
out of the way (each once in its life) in the same statement."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Due:
    """A checkout reconciliation asks its gateway about now."""

    provider: Provider
    reference: str
    """The gateway's order id."""
    order_reference: str
    """The merchant's own reference for it (``expect``'s ``reference``)."""
    attempts: int


# Whether a webhook (or reconciliation) applied a capture of the gateway order ``e`` names
# (unless ``{unless}`` already says so), from the payment's record, which the purge keeps (its
# delivery's record goes): a lateral probe of one row at most, through the record's index by
# order (core 0030), so every plan asks per row and none hashes the tables whole.
_PAID = """
LEFT JOIN LATERAL (
    SELECT true AS yes FROM payhooks_payments p
    WHERE {unless} p.provider = e.provider AND p.gateway_order_id = e.gateway_order_id
      AND p.kind = 'payment_captured'
    LIMIT 1
) paid ON true
"""
# Expectations of one gateway old enough to be asked about get their row, due from their
# creation (so one already past the window is out of its reach), saying whether a capture is
# known: a batch at a time, each expectation once. The batch is read as a range of the index
# of those not enrolled, on its own key (gateway, creation, order id) and in its order, from
# where the pass's last batch ended: only that index serves it, and however many were enrolled
# before, a pass reads none of them. Its rows are marked where they lie (their ctid), so no plan
# joins back to the whole table. Answers the batch's size and where it ended.
_ENROLL = (
    """
WITH fresh AS (
    UPDATE payhooks_expectations e SET enrolled = true
    WHERE e.ctid = ANY (ARRAY(
        SELECT x.ctid FROM payhooks_expectations x
        WHERE NOT x.enrolled
          AND (x.provider, x.created_at, x.gateway_order_id)
              > (%(provider)s, %(from_at)s, %(from_id)s)
          AND (x.provider, x.created_at)
              <= (%(provider)s, now() - make_interval(secs => %(after_s)s))
        ORDER BY x.provider, x.created_at, x.gateway_order_id
        LIMIT %(batch)s
        FOR NO KEY UPDATE SKIP LOCKED))
    RETURNING e.provider, e.gateway_order_id, e.created_at
), enrolled AS (
    INSERT INTO payhooks_reconcile AS r (provider, gateway_order_id, next_attempt_at, captured)
    SELECT e.provider, e.gateway_order_id, e.created_at, paid.yes IS NOT NULL
    FROM fresh e"""
    + _PAID.format(unless="")
    + """ON CONFLICT (provider, gateway_order_id) DO UPDATE
        SET captured = r.captured OR excluded.captured
)
SELECT count(*) OVER (), created_at, gateway_order_id FROM fresh
ORDER BY created_at DESC, gateway_order_id DESC
LIMIT 1
"""
)
# The due rows of one class (no capture known, or captured) of each gateway, read in the
# index's order up to ``read`` of them. The first ``limit`` inside the window and old enough
# are leased (their next attempt pushed forward); a row found captured since it was enrolled
# moves to the captured class, and one found past the window is put back to its creation
# (below every window's reach), so no pass reads either of them again. Rows are updated where
# the read found them (their ctid), so no plan joins back to the whole table; one a second
# pass updated meanwhile is waited for and then left to it, as is one no longer due.
_CLAIM = (
    """
WITH scanned AS (
    SELECT s.* FROM unnest(%(providers)s::text[]) AS g (provider)
    CROSS JOIN LATERAL (
        SELECT r.ctid AS at, r.provider, r.gateway_order_id, r.next_attempt_at,
            e.created_at < now() - make_interval(secs => %(window_s)s) AS past,
            e.created_at > now() - make_interval(secs => %(after_s)s) AS young,
            paid.yes IS NOT NULL AS paid
        FROM payhooks_reconcile r
        JOIN payhooks_expectations e
            ON e.provider = r.provider AND e.gateway_order_id = r.gateway_order_id"""
    + _PAID.format(unless="NOT r.captured AND")
    + """WHERE r.provider = g.provider AND r.captured = %(captured)s
          AND r.next_attempt_at >= now() - make_interval(secs => %(window_s)s)
          AND r.next_attempt_at <= now()
        ORDER BY r.next_attempt_at, r.gateway_order_id
        LIMIT %(read)s
    ) s
), chosen AS (
    SELECT at FROM scanned WHERE NOT (past OR young OR paid)
    ORDER BY next_attempt_at, provider, gateway_order_id
    LIMIT %(limit)s
)
UPDATE payhooks_reconcile r SET
    next_attempt_at = CASE
        WHEN r.ctid = ANY (ARRAY(SELECT at FROM chosen)) THEN now() + %(lease)s
        WHEN r.ctid = ANY (ARRAY(SELECT at FROM scanned WHERE past)) THEN (
            SELECT e.created_at FROM payhooks_expectations e
            WHERE e.provider = r.provider AND e.gateway_order_id = r.gateway_order_id)
        ELSE r.next_attempt_at END,
    captured = r.captured OR r.ctid = ANY (ARRAY(SELECT at FROM scanned WHERE paid))
WHERE r.ctid = ANY (ARRAY(
        SELECT at FROM chosen UNION ALL SELECT at FROM scanned WHERE past OR paid))
  AND r.next_attempt_at <= now() AND r.captured = %(captured)s
RETURNING r.provider, r.gateway_order_id, r.attempts, r.next_attempt_at > now(),
    (SELECT reference FROM payhooks_expectations e
     WHERE e.provider = r.provider AND e.gateway_order_id = r.gateway_order_id)
"""
)
_ATTEMPTED = """
UPDATE payhooks_reconcile
SET attempts = attempts + 1, last_attempt_at = now(), last_error = %(error)s,
    next_attempt_at = now() + %(wait)s,
    failures = CASE WHEN %(error)s::text IS NULL THEN 0 ELSE failures + 1 END,
    failing_since = CASE WHEN %(error)s::text IS NULL THEN NULL
                         ELSE coalesce(failing_since, now()) END
WHERE provider = %(provider)s AND gateway_order_id = %(reference)s
"""
_RELEASE = """
UPDATE payhooks_reconcile SET next_attempt_at = now() + %(wait)s
WHERE provider = %(provider)s AND gateway_order_id = %(reference)s
"""
_EXPIRED = """
UPDATE payhooks_reconcile SET expired_reported_at = now()
WHERE provider = %s AND gateway_order_id = %s AND expired_reported_at IS NULL
RETURNING 1
"""
_COUNT = """
INSERT INTO payhooks_reconcile_totals AS t (provider, examined, recovered, api_errors, expired)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (provider) DO UPDATE SET
    examined = t.examined + excluded.examined,
    recovered = t.recovered + excluded.recovered,
    api_errors = t.api_errors + excluded.api_errors,
    expired = t.expired + excluded.expired
"""
TOTALS = "SELECT provider, examined, recovered, api_errors, expired FROM payhooks_reconcile_totals"
# A refusal of the credentials opens an episode (refused_since) unless one is open; the row
# says whether this statement opened it, so the operator is alerted once per episode.
_REFUSED = """
INSERT INTO payhooks_reconcile_totals AS t (provider, refused_since, refused_reason)
VALUES (%(provider)s, now(), %(reason)s)
ON CONFLICT (provider) DO UPDATE SET
    refused_since = coalesce(t.refused_since, excluded.refused_since),
    refused_reason = excluded.refused_reason
RETURNING refused_since, refused_since = now()
"""
_ACCEPTED = """
UPDATE payhooks_reconcile_totals SET refused_since = NULL, refused_reason = NULL
WHERE provider = %s AND refused_since IS NOT NULL
RETURNING 1
"""


def claim(
    conn: Connection,
    providers: Sequence[Provider],
    *,
    after_s: int,
    window_s: int,
    limit: int,
) -> list[Due]:
    """Lease up to ``limit`` due checkouts of ``providers``: the ones with no capture known
    first, then the captured ones (never a PayU txnid's). Reads about as many rows as it
    leases, plus each checkout once more in its life (enrolled, found captured, found past the
    window), whatever the window holds."""
    reach = {"after_s": after_s, "window_s": window_s, "lease": LEASE}
    names = [p.value for p in providers]
    _enroll(conn, names, reach)
    rows = _lease(conn, names, reach, captured=False, limit=limit)
    asked_when_captured = [p for p in names if p not in FINAL_WHEN_CAPTURED]
    if len(rows) < limit and asked_when_captured:
        rows += _lease(conn, asked_when_captured, reach, captured=True, limit=limit - len(rows))
    due = [
        Due(provider=Provider(p), reference=ref, attempts=n, order_reference=mine)
        for p, ref, n, _, mine in rows
    ]
    # The least asked first: a few checkouts a gateway always refuses must not come first in
    # every pass, ahead of the new ones.
    return sorted(due, key=lambda d: (d.provider.value, d.attempts, d.reference))


def _enroll(conn: Connection, providers: list[str], reach: dict[str, object]) -> None:
    for provider in providers:
        params = {**reach, "provider": provider, "batch": ENROLL_BATCH,
                  "from_at": datetime.min.replace(tzinfo=UTC), "from_id": ""}  # fmt: skip
        while (end := conn.execute(_ENROLL, params).fetchone()) is not None:
            size, params["from_at"], params["from_id"] = end
            if size < ENROLL_BATCH:
                break


def _lease(
    conn: Connection,
    providers: list[str],
    reach: dict[str, object],
    *,
    captured: bool,
    limit: int,
) -> list[Row]:
    """One class's due rows, leased in order; read again only while the last read moved rows
    out of the way (each row is moved once), so a pass ends however many there are."""
    leased: list[Row] = []
    while len(leased) < limit:
        wanted = limit - len(leased)
        params = {**reach, "providers": providers, "captured": captured, "limit": wanted,
                  "read": wanted + SWEEP_ROWS}  # fmt: skip
        rows = conn.execute(_CLAIM, params).fetchall()
        mine = [row for row in rows if row[3]]
        leased += mine
        if len(mine) == len(rows):
            break
    return leased


def backoff(attempts: int) -> timedelta:
    """One minute after the first look, doubling up to six hours: an abandoned checkout costs
    a few calls a day, a paid one is found within minutes."""
    wait: timedelta = FIRST_RETRY * 2 ** min(attempts, 16)
    return min(LONGEST_RETRY, wait)


def settled_backoff(attempts: int) -> timedelta:
    """After the gateway reported a capture for the order: an hour, doubling up to a day, so a
    second payment on it is found within hours at a few calls a week per paid checkout."""
    wait: timedelta = SETTLED_FIRST_RETRY * 2 ** min(attempts, 16)
    return min(SETTLED_LONGEST_RETRY, wait)


def attempted(
    conn: Connection, due: Due, *, error: str | None, wait: timedelta | None = None
) -> None:
    """One look at ``due`` done: with ``error``, one more failure in a row (the
    ``reconcile_failing`` alert counts them); without, its failures end."""
    conn.execute(
        _ATTEMPTED,
        {
            "provider": due.provider.value,
            "reference": due.reference,
            "error": error,
            "wait": wait if wait is not None else backoff(due.attempts),
        },
    )


def release(conn: Connection, due: Due, wait: timedelta) -> None:
    """Not asked this pass (its gateway is rate limiting or failing): due again after ``wait``."""
    conn.execute(
        _RELEASE, {"provider": due.provider.value, "reference": due.reference, "wait": wait}
    )


def mark_expired(conn: Connection, due: Due) -> bool:
    """True the first time only: an expiry is reported once, and never acted on."""
    return conn.execute(_EXPIRED, (due.provider.value, due.reference)).fetchone() is not None


def count(
    conn: Connection,
    provider: Provider,
    *,
    examined: int = 0,
    recovered: int = 0,
    api_errors: int = 0,
    expired: int = 0,
) -> None:
    """Adds a pass's figures to the gateway's totals (``payhooks_reconcile_totals``)."""
    conn.execute(_COUNT, (provider.value, examined, recovered, api_errors, expired))


def refused(conn: Connection, provider: Provider, reason: str) -> datetime | None:
    """Record that ``provider`` refused the credentials; returns the episode's start when this
    call opened it (the first refusal since they last worked), else None."""
    row = conn.execute(_REFUSED, {"provider": provider.value, "reason": reason}).fetchone()
    return row[0] if row is not None and row[1] else None


def accepted(conn: Connection, provider: Provider) -> bool:
    """``provider`` answered with the credentials: an open refusal episode ends (True)."""
    return conn.execute(_ACCEPTED, (provider.value,)).fetchone() is not None
