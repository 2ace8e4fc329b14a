"""Settlements as people read them: the payouts of a time range with their totals and what
their lines add up to, one payout's lines, a payment's settlement (its timeline), the flags
(``payhooks.settlements.flags``) one by one, and the report lines payhooks could not read.
What the console's Settlements page, its CSV, the Django admin's page and ``payhooks
settlements`` show, read once here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, TypeVar

from payhooks.plumbing.db import Connection, shaped_rows
from payhooks.settlements.flags import UNMATCHED

PAGE = 100
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Payout:
    """One settlement with what its recorded lines add up to. ``differs``: the gateway
    states the payout's amount and it is not the sum of the lines recorded for it (a report
    not fetched whole yet, or a payout to look at)."""

    provider: str
    settlement_id: str
    state: str
    status: str | None
    amount_paise: int | None
    fees_paise: int | None
    tax_paise: int | None
    currency: str | None
    utr: str | None
    settled_at: datetime | None
    recorded_at: datetime
    lines: int
    lines_net_paise: int
    payments: int
    refunds: int
    adjustments: int
    unmatched: int

    @property
    def differs(self) -> bool:
        """The gateway's total is known, lines are recorded, and they do not agree."""
        return (
            self.amount_paise is not None
            and self.lines > 0
            and (self.amount_paise != self.lines_net_paise)
        )

    @property
    def cursor(self) -> tuple[datetime, str, str]:
        """Where the next page of the list starts."""
        return (self.settled_at or self.recorded_at, self.provider, self.settlement_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Totals:
    """A range's payouts added up: what the gateways paid out (as they state it), their
    fees and tax, and what the recorded lines add up to."""

    settlements: int
    amount_paise: int
    fees_paise: int
    tax_paise: int
    lines_net_paise: int
    unmatched: int
    differing: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One line of a payout, with the payout's UTR, state and time (a payment's timeline
    shows its lines with these)."""

    provider: str
    settlement_id: str
    entry_id: str
    kind: str
    entry_type: str
    payment_id: str | None
    gateway_order_id: str | None
    amount_paise: int
    fee_paise: int
    tax_paise: int
    net_paise: int
    currency: str | None
    occurred_at: datetime | None
    matched: bool | None
    state: str
    utr: str | None
    settled_at: datetime | None
    recorded_at: datetime
    """When payhooks first recorded the payout."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Unsettled:
    """A capture flagged: its gateway had not settled it by ``due_at``."""

    provider: str
    payment_id: str
    gateway_order_id: str | None
    captured_at: datetime
    due_at: datetime
    flagged_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class UnreadableLine:
    """A report line payhooks could not read, kept for a person: why, the line as the gateway
    answered it (its first ``RAW_CHARS`` characters), what it names as far as it reads, and
    when a fetch first and last met it."""

    provider: str
    settlement_id: str | None
    entry_id: str | None
    payment_id: str | None
    reason: str
    raw: str
    first_seen_at: datetime
    seen_at: datetime


