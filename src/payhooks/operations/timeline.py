"""One payment's timeline from the core's tables, for a merchant's own app: what the merchant
expected of a gateway order (``payhooks.expect``), what each delivery of it did, the payments
applied (by webhook or by reconciliation), every request the delivery log noted for it, where
reconciliation stands, and the payouts that settled its payments (``payhooks.settlements``).

``find`` turns what an operator types (a gateway order id, the merchant's reference, a payment
id, a delivery key, a bank reference) into the gateway orders it names; ``story`` tells one.
Every statement is an exact match through an index, so a timeline costs the same on a table of
ninety days of deliveries as on an empty one.

An app with tables of its own extends the timeline rather than keeping a second one
(``Extension``): its ``Lookup``s map its identifiers to the gateway orders they name, and its
``extra`` adds what only it knows to the stories ``told`` reads. The reference service's
console adds carts, orders, stock, emails and operators' actions this way
(``payhooks.service.console.stories``); the core knows none of those tables.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from payhooks.events import Provider
from payhooks.intake import disputes
from payhooks.intake.expectations import is_reconciled
from payhooks.plumbing.db import Connection, named_row, named_rows, query
from payhooks.settlements import listing

MAX_QUERY_CHARS = 255
MAX_FOUND = 20
MAX_LINES = 500
"""The delivery log's lines shown for one order: the newest, however many a flood left."""
PROVIDERS = [p.value for p in Provider]


class Matched(StrEnum):
    """Which kind of identifier the text was."""

    GATEWAY_ORDER = "gateway order id"
    REFERENCE = "merchant reference"
    PAYMENT = "payment id"
    DELIVERY_KEY = "delivery key"
    BANK_REFERENCE = "bank reference (UTR/RRN)"
    DISPUTE = "dispute id"
    REFUND = "refund id"


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """A gateway order the text names, and how (a ``Matched``, or a ``Lookup``'s own kind)."""

    provider: str
    gateway_order_id: str
    matched: StrEnum


@dataclass(frozen=True, slots=True, kw_only=True)
class Lookup:
    """An identifier an app keeps in tables of its own, and the statement finding the gateway
    orders it names: ``(provider, gateway order id)`` rows, from ``%(q)s`` (the text),
    ``%(providers)s`` (every gateway's name) and ``%(limit)s``, through an index."""

    matched: StrEnum
    sql: str


# The tables that name a gateway order, and the column naming it: each read through its
# (provider, column) index. Those keeping what a delivery did name its key (event_id) and its
# payment too; a payment's record (payhooks_payments) outlives their purge.
_OF_A_DELIVERY = (
    ("processed_webhooks", "merchant_ref"),
    ("payhooks_deliveries", "merchant_ref"),
    ("payhooks_amount_mismatches", "gateway_order_id"),
)
_PAYMENT_RECORD = ("payhooks_payments", "gateway_order_id")
_NAMING_AN_ORDER = (("payhooks_expectations", "gateway_order_id"), *_OF_A_DELIVERY, _PAYMENT_RECORD)


def _orders_by(key: str, tables: Sequence[tuple[str, str]]) -> str:
    """The orders that ``tables`` (each a table and its column naming an order) name in their
    rows whose ``key`` is the text, each table read through its (provider, key) index."""
    return "\n        UNION".join(
        f"""
        (SELECT provider, {column} FROM {table}
         WHERE provider = ANY(%(providers)s) AND {key} = %(q)s
           AND {column} IS NOT NULL LIMIT %(limit)s)"""
        for table, column in tables
    )


def _order_of_payment(where: str) -> str:
    """A delivery that names no order (a refund's, on some gateways), among those ``where``
    takes (``w``, its record): its payment's order."""
    return f"""
        (SELECT p.provider, p.gateway_order_id FROM processed_webhooks w
         JOIN payhooks_payments p ON p.provider = w.provider AND p.payment_id = w.payment_id
                                 AND p.gateway_order_id IS NOT NULL
         WHERE {where} AND w.merchant_ref IS NULL LIMIT %(limit)s)"""


