"""Which expected checkouts reconciliation asks about, and what it remembers between passes.

A checkout is a gateway order the merchant told payhooks it expects (``payhooks.expect``). It
is due when it is older than the configured age and younger than the window, and its next
attempt time has come; whether the merchant's order is paid does not matter: a second
payment, on another gateway, must be found and flagged like a webhook's. Nor does a capture
of its own end it at Razorpay or Cashfree: their order can carry several payments (a retry, a
second tab, a late UPI), so a captured checkout (one with a capture in ``payhooks_payments``)
is still asked, at intervals from an hour growing to a day (``settled_backoff``), until the
window ends; never before the ones with no capture, which a pass asks first. A PayU txnid is
one payment, so a captured PayU checkout is final. Nothing is asked about past the window. A
pass
claims due checkouts by pushing their next attempt time forward by a lease, in one statement:
a second worker's claim waits on the first's row and then finds it no longer due, so two
workers never ask about the same checkout at once, and a worker that dies mid-pass only
delays its checkouts by the lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from payhooks.db import Connection
from payhooks.events import Provider

LEASE = timedelta(minutes=10)
# A pass starts no checkout after this long, so every one it asks about is still its own: the
# lease outlives the last call by a full call's timeout at least.
PASS_BUDGET = timedelta(minutes=4)
FIRST_RETRY = timedelta(minutes=1)
LONGEST_RETRY = timedelta(hours=6)
SETTLED_FIRST_RETRY = timedelta(hours=1)
SETTLED_LONGEST_RETRY = timedelta(days=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Due:
    provider: Provider
    reference: str
    """The gateway's order id."""
    order_reference: str
    """The merchant's own reference for it (``expect``'s ``reference``)."""
    attempts: int


_CLAIM = """
WITH due AS (
    SELECT e.provider, e.gateway_order_id
    FROM payhooks_expectations e
    LEFT JOIN payhooks_reconcile r
        ON r.provider = e.provider AND r.gateway_order_id = e.gateway_order_id
    CROSS JOIN LATERAL (
        SELECT EXISTS (
            SELECT 1 FROM processed_webhooks w
            JOIN payhooks_payments p ON p.provider = w.provider AND p.payment_id = w.payment_id
            WHERE w.provider = e.provider AND w.merchant_ref = e.gateway_order_id
              AND p.kind = 'payment_captured') AS yes
    ) captured
    WHERE e.provider = ANY(%(providers)s)
      AND e.created_at <= now() - make_interval(secs => %(after_s)s)
      AND e.created_at >= now() - make_interval(secs => %(window_s)s)
      AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= now())
      AND NOT (e.provider = 'payu' AND captured.yes)
    ORDER BY captured.yes, coalesce(r.next_attempt_at, e.created_at), e.provider,
        e.gateway_order_id
    LIMIT %(limit)s
)
INSERT INTO payhooks_reconcile AS r (provider, gateway_order_id, next_attempt_at)
SELECT provider, gateway_order_id, now() + %(lease)s FROM due
ON CONFLICT (provider, gateway_order_id) DO UPDATE
    SET next_attempt_at = excluded.next_attempt_at
    WHERE r.next_attempt_at <= now()
RETURNING r.provider, r.gateway_order_id, r.attempts,
    (SELECT reference FROM payhooks_expectations e
     WHERE e.provider = r.provider AND e.gateway_order_id = r.gateway_order_id)
"""
_ATTEMPTED = """
UPDATE payhooks_reconcile
SET attempts = attempts + 1, last_attempt_at = now(), last_error = %(error)s,
    next_attempt_at = now() + %(wait)s
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
    params = {
        "providers": [p.value for p in providers],
        "after_s": after_s,
        "window_s": window_s,
        "limit": limit,
        "lease": LEASE,
    }
    rows = conn.execute(_CLAIM, params).fetchall()
    due = [
        Due(provider=Provider(p), reference=ref, attempts=n, order_reference=mine)
        for p, ref, n, mine in rows
    ]
    # The least asked first: a few checkouts a gateway always refuses must not come first in
    # every pass, ahead of the new ones.
    return sorted(due, key=lambda d: (d.provider.value, d.attempts, d.reference))


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
    conn.execute(_COUNT, (provider.value, examined, recovered, api_errors, expired))


def refused(conn: Connection, provider: Provider, reason: str) -> datetime | None:
    """Record that ``provider`` refused the credentials; returns the episode's start when this
    call opened it (the first refusal since they last worked), else None."""
    row = conn.execute(_REFUSED, {"provider": provider.value, "reason": reason}).fetchone()
    return row[0] if row is not None and row[1] else None


def accepted(conn: Connection, provider: Provider) -> bool:
    """``provider`` answered with the credentials: an open refusal episode ends (True)."""
    return conn.execute(_ACCEPTED, (provider.value,)).fetchone() is not None