# A payout with its lines added up: of a range (those whose time is not known yet by when they
# were first recorded), newest first, a page after a cursor; or one, by its id.
_PAYOUT = (
    """
SELECT s.provider, s.settlement_id, s.state, s.status, s.amount_paise, s.fees_paise,
       s.tax_paise, s.currency, s.utr, s.settled_at, s.recorded_at,
       count(l.entry_id)::int AS lines, coalesce(sum(l.net_paise), 0)::bigint AS lines_net_paise,
       count(*) FILTER (WHERE l.kind = 'payment')::int AS payments,
       count(*) FILTER (WHERE l.kind = 'refund')::int AS refunds,
       count(*) FILTER (WHERE l.kind = 'adjustment')::int AS adjustments,
       count(*) FILTER (WHERE """
    + UNMATCHED
    + """)::int AS unmatched
FROM payhooks_settlements s
LEFT JOIN payhooks_settlement_lines l
       ON l.provider = s.provider AND l.settlement_id = s.settlement_id
"""
)
_ONE = (
    _PAYOUT
    + """WHERE s.provider = %(provider)s AND s.settlement_id = %(settlement_id)s
GROUP BY s.provider, s.settlement_id
"""
)
_PAYOUTS = (
    _PAYOUT
    + """WHERE coalesce(s.settled_at, s.recorded_at) >= %(start)s
  AND coalesce(s.settled_at, s.recorded_at) < %(end)s
  AND (%(provider)s::text IS NULL OR s.provider = %(provider)s)
  AND (%(at)s::timestamptz IS NULL
       OR (coalesce(s.settled_at, s.recorded_at), s.provider, s.settlement_id)
          < (%(at)s, %(after_provider)s, %(after_id)s))
GROUP BY s.provider, s.settlement_id
ORDER BY coalesce(s.settled_at, s.recorded_at) DESC, s.provider DESC, s.settlement_id DESC
LIMIT %(limit)s
"""
)
_TOTALS = (
    "SELECT count(*)::int AS settlements, coalesce(sum(amount_paise), 0)::bigint AS amount_paise,"
    " coalesce(sum(fees_paise), 0)::bigint AS fees_paise,"
    " coalesce(sum(tax_paise), 0)::bigint AS tax_paise,"
    " coalesce(sum(lines_net_paise), 0)::bigint AS lines_net_paise,"
    " coalesce(sum(unmatched), 0)::int AS unmatched,"
    " count(*) FILTER (WHERE amount_paise IS NOT NULL AND lines > 0"
    " AND amount_paise <> lines_net_paise)::int AS differing"
    " FROM (" + _PAYOUTS.replace("LIMIT %(limit)s", "") + ") payouts"
)
# A line's payment is known when it was recorded, or applied since (flags.UNMATCHED).
_ENTRY = (
    """
SELECT l.provider, l.settlement_id, l.entry_id, l.kind, l.entry_type, l.payment_id,
       l.gateway_order_id, l.amount_paise, l.fee_paise, l.tax_paise, l.net_paise, l.currency,
       l.occurred_at, CASE WHEN l.matched IS NULL THEN NULL ELSE NOT """
    + UNMATCHED
    + """ END AS matched,
       s.state, s.utr, s.settled_at, s.recorded_at
FROM payhooks_settlement_lines l
JOIN payhooks_settlements s ON s.provider = l.provider AND s.settlement_id = l.settlement_id
"""
)
_LINES = (
    _ENTRY
    + """
WHERE l.provider = %(provider)s AND l.settlement_id = %(settlement_id)s
ORDER BY l.kind, l.entry_id LIMIT %(limit)s
"""
)
# Through payhooks_settlement_lines_payment.
_OF_PAYMENTS = (
    _ENTRY
    + """
WHERE l.provider = %(provider)s AND l.payment_id = ANY(%(payments)s)
ORDER BY s.settled_at NULLS LAST, l.entry_id
"""
)
_UNMATCHED_LINES = (
    _ENTRY
    + """
WHERE """
    + UNMATCHED
    + """ AND (%(provider)s::text IS NULL OR l.provider = %(provider)s)
ORDER BY l.recorded_at DESC, l.entry_id LIMIT %(limit)s
"""
)
_UNSETTLED = """
SELECT provider, payment_id, gateway_order_id, captured_at, due_at, flagged_at
FROM payhooks_unsettled WHERE (%(provider)s::text IS NULL OR provider = %(provider)s)
ORDER BY captured_at, provider, payment_id LIMIT %(limit)s
"""
_UNSETTLED_OF = """
SELECT provider, payment_id, gateway_order_id, captured_at, due_at, flagged_at
FROM payhooks_unsettled WHERE provider = %(provider)s AND payment_id = ANY(%(payments)s)
ORDER BY captured_at
"""
_UNREADABLE = """
SELECT provider, settlement_id, entry_id, payment_id, reason, raw, first_seen_at, seen_at
FROM payhooks_settlement_unreadable WHERE (%(provider)s::text IS NULL OR provider = %(provider)s)
ORDER BY first_seen_at DESC, provider, digest LIMIT %(limit)s
"""
# Every line of the payouts of a range (the CSV), payout by payout as the list orders them.
_LINES_IN = (
    _ENTRY
    + """
WHERE coalesce(s.settled_at, s.recorded_at) >= %(start)s
  AND coalesce(s.settled_at, s.recorded_at) < %(end)s
  AND (%(provider)s::text IS NULL OR s.provider = %(provider)s)
  AND (%(at)s::timestamptz IS NULL
       OR (coalesce(s.settled_at, s.recorded_at), s.provider, s.settlement_id, l.entry_id,
           l.entry_type)
          < (%(at)s, %(after_provider)s, %(after_id)s, %(after_entry)s, %(after_type)s))
ORDER BY coalesce(s.settled_at, s.recorded_at) DESC, s.provider DESC, s.settlement_id DESC,
         l.entry_id DESC, l.entry_type DESC
LIMIT %(limit)s
"""
)