def _kept_by(column: str) -> str:
    """The orders of the payments whose record keeps the text as ``column`` (core migration
    0036, through its index): the merchant's reference, the order its handler answered, its
    bank reference, found for as long as the record is kept, past the purge of the deliveries
    and the expectation that named them first."""
    return f"""
        (SELECT provider, gateway_order_id FROM payhooks_payments
         WHERE {column} = %(q)s AND gateway_order_id IS NOT NULL LIMIT %(limit)s)"""


# Each returns (provider, gateway order id); naming every provider lets PostgreSQL use the
# (provider, ...) indexes.
_FIND = {
    Matched.GATEWAY_ORDER: """
        SELECT g.provider, %(q)s FROM unnest(%(providers)s::text[]) AS g (provider)
        WHERE EXISTS ("""
    + " UNION ALL ".join(
        f"SELECT FROM {table} WHERE provider = g.provider AND {column} = %(q)s"
        for table, column in _NAMING_AN_ORDER
    )
    + ")",
    Matched.REFERENCE: """
        (SELECT provider, gateway_order_id FROM payhooks_expectations
         WHERE reference = %(q)s LIMIT %(limit)s)
        UNION
        (SELECT provider, merchant_ref FROM processed_webhooks
         WHERE order_ref = %(q)s AND merchant_ref IS NOT NULL LIMIT %(limit)s)
        UNION"""
    + _kept_by("reference")
    + "\n        UNION"
    + _kept_by("order_ref"),
    Matched.PAYMENT: _orders_by("payment_id", (*_OF_A_DELIVERY, _PAYMENT_RECORD)),
    Matched.DELIVERY_KEY: _orders_by("event_id", _OF_A_DELIVERY)
    + "\n        UNION"
    + _order_of_payment("w.provider = ANY(%(providers)s) AND w.event_id = %(q)s"),
    Matched.BANK_REFERENCE: """
        (SELECT DISTINCT provider, merchant_ref FROM processed_webhooks
         WHERE bank_ref = %(q)s AND merchant_ref IS NOT NULL LIMIT %(limit)s)
        UNION"""
    + _order_of_payment("w.bank_ref = %(q)s")
    + "\n        UNION"
    + _kept_by("bank_ref"),
    # A dispute's order, or its payment's when its report named none.
    Matched.DISPUTE: """
        (SELECT provider, gateway_order_id FROM payhooks_disputes
         WHERE provider = ANY(%(providers)s) AND dispute_id = %(q)s
           AND gateway_order_id IS NOT NULL)
        UNION
        (SELECT p.provider, p.gateway_order_id FROM payhooks_disputes d
         JOIN payhooks_payments p ON p.provider = d.provider AND p.payment_id = d.payment_id
                                 AND p.gateway_order_id IS NOT NULL
         WHERE d.provider = ANY(%(providers)s) AND d.dispute_id = %(q)s
           AND d.gateway_order_id IS NULL LIMIT %(limit)s)""",
    # A refund's order, by the gateway's refund id (one payhooks sent, or one the gateway
    # reported made outside it: a dashboard's) or by the key payhooks sent it under (Cashfree
    # calls it the refund's refund_id); its payment's order when the refund names none.
    Matched.REFUND: "\n        UNION".join(
        f"""
        (SELECT provider, gateway_order_id FROM payhooks_refunds
         WHERE provider = ANY(%(providers)s) AND {column} = %(q)s
           AND gateway_order_id IS NOT NULL LIMIT %(limit)s)
        UNION
        (SELECT p.provider, p.gateway_order_id FROM payhooks_refunds r
         JOIN payhooks_payments p ON p.provider = r.provider AND p.payment_id = r.payment_id
                                 AND p.gateway_order_id IS NOT NULL
         WHERE r.provider = ANY(%(providers)s) AND r.{column} = %(q)s
           AND r.gateway_order_id IS NULL LIMIT %(limit)s)"""
        for column in ("gateway_refund_id", "idempotency_key")
    ),
}


