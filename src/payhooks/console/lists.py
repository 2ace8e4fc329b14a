"""Lists an operator filters: every webhook request the delivery log noted, and the payments
the core knows (applied, or parked for their amount), by gateway, answer or status, amount
mismatch and time range, a page at a time, newest first (docs/console.md, "Lists").

Everything here reads the core's tables, so the lists work in a merchant's own app as in the
reference shop. A filter is the page's query string, so a filtered view is a link; the same
query with ``.csv`` is its export (``payhooks.console.export``). A time range is entered and
shown in the console's zone; without a start it is the 24 hours before its end, so a list
never reads the whole log by accident.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from urllib.parse import urlencode

from payhooks.events import Provider
from payhooks.gateways import title_of
from payhooks.operations.alarms import UNCONFIRMED_WAIT, Alarm, AlarmKind
from payhooks.operations.deliverylog import UNKNOWN_GATEWAY
from payhooks.plumbing.db import Connection, shaped_rows

PAGE = 100
"""Rows on a page of a list."""
DEFAULT_SPAN = timedelta(hours=24)
"""A range with no start: this long before its end."""
MAX_TIME_CHARS = 40
PROVIDERS = tuple(p.value for p in Provider)
LOGGED_GATEWAYS = (*PROVIDERS, UNKNOWN_GATEWAY)
"""What the delivery log files a line under: a gateway payhooks knows, or ``unknown``."""

ANSWERS = {
    "applied": "applied",
    "waiting": "waiting for the status API (confirming)",
    "duplicate": "duplicate",
    "parked": "parked",
    "signature": "signature refused (401)",
    "refused": "refused (other 4xx)",
    "failed": "failed (5xx)",
}
"""The classes of answer the health chart stacks (``payhooks.console.health.Answer``), by the
name a filter uses."""

# A line's class, as the health chart counts it.
_CLASS = """CASE
    WHEN d.status >= 500 THEN 'failed'
    WHEN d.outcome = 'signature_mismatch' THEN 'signature'
    WHEN d.status >= 400 THEN 'refused'
    WHEN d.outcome = 'duplicate' THEN 'duplicate'
    WHEN d.outcome = 'parked' THEN 'parked'
    WHEN d.status < 300 AND d.outcome IN ('processed', 'ignored') THEN 'applied'
    WHEN d.status < 300 AND d.outcome = 'confirming' THEN 'waiting'
    ELSE 'other' END"""

STATUSES = {
    "authorized": "authorised",
    "captured": "captured",
    "mismatch": "parked for its amount",
    "settled": "amount mismatch settled",
}
"""A payment's status as the core knows it, by the name a filter uses."""