def payouts(
    conn: Connection,
    start: datetime,
    end: datetime,
    *,
    provider: str | None = None,
    after: tuple[datetime, str, str] | None = None,
    limit: int = PAGE,
) -> list[Payout]:
    """The payouts of ``[start, end)``, newest first, at most ``limit``, after ``after``
    (a ``Payout.cursor``)."""
    params = _range(start, end, provider, after) | {"limit": limit}
    return shaped_rows(conn, Payout, _PAYOUTS, params)


def payout(conn: Connection, provider: str, settlement_id: str) -> Payout | None:
    """One payout with its lines added up, None when it is not recorded (only its lines
    may be, from a report read before its payout was)."""
    params = {"provider": provider, "settlement_id": settlement_id}
    found = shaped_rows(conn, Payout, _ONE, params)
    return found[0] if found else None


def totals(
    conn: Connection, start: datetime, end: datetime, *, provider: str | None = None
) -> Totals:
    """The payouts of ``[start, end)`` added up."""
    return shaped_rows(conn, Totals, _TOTALS, _range(start, end, provider, None))[0]


def lines(
    conn: Connection, provider: str, settlement_id: str, *, limit: int = 10_000
) -> list[Entry]:
    """One payout's lines, payments first."""
    params = {"provider": provider, "settlement_id": settlement_id, "limit": limit}
    return shaped_rows(conn, Entry, _LINES, params)


def of_payments(conn: Connection, provider: str, payment_ids: Sequence[str]) -> list[Entry]:
    """The lines naming these payments (their captures, their refunds), oldest payout first."""
    return _naming(conn, Entry, _OF_PAYMENTS, provider, payment_ids)


def unmatched_lines(
    conn: Connection, *, provider: str | None = None, limit: int = PAGE
) -> list[Entry]:
    """Lines naming a payment payhooks does not know (``flags.UNMATCHED``: not when they were
    recorded, nor applied since), newest first."""
    return shaped_rows(conn, Entry, _UNMATCHED_LINES, {"provider": provider, "limit": limit})


def unsettled_of(conn: Connection, provider: str, payment_ids: Sequence[str]) -> list[Unsettled]:
    """The flags on these payments (a timeline's)."""
    return _naming(conn, Unsettled, _UNSETTLED_OF, provider, payment_ids)


def lines_in(
    conn: Connection,
    start: datetime,
    end: datetime,
    *,
    provider: str | None = None,
    after: Entry | None = None,
    limit: int = PAGE,
) -> list[Entry]:
    """Every line of the payouts of ``[start, end)``, in the list's order, after ``after``."""
    found = None
    if after is not None:
        found = (after.settled_at or after.recorded_at, after.provider, after.settlement_id)
    params = _range(start, end, provider, found) | {
        "after_entry": None if after is None else after.entry_id,
        "after_type": None if after is None else after.entry_type,
        "limit": limit,
    }
    return shaped_rows(conn, Entry, _LINES_IN, params)