class UnreadableQuery(ValueError):
    """What an operator typed holds a control character: no identifier holds one, and the
    database refuses NUL. The doors answer it 400 with its text, never a 500."""

    def __init__(self) -> None:
        super().__init__("the query holds a control character")


# C0 and C1 controls and lone surrogates, as the console refuses them in any value.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


_CORE_LOOKUPS = tuple(Lookup(matched=matched, sql=sql) for matched, sql in _FIND.items())


def find(conn: Connection, text: str, lookups: Sequence[Lookup] = ()) -> list[Found]:
    """Every gateway order ``text`` names, each once: by an app's ``lookups`` first, then in
    the order of the kinds above; ``UnreadableQuery`` for a text holding a control character."""
    if _CONTROL.search(text):
        raise UnreadableQuery()
    q = text.strip()
    if not q or len(q) > MAX_QUERY_CHARS:
        return []
    params = {"q": q, "providers": PROVIDERS, "limit": MAX_FOUND}
    found: dict[tuple[str, str], Found] = {}
    for matched, sql in ((one.matched, one.sql) for one in (*lookups, *_CORE_LOOKUPS)):
        for provider, order in query(conn, sql, params).fetchall():
            key = (str(provider), str(order))
            found.setdefault(key, Found(provider=key[0], gateway_order_id=key[1], matched=matched))
    return list(found.values())[:MAX_FOUND]


# --- the story -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """What the merchant told ``payhooks.expect``."""

    amount_paise: int
    currency: str
    reference: str
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class AmountMismatch:
    """A payment of another amount or currency than expected: parked for a person."""

    expected_paise: int
    expected_currency: str
    paid_paise: int | None
    paid_currency: str | None
    found_at: datetime
    resolved_at: datetime | None
    resolution: str | None

    @property
    def resolved(self) -> bool:
        """A person settled it."""
        return self.resolved_at is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptMismatch(AmountMismatch):
    """An amount mismatch whose delivery record the retention purge deleted: its row (kept by
    core migration 0028) is what the core still has of that payment, settled by hand."""

    event_id: str
    """The key its delivery had."""
    payment_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmation:
    """A callback resting on a static credential, and what its gateway's API said of it
    (``payhooks.intake.confirmations``): no verdict yet while it waits."""

    verdict: str | None
    detail: str | None
    attempts: int
    last_error: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Settled:
    """A person's words for a parked delivery they settled by hand, and when."""

    note: str
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """A delivery as it took effect (``processed_webhooks``), a webhook's or reconciliation's."""

    event_id: str
    event_type: str
    outcome: str
    payment_id: str | None
    order_ref: str | None
    bank_ref: str | None
    at: datetime
    """When it was received, or applied by a replay."""
    body_mismatches: int
    """Copies of its key that came with another body: answered duplicate, or taken under a key
    of their own (another attempt, a callback posted again), never applied under this one."""
    amount_mismatch: AmountMismatch | None
    confirmation: Confirmation | None = None
    settled: Settled | None = None
    """A parked delivery a person settled by hand (``payhooks resolve``), not for its amount."""

    @property
    def reconciled(self) -> bool:
        """Brought by reconciliation (a gateway's status API), not by a webhook."""
        return is_reconciled(self.event_id)

    @property
    def parked(self) -> bool:
        """The delivery is parked."""
        return self.outcome == "parked"