class BadFilter(ValueError):
    """A filter the lists cannot take: says which field and why, never echoing it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """A time range: ``start`` (None: no lower bound) up to, not including, ``end``."""

    start: datetime | None
    end: datetime
    end_given: bool


def moment(text: str, zone: tzinfo, field: str) -> datetime | None:
    """A time as typed in a form (``2026-12-03T14:30``, in ``zone``) or as a link carries it
    (ISO 8601 with its offset); None for nothing typed."""
    text = text.strip()
    if not text:
        return None
    example = "2026-12-03T14:30"
    if len(text) > MAX_TIME_CHARS:
        raise BadFilter(f"The time {field!r} is too long: write it as {example}.")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise BadFilter(f"The time {field!r} is not a time: write it as {example}.") from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=zone)
    return _within_calendar(parsed, field)


EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
"""The times a list filter takes: far enough from the calendar's ends (years 1 and 9999) that
a window's span, an offset or the console's zone never carries one past them."""


def _within_calendar(at: datetime, field: str) -> datetime:
    try:
        inside = EARLIEST <= at.astimezone(UTC) < LATEST
    except OverflowError:  # an offset carried it past year 1 or 9999
        inside = False
    if not inside:
        raise BadFilter(f"The time {field!r} is not one payments happen at: from 1970 to 9998.")
    return at


def window(
    start: str, end: str, zone: tzinfo, now: datetime, *, span: timedelta | None = DEFAULT_SPAN
) -> Window:
    """The range typed: an end of now when none is, a start ``span`` before the end."""
    until = moment(end, zone, "to")
    since = moment(start, zone, "from")
    stop = until or now
    if since is None and span is not None:
        since = stop - span
    if since is not None and since >= stop:
        raise BadFilter("The time 'from' must come before the time 'to'.")
    return Window(start=since, end=stop, end_given=until is not None)


def gateway_of(text: str, known: tuple[str, ...]) -> str | None:
    return choice_of(text, known, "gateway")


def choice_of(text: str, choices: Collection[str], field: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    if text not in choices:
        raise BadFilter(f"The {field} is not one the console knows: one of {', '.join(choices)}.")
    return text


def exact(at: datetime) -> str:
    """A moment as a link carries it: ISO 8601 with its offset, to the microsecond."""
    return at.isoformat()


@dataclass(frozen=True, slots=True, kw_only=True)
class Filter:
    """A list's filter: a gateway (None: every one) and a time range, and what else its list
    is filtered by (``own_fields``)."""

    gateway: str | None = None
    window: Window

    def own_fields(self) -> dict[str, str]:
        """The form's fields besides the gateway and the range, as it sends them."""
        return {}

    def query(self, **more: Any) -> str:
        """The filter as a query string, its range exact: the same rows at any later moment."""
        every = {
            "gateway": self.gateway or "",
            **self.own_fields(),
            "from": exact(self.window.start) if self.window.start else "",
            "to": exact(self.window.end),
            **more,
        }
        return urlencode({k: v for k, v in every.items() if v not in ("", None)})

    def params(self) -> dict[str, Any]:
        """The gateway and the range as a list's statement takes them."""
        return {"start": self.window.start, "end": self.window.end, "provider": self.gateway}


def typed(at: datetime | None, zone: tzinfo) -> str:
    """A moment as a ``datetime-local`` field shows it, in the console's zone."""
    if at is None:
        return ""
    local = at.astimezone(zone)
    return f"{local:%Y-%m-%dT%H:%M:%S}" if local.second else f"{local:%Y-%m-%dT%H:%M}"