def unsettled(
    conn: Connection, *, provider: str | None = None, limit: int = PAGE
) -> list[Unsettled]:
    """Captures flagged unsettled, oldest first."""
    return shaped_rows(conn, Unsettled, _UNSETTLED, {"provider": provider, "limit": limit})


def list_asked(
    asked: Mapping[str, bool], start: str | None = None, end: str | None = None
) -> str | None:
    """The one list a command's options ask for (``{"unsettled": True, ...}``: ``--unsettled``,
    ``--unmatched``, ``--unreadable``), None for a fetch of the days ``--from`` and ``--to``
    name. Every door reads its options here, so all refuse alike: ``ValueError`` says why two
    lists at once, or a list beside ``--from`` or ``--to``, are refused (a list prints every
    flag, whatever the days)."""
    named = [f"--{name}" for name, given in asked.items() if given]
    if len(named) > 1:
        raise ValueError(f"{', '.join(named[:-1])} and {named[-1]} print one list each: give one")
    if named and (start is not None or end is not None):
        raise ValueError(
            f"{named[0]} prints every one flagged, whatever the days: --from and --to name the "
            "days to fetch; give one or the other"
        )
    return named[0].removeprefix("--") if named else None


def catch_up_alone(
    asked: Mapping[str, bool], start: str | None = None, end: str | None = None
) -> None:
    """``--catch-up`` (``payhooks.reconcile.settling.catching_up``) names its own days, and
    prints no list: every door refuses it beside ``--from``, ``--to`` or a list alike, with
    ``ValueError`` saying why."""
    named = [f"--{name}" for name, given in asked.items() if given]
    named += [option for option, day in (("--from", start), ("--to", end)) if day is not None]
    if named:
        raise ValueError(
            "--catch-up fetches each gateway from the day after its last day read whole up to "
            f"today: give it without {', '.join(named)}"
        )


def flag_list(conn: Connection, name: str, *, limit: int = 10_000) -> list[dict[str, Any]]:
    """The flag list ``list_asked`` named, each row a mapping, as the commands print it."""
    return [asdict(row) for row in _FLAG_LISTS[name](conn, limit=limit)]


def unreadable(
    conn: Connection, *, provider: str | None = None, limit: int = PAGE
) -> list[UnreadableLine]:
    """The report lines payhooks could not read, the newest met first."""
    return shaped_rows(conn, UnreadableLine, _UNREADABLE, {"provider": provider, "limit": limit})


_FLAG_LISTS: Mapping[str, Callable[..., Sequence[Unsettled | Entry | UnreadableLine]]] = {
    "unsettled": unsettled,
    "unmatched": unmatched_lines,
    "unreadable": unreadable,
}
LISTS = tuple(_FLAG_LISTS)
"""The lists the commands print instead of fetching, each its option's name (``--unsettled``)."""


def _naming(
    conn: Connection, shape: type[T], sql: str, provider: str, payment_ids: Sequence[str]
) -> list[T]:
    """The rows of ``sql`` naming these payments of ``provider``; none asked, none read."""
    if not payment_ids:
        return []
    params = {"provider": provider, "payments": list(payment_ids)}
    return shaped_rows(conn, shape, sql, params)


def _range(
    start: datetime, end: datetime, provider: str | None, after: tuple[datetime, str, str] | None
) -> dict[str, object]:
    at, after_provider, after_id = after if after is not None else (None, None, None)
    return {"start": start, "end": end, "provider": provider, "at": at,
            "after_provider": after_provider, "after_id": after_id}  # fmt: skip


__all__ = [
    "LISTS",
    "PAGE",
    "Entry",
    "Payout",
    "Totals",
    "UnreadableLine",
    "Unsettled",
    "catch_up_alone",
    "flag_list",
    "lines",
    "lines_in",
    "list_asked",
    "of_payments",
    "payout",
    "payouts",
    "totals",
    "unmatched_lines",
    "unreadable",
    "unsettled",
    "unsettled_of",
]