@dataclass(frozen=True, slots=True, kw_only=True)
class Payment:
    """A payment that reached the merchant's handlers (``payhooks_payments``), once."""

    payment_id: str
    kind: str
    event_id: str
    reconciled: bool
    applied_at: datetime
    paid_paise: int | None = None
    """What the gateway said was paid (``None`` in a record older than core migration 0017)."""
    paid_currency: str | None = None
    stored: bool = True
    """Whether the delivery that brought it is still stored (the purge takes it after the
    window; the payment's record stays a refund's year)."""
    expected_paise: int | None = None
    """What its order was expected to be paid when it was applied (core migration 0029): the
    record keeps it past the purge of the expectation."""
    expected_currency: str | None = None
    reference: str | None = None
    """What the merchant gave ``payhooks.expect`` for its order (core migration 0036, as the
    three below): kept past the purge of the expectation."""
    order_ref: str | None = None
    """The order the merchant's handler answered for it."""
    bank_ref: str | None = None
    """Its bank reference (UTR/RRN) as its delivery reported it."""

    @property
    def by(self) -> str:
        """``webhook``, or ``reconciliation`` when the gateway's API brought it."""
        return "reconciliation" if self.reconciled else "webhook"


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """A request the delivery log noted (``payhooks_deliveries``), answered or refused."""

    received_at: datetime
    status: int
    outcome: str
    verified: bool
    event_id: str | None
    event_type: str | None
    payment_id: str | None
    mismatch: bool
    detail: str | None
    duration_ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciling:
    """Reconciliation's bookkeeping for the order (``payhooks_reconcile``)."""

    attempts: int
    next_attempt_at: datetime
    last_attempt_at: datetime | None
    last_error: str | None
    expired_reported_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Story:
    """Everything about one gateway order: what was expected, each delivery as it was
    recorded, the payments, the requests the log noted, reconciliation's state and the
    disputes of its payments."""

    provider: str
    gateway_order_id: str
    expected: Expected | None
    records: list[Record]
    """In the order they took effect."""
    payments: list[Payment]
    lines: list[Line]
    """In the order they were received."""
    reconciling: Reconciling | None
    disputes: list[disputes.Dispute] = field(default_factory=list)
    """Where each dispute of its payments stands (``payhooks.intake.disputes``), in the order
    they were opened; each report of one is also among ``records``."""
    mismatched: list[KeptMismatch] = field(default_factory=list)
    """The amount mismatches of the order or its payments whose delivery record was purged,
    in the order they were found (the others are on their ``records``)."""
    settled: list[listing.Entry] = field(default_factory=list)
    """The settlement lines naming the order's payments (their payouts, their refunds'
    debits), oldest payout first."""
    unsettled: list[listing.Unsettled] = field(default_factory=list)
    """Its captures flagged: not settled within their gateway's cycle and the margin."""
    payment_ids: list[str] = field(default_factory=list)
    """Every payment of the order anything kept names (its deliveries, payment records,
    refunds, disputes, amount mismatches), sorted: whose refunds and settlements to tell."""

    @property
    def purged(self) -> bool:
        """Nothing of what the order's payments brought is kept (expectation, deliveries,
        payment records, the delivery log's lines: past retention, a payment's record past a
        refund's year; or they never reached payhooks), only what is kept for good (refunds,
        disputes, settlements)."""
        return self.expected is None and not (self.records or self.payments or self.lines)

    @property
    def parked(self) -> list[Record]:
        """The records parked."""
        return [record for record in self.records if record.parked]

    @property
    def expected_kept(self) -> Payment | None:
        """With its expectation purged, a payment whose record keeps what the order was
        expected to be paid; None when the order has its expectation, or never had one."""
        if self.expected is not None:
            return None
        return next((p for p in self.payments if p.expected_paise is not None), None)

    def attempts_of(self, event_id: str) -> int:
        """The requests of one delivery key among the lines: a gateway's retries of it."""
        return sum(1 for line in self.lines if line.event_id == event_id)

    def as_json(self) -> dict[str, Any]:
        """The story as JSON values (times in ISO 8601)."""
        found: dict[str, Any] = jsonable(_fields(self))
        return found