# --- deliveries ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryFilter(Filter):
    answer: str | None = None
    mismatch: bool = False
    waiting: bool = False
    """Only callbacks answered ``confirming`` that still wait for their status API."""

    def own_fields(self) -> dict[str, str]:
        return {
            "outcome": self.answer or "",
            "amount": "mismatch" if self.mismatch else "",
            "confirmation": "waiting" if self.waiting else "",
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """A line of the delivery log, with what the claim and the mismatches know of it."""

    id: int
    received_at: datetime
    provider: str
    status: int
    outcome: str
    answer: str
    verified: bool
    event_id: str | None
    event_type: str | None
    payment_id: str | None
    merchant_ref: str | None
    body_mismatch: bool
    body_bytes: int
    detail: str | None
    duration_ms: float
    repeats: int
    stored: bool
    """Its delivery key has a record (``processed_webhooks``): its page opens."""
    expected_paise: int | None
    paid_paise: int | None
    """Both set: the payment was not the amount expected, and was parked for it."""


# A line answered ``confirming`` whose callback still waits for its status API
# (``payhooks.intake.confirmations``): recorded under the line's key, or under a key made from
# it, which the line names too: ``<key>:<its body's hash, 16 hex>`` when posted again under the
# key of one refuted, beside the first post (``first_event_id``) when another attempt. Each is
# a read of an index (the key's, or payhooks_confirmations_attempts of those waiting).
_STILL_WAITING = """d.outcome = 'confirming' AND (
    EXISTS (SELECT 1 FROM payhooks_confirmations c
            WHERE c.provider = d.provider AND c.verdict IS NULL
              AND c.event_id IN (d.event_id, d.event_id || ':' || left(d.body_sha256, 16)))
    OR EXISTS (SELECT 1 FROM payhooks_confirmations c
               WHERE c.provider = d.provider AND c.first_event_id = d.event_id
                 AND c.verdict IS NULL))"""

_DELIVERIES = f"""
SELECT d.id, d.received_at, d.provider, d.status, d.outcome, {_CLASS} AS answer, d.verified,
       d.event_id, d.event_type, d.payment_id, d.merchant_ref, d.mismatch AS body_mismatch,
       d.body_bytes, d.detail, d.duration_ms, d.repeats,
       EXISTS (SELECT 1 FROM processed_webhooks w
               WHERE w.provider = d.provider AND w.event_id = d.event_id) AS stored,
       m.expected_paise, m.paid_paise
FROM payhooks_deliveries d
LEFT JOIN payhooks_amount_mismatches m ON m.provider = d.provider AND m.event_id = d.event_id
WHERE d.received_at < %(end)s
  AND (%(start)s::timestamptz IS NULL OR d.received_at >= %(start)s)
  AND (%(provider)s::text IS NULL OR d.provider = %(provider)s)
  AND (%(answer)s::text IS NULL OR {_CLASS} = %(answer)s)
  AND (NOT %(mismatch)s OR m.event_id IS NOT NULL)
  AND (NOT %(waiting)s OR {_STILL_WAITING})
  AND (%(before)s::bigint IS NULL OR (d.received_at, d.id) < (
        SELECT received_at, id FROM payhooks_deliveries WHERE id = %(before)s))
ORDER BY d.received_at DESC, d.id DESC LIMIT %(limit)s
"""


def deliveries(
    conn: Connection, chosen: DeliveryFilter, *, before: int | None = None, limit: int = PAGE
) -> list[Line]:
    """The newest lines the filter takes, older than line ``before``."""
    params = {
        **chosen.params(),
        "answer": chosen.answer,
        "mismatch": chosen.mismatch,
        "waiting": chosen.waiting,
        "before": before,
        "limit": limit,
    }
    return shaped_rows(conn, Line, _DELIVERIES, params)


# --- payments --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PaymentFilter(Filter):
    status: str | None = None
    mismatch: bool = False
    needs_refund: bool = False

    def own_fields(self) -> dict[str, str]:
        return {
            "status": self.status or "",
            "amount": "mismatch" if self.mismatch else "",
            "refund": "needed" if self.needs_refund else "",
        }


SETTLEMENT_SPAN = timedelta(days=31)
"""The settlements list with no start: this long before its end (a payout is daily)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SettlementFilter(Filter):
    """The settlements list's filter: a gateway and the time payouts were made."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Payment:
    """A payment as a list shows it: by default one that reached the app's handler
    (``payhooks_payments``) or was parked for its amount (``payhooks_amount_mismatches``),
    what the core knows of every payment; an app's own source may say more (its flags)."""

    at: datetime
    """When it was applied or recorded, or found not to be the amount expected."""
    key: str
    """Orders payments of one instant, for paging."""
    provider: str
    payment_id: str | None
    gateway_order_id: str | None
    event_id: str | None
    status: str
    reconciled: bool | None
    expected_paise: int | None
    expected_currency: str | None
    paid_paise: int | None
    paid_currency: str | None
    resolution: str | None
    flags: Sequence[str] = ()
    needs_refund: bool = False
    stored: bool = False
    """Its delivery (``event_id``) still has a record (``processed_webhooks``): its page opens.
    The purge takes it after the window; the payment stays (a capture's record for a year)."""

    @property
    def by(self) -> str:
        if self.reconciled is None:
            return ""
        return "reconciliation" if self.reconciled else "webhook"

    @property
    def cursor(self) -> str:
        return f"{exact(self.at)}|{self.key}"


# Each branch of the payments list gives these columns, with the filter's parameters.
APPLIED = """
    SELECT p.applied_at AS at, 'a ' || p.provider || ' ' || p.event_id AS key, p.provider,
           p.payment_id, p.gateway_order_id, p.event_id,
           CASE p.kind WHEN 'payment_captured' THEN 'captured'
                       WHEN 'payment_authorized' THEN 'authorized' ELSE p.kind END AS status,
           p.reconciled, coalesce(e.amount_paise, p.expected_paise) AS expected_paise,
           coalesce(e.currency, p.expected_currency) AS expected_currency,
           p.paid_paise, p.currency AS paid_currency, NULL::text AS resolution,
           '{}'::text[] AS flags, false AS needs_refund
    FROM payhooks_payments p
    LEFT JOIN payhooks_expectations e
           ON e.provider = p.provider AND e.gateway_order_id = p.gateway_order_id
    WHERE NOT %(mismatch)s AND p.applied_at < %(end)s
      AND (%(start)s::timestamptz IS NULL OR p.applied_at >= %(start)s)
      AND (%(provider)s::text IS NULL OR p.provider = %(provider)s)"""


def mismatched(*, refunded_until_settled: bool = False) -> str:
    """Payments parked for their amount: each needs a person, who refunds or collects the
    difference (or corrects the expectation and replays it). ``refunded_until_settled``:
    the app's policy refunds them, so each needs a refund until a person settles it."""
    needs_refund = "m.resolved_at IS NULL" if refunded_until_settled else "false"
    return f"""
    SELECT m.found_at, 'm ' || m.provider || ' ' || m.event_id, m.provider, m.payment_id,
           m.gateway_order_id, m.event_id,
           CASE WHEN m.resolved_at IS NULL THEN 'mismatch' ELSE 'settled' END,
           starts_with(m.event_id, 'reconcile:'), m.expected_paise, m.expected_currency,
           m.paid_paise, m.paid_currency, m.resolution, '{{}}'::text[], {needs_refund}
    FROM payhooks_amount_mismatches m
    WHERE m.found_at < %(end)s
      AND (%(start)s::timestamptz IS NULL OR m.found_at >= %(start)s)
      AND (%(provider)s::text IS NULL OR m.provider = %(provider)s)"""


MISMATCHED = mismatched()
"""The core's: it does not say which need a refund."""


def paged(*branches: str) -> str:
    """The payments of ``branches``, filtered by status, a page of them newest first, each
    saying whether its delivery is still stored. A row whose branch names no delivery (an
    app's own payments) takes its delivery, and whether a webhook or reconciliation brought it,
    from the payment's record (``payhooks_payments``, its capture's first), where it has one.
    Both are asked of the page's rows alone, by key."""
    return f"""
WITH listed AS ({" UNION ALL ".join(branches)}),
page AS (
    SELECT * FROM listed
    WHERE (%(status)s::text IS NULL OR status = %(status)s)
      AND (NOT %(needs_refund)s OR needs_refund)
      AND (%(before_at)s::timestamptz IS NULL OR (at, key) < (%(before_at)s, %(before_key)s))
    ORDER BY at DESC, key DESC LIMIT %(limit)s),
told AS (
    SELECT page.at, page.key, page.provider, page.payment_id, page.gateway_order_id,
           coalesce(page.event_id, r.event_id) AS event_id, page.status,
           coalesce(page.reconciled, r.reconciled) AS reconciled, page.expected_paise,
           page.expected_currency, page.paid_paise, page.paid_currency, page.resolution,
           page.flags, page.needs_refund
    FROM page
    LEFT JOIN LATERAL (
        SELECT r.event_id, r.reconciled FROM payhooks_payments r
        WHERE page.event_id IS NULL AND r.provider = page.provider
          AND r.payment_id = page.payment_id
        ORDER BY r.kind = 'payment_captured' DESC LIMIT 1) r ON true)
SELECT told.*, EXISTS (SELECT 1 FROM processed_webhooks w
                       WHERE w.provider = told.provider AND w.event_id = told.event_id)
               AS stored
FROM told
ORDER BY at DESC, key DESC
"""


_PAYMENTS = paged(APPLIED, MISMATCHED)


def cursor_of(text: str) -> tuple[datetime, str] | None:
    """A payments page's ``before``: the last row's time and key, as ``Payment.cursor``."""
    if not text:
        return None
    at, _, key = text.partition("|")
    try:
        moment_at = datetime.fromisoformat(at)
    except ValueError:
        raise BadFilter("The page to continue from is not one the console made.") from None
    if moment_at.tzinfo is None or not key:
        raise BadFilter("The page to continue from is not one the console made.")
    try:
        return _within_calendar(moment_at, "before"), key
    except BadFilter:  # no row the console listed has such a time
        raise BadFilter("The page to continue from is not one the console made.") from None


def read_payments(
    conn: Connection,
    sql: str,
    chosen: PaymentFilter,
    before: tuple[datetime, str] | None,
    limit: int,
) -> list[Payment]:
    """A page of ``paged`` statement ``sql``, for the filter."""
    params = {
        **chosen.params(),
        "status": chosen.status,
        "mismatch": chosen.mismatch,
        "needs_refund": chosen.needs_refund,
        "before_at": before[0] if before else None,
        "before_key": before[1] if before else None,
        "limit": limit,
    }
    return shaped_rows(conn, Payment, sql, params)


def core_payments(
    conn: Connection,
    chosen: PaymentFilter,
    before: tuple[datetime, str] | None = None,
    limit: int = PAGE,
) -> list[Payment]:
    """The newest payments the filter takes, older than ``before`` (a ``Payment.cursor``)."""
    return read_payments(conn, _PAYMENTS, chosen, before, limit)


ReadPayments = Callable[
    [Connection, PaymentFilter, "tuple[datetime, str] | None", int], list[Payment]
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Payments:
    """Where the payments list reads: the core's tables, or the app's own payments."""

    read: ReadPayments
    statuses: Mapping[str, str]
    """The statuses it tells apart, by the name a filter uses."""
    needs_refund: str | None = None
    """What "needs a refund" means to it; None: it does not know (the filter is not shown)."""


CORE_PAYMENTS = Payments(read=core_payments, statuses=STATUSES)
"""The core does not know which payments need a refund (an amount mismatch needs a person,
who may collect the difference instead): the app's own payments may."""


# --- from the home page's banners ------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Shown:
    """A link to a filtered list, below the console's root."""

    address: str
    label: str


NOTED_BEFORE = timedelta(minutes=1)
"""A callback's log line is noted as its request arrives, a moment before its claim records
it waiting: the list of an unconfirmed banner's callbacks starts this long before the oldest
(only those still waiting are listed, whatever the range)."""


def of_alarm(alarm: Alarm, now: datetime) -> Shown | None:
    """The deliveries a banner is about: a gateway's 5xx answers over a day (the hourly and the
    slow failure alike), its signature failures of the last hour, its callbacks still waiting
    for the status API past ``UNCONFIRMED_WAIT``. None for a refuted callback: the log answered
    it 200, and its story is on its order's page."""
    fields: dict[str, str] = {}
    if alarm.kind is AlarmKind.FAILING:
        answer, since, what = "failed", now - DEFAULT_SPAN, "5xx answers, last 24 hours"
    elif alarm.kind is AlarmKind.FORGED:
        answer, since, what = "signature", now - timedelta(hours=1), "signature failures"
    elif alarm.kind is AlarmKind.UNCONFIRMED and alarm.since is not None:
        answer, since = "waiting", alarm.since - NOTED_BEFORE
        what = "callbacks waiting for the status API"
        fields = {"confirmation": "waiting", "to": exact(now - UNCONFIRMED_WAIT)}
    else:
        return None
    query = urlencode(
        {"gateway": alarm.provider, "outcome": answer, **fields, "from": exact(since)}
    )
    return Shown(address=f"/deliveries?{query}", label=f"See {title_of(alarm.provider)}'s {what}")


__all__ = [
    "ANSWERS",
    "APPLIED",
    "CORE_PAYMENTS",
    "MISMATCHED",
    "PAGE",
    "STATUSES",
    "BadFilter",
    "DeliveryFilter",
    "Filter",
    "Line",
    "Payment",
    "PaymentFilter",
    "Payments",
    "SettlementFilter",
    "Shown",
    "Window",
    "core_payments",
    "cursor_of",
    "deliveries",
    "mismatched",
    "of_alarm",
    "paged",
    "read_payments",
    "window",
]