_EXPECTED = """
SELECT amount_paise, currency, reference, created_at FROM payhooks_expectations
WHERE provider = %(provider)s AND gateway_order_id = %(order)s
"""
_RECORD_COLUMNS = """
SELECT w.event_id, w.event_type, w.outcome, w.payment_id, w.order_ref, w.bank_ref,
       w.processed_at AS at, w.mismatches AS body_mismatches,
       m.expected_paise, m.expected_currency, m.paid_paise, m.paid_currency, m.found_at,
       m.resolved_at, m.resolution,
       c.verdict, c.detail, c.attempts, c.last_error, c.event_id AS confirmation_of,
       s.resolution AS settled_note, s.resolved_at AS settled_at
FROM processed_webhooks w
LEFT JOIN payhooks_amount_mismatches m ON m.provider = w.provider AND m.event_id = w.event_id
LEFT JOIN payhooks_confirmations c ON c.provider = w.provider AND c.event_id = w.event_id
LEFT JOIN payhooks_resolutions s ON s.provider = w.provider AND s.event_id = w.event_id
"""
_RECORDS = (
    _RECORD_COLUMNS
    + "WHERE w.provider = %(provider)s AND w.merchant_ref = %(order)s"
    + " ORDER BY w.processed_at, w.event_id"
)
# A payment's deliveries that do not name the order (a refund's, on some gateways).
_RECORDS_OF_PAYMENTS = (
    _RECORD_COLUMNS
    + """WHERE w.provider = %(provider)s AND w.payment_id = ANY(%(payments)s)
      AND w.payment_id IS NOT NULL AND w.merchant_ref IS DISTINCT FROM %(order)s
    ORDER BY w.processed_at, w.event_id"""
)
_PAYMENTS = """
SELECT p.payment_id, p.kind, p.event_id, p.reconciled, p.applied_at, p.paid_paise,
       p.currency AS paid_currency, p.expected_paise, p.expected_currency, p.reference,
       p.order_ref, p.bank_ref,
       EXISTS (SELECT 1 FROM processed_webhooks w
               WHERE w.provider = p.provider AND w.event_id = p.event_id) AS stored
FROM payhooks_payments p
WHERE p.provider = %(provider)s AND p.payment_id = ANY(%(payments)s)
ORDER BY p.applied_at, p.payment_id, p.kind
"""
# The payments whose own record names the order: kept for a refund's year, past the purge of
# their deliveries (retention.REFUNDABLE_DAYS); and those its refunds and disputes name, kept
# for good (money data), past the purge of the payment's record. A refund's order is the
# asker's word (``refunds.request``): never taken over a payment record naming another.
_PAYMENTS_OF_ORDER = """
SELECT payment_id FROM payhooks_payments
WHERE provider = %(provider)s AND gateway_order_id = %(order)s
UNION
SELECT r.payment_id FROM payhooks_refunds r
WHERE r.provider = %(provider)s AND r.gateway_order_id = %(order)s
  AND NOT EXISTS (SELECT 1 FROM payhooks_payments p
                  WHERE p.provider = r.provider AND p.payment_id = r.payment_id
                    AND p.gateway_order_id <> r.gateway_order_id)
UNION
SELECT payment_id FROM payhooks_disputes
WHERE provider = %(provider)s AND gateway_order_id = %(order)s AND payment_id IS NOT NULL
"""
# What a ``Line`` is read from (``_line``), with the id that orders one instant's lines.
_LINE_COLUMNS = """received_at, id, status, outcome, verified, event_id, event_type, payment_id,
       mismatch, detail, duration_ms"""
_LINES = f"""
SELECT * FROM (
    SELECT {_LINE_COLUMNS}
    FROM payhooks_deliveries
    WHERE id IN (
        SELECT id FROM payhooks_deliveries
        WHERE provider = %(provider)s AND merchant_ref = %(order)s
        UNION
        SELECT id FROM payhooks_deliveries
        WHERE provider = %(provider)s AND payment_id = ANY(%(payments)s)
          AND payment_id IS NOT NULL)
    ORDER BY received_at DESC, id DESC LIMIT %(limit)s) newest
ORDER BY received_at, id
"""
# A mismatch still stored with its delivery is told on the delivery's record.
_MISMATCHED = """
SELECT m.event_id, m.payment_id, m.expected_paise, m.expected_currency, m.paid_paise,
       m.paid_currency, m.found_at, m.resolved_at, m.resolution
FROM payhooks_amount_mismatches m
WHERE m.provider = %(provider)s
  AND (m.gateway_order_id = %(order)s OR m.payment_id = ANY(%(payments)s))
  AND NOT EXISTS (SELECT 1 FROM processed_webhooks w
                  WHERE w.provider = m.provider AND w.event_id = m.event_id)
ORDER BY m.found_at, m.event_id
"""
_RECONCILING = """
SELECT attempts, next_attempt_at, last_attempt_at, last_error, expired_reported_at
FROM payhooks_reconcile WHERE provider = %(provider)s AND gateway_order_id = %(order)s
"""


def story(
    conn: Connection, provider: str, gateway_order_id: str, payment_ids: Sequence[str] = ()
) -> Story | None:
    """The order's timeline, or ``None`` when no table names it. ``payment_ids`` are payments
    an app's own tables tie to the order, told with those its deliveries name."""
    params: dict[str, Any] = {"provider": provider, "order": gateway_order_id}
    expected = named_row(conn, _EXPECTED, params)
    rows = named_rows(conn, _RECORDS, params)
    named = {r["payment_id"] for r in rows if r["payment_id"]}
    kept = {str(row[0]) for row in query(conn, _PAYMENTS_OF_ORDER, params)}
    params["payments"] = sorted(named.union(payment_ids, kept))
    rows += named_rows(conn, _RECORDS_OF_PAYMENTS, params)
    rows.sort(key=lambda r: (r["at"], r["event_id"]))
    lines = named_rows(conn, _LINES, {**params, "limit": MAX_LINES})
    disputed = disputes.of_order(conn, provider, gateway_order_id, params["payments"])
    mismatched = [KeptMismatch(**row) for row in named_rows(conn, _MISMATCHED, params)]
    payments = [Payment(**row) for row in named_rows(conn, _PAYMENTS, params)]
    if expected is None and not (rows or lines or disputed or mismatched or payments or kept):
        return None
    reconciling = named_row(conn, _RECONCILING, params)
    settling = (m.payment_id for m in mismatched if m.payment_id is not None)
    paid = sorted({*params["payments"], *(p.payment_id for p in payments), *settling})
    return Story(
        provider=provider,
        gateway_order_id=gateway_order_id,
        expected=None if expected is None else Expected(**expected),
        records=[_record(row) for row in rows],
        payments=payments,
        lines=[_line(row) for row in lines],
        reconciling=None if reconciling is None else Reconciling(**reconciling),
        disputes=disputed,
        mismatched=mismatched,
        settled=listing.of_payments(conn, provider, paid),
        unsettled=listing.unsettled_of(conn, provider, paid),
        payment_ids=paid,
    )


# --- an app's extension ----------------------------------------------------------------------

E_co = TypeVar("E_co", covariant=True)
E = TypeVar("E")


class Extension(Protocol[E_co]):
    """What an app adds to the timeline from tables only it has: its identifiers, each mapped
    to the gateway orders it names (``find``), and what it knows beside the stories of those
    orders (``told``): the reference shop's checkouts, payments, order, stock, emails and
    operators' actions."""

    @property
    def lookups(self) -> Sequence[Lookup]:
        """The app's own ways of naming a gateway order (its cart, its order)."""

    def extra(self, conn: Connection, stories: Sequence[Story]) -> E_co:
        """What the app adds to the stories found, from its own tables."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Told(Generic[E]):
    """The stories of several gateway orders (an app's checkouts of one purchase), and what
    an ``Extension`` adds to them."""

    stories: list[Story]
    extra: E


def records_of(stories: Sequence[Story]) -> list[tuple[str, Record]]:
    """Every record of ``stories`` once, with its gateway, in the order they took effect."""
    found = {(s.provider, r.event_id): (s.provider, r) for s in stories for r in s.records}
    return sorted(found.values(), key=lambda pair: (pair[1].at, pair[1].event_id))


def lines_of(stories: Sequence[Story]) -> list[tuple[str, Line]]:
    """Every line of ``stories`` once, with its gateway, in the order they were received."""
    found = dict.fromkeys((s.provider, line) for s in stories for line in s.lines)
    return sorted(found, key=lambda pair: pair[1].received_at)


def told(
    conn: Connection,
    orders: Sequence[tuple[str, str]],
    extension: Extension[E],
    payments: Sequence[tuple[str, str]] = (),
) -> Told[E]:
    """The stories of ``orders`` (``(provider, gateway order id)``; those no table names are
    left out), each with the ``payments`` (``(provider, payment id)``) of its gateway, and what
    ``extension`` adds to them."""
    stories = [
        found
        for provider, order in orders
        if (found := story(conn, provider, order, [p for g, p in payments if g == provider]))
        is not None
    ]
    return Told(stories=stories, extra=extension.extra(conn, stories))


_ATTEMPTS = f"""
SELECT {_LINE_COLUMNS}
FROM payhooks_deliveries WHERE provider = %(provider)s AND event_id = %(event_id)s
ORDER BY received_at, id LIMIT %(limit)s
"""
_NAMES = """
SELECT merchant_ref, payment_id FROM processed_webhooks
WHERE provider = %(provider)s AND event_id = %(event_id)s
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempts:
    """Every request of one delivery key the log noted (a gateway's retries of it), and the
    gateway order and payment its record names (where its timeline is)."""

    lines: list[Line]
    merchant_ref: str | None
    payment_id: str | None


def attempts(conn: Connection, provider: str, event_id: str) -> Attempts:
    """The requests the log noted for one delivery key, and the payment and reference it
    named."""
    params = {"provider": provider, "event_id": event_id, "limit": MAX_LINES}
    names = named_row(conn, _NAMES, params) or {"merchant_ref": None, "payment_id": None}
    return Attempts(lines=[_line(row) for row in named_rows(conn, _ATTEMPTS, params)], **names)


def answer(conn: Connection, text: str) -> dict[str, Any]:
    """What the JSON routes answer (``payhooks.starlette.timeline_route``,
    ``payhooks.flask.timeline_blueprint``): each gateway order ``text`` names, with its story."""
    orders = []
    for found in find(conn, text):
        told = story(conn, found.provider, found.gateway_order_id)
        if told is not None:
            orders.append({"matched": found.matched.value, **told.as_json()})
    return {"query": text, "orders": orders}


_MISMATCH_FIELDS = tuple(AmountMismatch.__dataclass_fields__)


def _record(row: dict[str, Any]) -> Record:
    mismatch = {name: row.pop(name) for name in _MISMATCH_FIELDS}
    found = mismatch["found_at"] is not None
    asked = row.pop("confirmation_of") is not None
    confirmation = {name: row.pop(name) for name in _CONFIRMATION_FIELDS}
    note, at = row.pop("settled_note"), row.pop("settled_at")
    return Record(
        **row,
        amount_mismatch=AmountMismatch(**mismatch) if found else None,
        confirmation=Confirmation(**confirmation) if asked else None,
        settled=Settled(note=note, at=at) if note is not None else None,
    )


_CONFIRMATION_FIELDS = ("verdict", "detail", "attempts", "last_error")


def _line(row: dict[str, Any]) -> Line:
    del row["id"]
    return Line(**row)


def _fields(value: Any) -> Any:
    """A value object's fields (and its properties an operator reads), recursively."""
    if isinstance(value, list):
        return [_fields(item) for item in value]
    if not hasattr(value, "__dataclass_fields__"):
        return value
    fields = {name: _fields(getattr(value, name)) for name in value.__dataclass_fields__}
    for extra in ("reconciled", "resolved", "by", "open", "awaiting_response"):
        if isinstance(getattr(type(value), extra, None), property):
            fields[extra] = getattr(value, extra)
    return fields


def jsonable(value: Any) -> Any:
    """``value`` as JSON carries it: mappings and lists through, times in ISO 8601."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [jsonable(item) for item in value]
    if isinstance(value, date | time):
        return value.isoformat()
    return value


__all__ = [
    "AmountMismatch",
    "Attempts",
    "Confirmation",
    "Expected",
    "Extension",
    "Found",
    "KeptMismatch",
    "Line",
    "Lookup",
    "Matched",
    "Payment",
    "Reconciling",
    "Record",
    "Story",
    "Told",
    "UnreadableQuery",
    "answer",
    "attempts",
    "find",
    "jsonable",
    "lines_of",
    "records_of",
    "story",
    "told",
]
