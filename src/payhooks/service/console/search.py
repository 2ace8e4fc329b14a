"""One search box: whatever the customer or the gateway quoted, to the carts it concerns.

The shop's own identifiers (an order id, a cart id, a customer's email) name carts, a cart
with no checkout too. Every identifier of a gateway's is the core's to find
(``payhooks.operations.timeline.find``), with the shop's ``LOOKUPS`` beside its own: the gateway
orders of the shop's checkouts, and the payments the shop keeps. A gateway order that matches no
checkout is a result of its own, by the gateway's reference; a delivery that leads to no
gateway order at all, by its delivery key (its own page). Each lookup goes through an
index (docs/console.md lists them, and the gateway field behind each).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from payhooks.operations import timeline
from payhooks.operations.timeline import Found, Lookup
from payhooks.plumbing.db import Connection, shaped_rows

MAX_QUERY_CHARS = 254  # the longest email address
MAX_RESULTS = 50
MIN_PREFIX = 4
"""The fewest characters of an email found by its start: fewer would list half the shop."""


class Matched(StrEnum):
    """The shop's own kinds of identifier; the gateways' are ``timeline.Matched``."""

    ORDER = "order id"
    CART = "cart id"
    EMAIL = "customer email"
    EMAIL_PREFIX = "start of a customer email"


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """A cart, or for a gateway order that matches no checkout, the gateway's reference."""

    matched: StrEnum
    cart_id: str | None = None
    provider: str | None = None
    reference: str | None = None
    email: str | None = None
    """The customer's email, for a cart found by the start of it."""
    event_id: str | None = None
    """A delivery that leads to no order: its key (its own page)."""

    @property
    def key(self) -> tuple[str | None, ...]:
        if self.cart_id:
            return ("cart", self.cart_id)
        if self.reference:
            return ("reference", self.provider, self.reference)
        return ("delivery", self.provider, self.event_id)


_ORDER = "SELECT cart_id FROM orders WHERE id = %(q)s"
_CART = "SELECT id FROM carts WHERE id = %(q)s"
_EMAIL = """
SELECT id FROM carts WHERE lower(customer_email) = lower(%(q)s)
ORDER BY created_at DESC, id DESC LIMIT %(limit)s"""
_EMAIL_COUNT = "SELECT count(*) FROM carts WHERE lower(customer_email) = lower(%s)"
# One page of an email's carts, newest first, after the last one of the page before.
_EMAIL_PAGE = """
SELECT id AS cart_id, status, amount_paise, currency, created_at FROM carts
WHERE lower(customer_email) = lower(%(email)s)
  AND (%(at)s::timestamptz IS NULL OR (created_at, id) < (%(at)s::timestamptz, %(id)s::text))
ORDER BY created_at DESC, id DESC LIMIT %(limit)s"""
# lower(customer_email) text_pattern_ops (shop migration 0016): the prefix is an index range.
_EMAIL_PREFIX = r"""
SELECT id, customer_email FROM carts WHERE lower(customer_email) LIKE %(prefix)s
ORDER BY created_at DESC LIMIT %(limit)s"""

LOOKUPS = (
    Lookup(
        matched=timeline.Matched.GATEWAY_ORDER,
        sql="""
        SELECT provider, gateway_order_id FROM checkouts
        WHERE provider = ANY(%(providers)s) AND gateway_order_id = %(q)s""",
    ),
    Lookup(
        matched=timeline.Matched.PAYMENT,
        sql="""
        SELECT c.provider, c.gateway_order_id
        FROM payments p JOIN checkouts c ON c.cart_id = p.cart_id AND c.provider = p.provider
        WHERE p.provider = ANY(%(providers)s) AND p.payment_id = %(q)s LIMIT %(limit)s""",
    ),
)
"""The gateways' identifiers only the shop's tables hold (``timeline.Lookup``): the gateway
orders of its checkouts (those from before the expectations too), and of its payments."""

# A delivery that names no order and whose payment leads to none: found by its key alone.
_DELIVERY = """
SELECT provider, event_id FROM processed_webhooks
WHERE provider = ANY(%(providers)s) AND event_id = %(q)s"""

_CART_OF_DELIVERY = """
SELECT coalesce(
    (SELECT cart_id FROM checkouts WHERE provider = %s AND gateway_order_id = %s),
    (SELECT cart_id FROM payments WHERE provider = %s AND payment_id = %s))
"""


def search(conn: Connection, query: str) -> list[Result]:
    """Every cart (or unmatched reference) ``query`` names, each once: by an order or cart
    id, then by a gateway's identifier, then by an email; only when it names none exactly,
    the carts whose email starts with it."""
    q = query.strip()
    if not q or len(q) > MAX_QUERY_CHARS:
        return []
    params = {"q": q, "providers": timeline.PROVIDERS, "limit": MAX_RESULTS}
    found: dict[tuple[str | None, ...], Result] = {}
    for matched, sql in ((Matched.ORDER, _ORDER), (Matched.CART, _CART)):
        _keep_carts(conn, found, matched, sql, params)
    orders = timeline.find(conn, q, LOOKUPS)
    for order in orders:
        if (result := _of_order(conn, order)) is not None:
            _keep(found, result)
    if not orders:
        for provider, event_id in conn.execute(_DELIVERY, params):
            _keep(
                found,
                Result(matched=timeline.Matched.DELIVERY_KEY, provider=provider, event_id=event_id),
            )
    _keep_carts(conn, found, Matched.EMAIL, _EMAIL, params)
    if not found and len(q) >= MIN_PREFIX:
        prefix = {"prefix": _like_prefix(q.lower()), "limit": MAX_RESULTS}
        for cart_id, email in conn.execute(_EMAIL_PREFIX, prefix):
            _keep(found, Result(matched=Matched.EMAIL_PREFIX, cart_id=str(cart_id), email=email))
    return list(found.values())[:MAX_RESULTS]


def carts_with_email(conn: Connection, email: str) -> int:
    """How many carts have this customer email, any case."""
    row = conn.execute(_EMAIL_COUNT, (email.strip(),)).fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Cart:
    """A cart in the list of an email's carts."""

    cart_id: str
    status: str
    amount_paise: int
    currency: str
    created_at: datetime

    @property
    def cursor(self) -> str:
        """Where the next page starts: this cart's time and id (``lists.cursor_of``)."""
        return f"{self.created_at.isoformat()}|{self.cart_id}"


def carts_of_email(
    conn: Connection, email: str, before: tuple[datetime, str] | None, limit: int
) -> list[Cart]:
    """An email's carts (any case), newest first, those older than ``before`` (a cart's time
    and id): every one of them, a page at a time, where the search lists the newest
    ``MAX_RESULTS``."""
    at, cart_id = before if before is not None else (None, None)
    params = {"email": email.strip(), "at": at, "id": cart_id, "limit": limit}
    return shaped_rows(conn, Cart, _EMAIL_PAGE, params)


def _like_prefix(text: str) -> str:
    """``text%`` with LIKE's own characters taken literally (``_`` is common in emails)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def cart_of(
    conn: Connection, provider: str, reference: str | None, payment_id: str | None
) -> str | None:
    """The cart a delivery concerns: by its checkout's reference, or by its payment."""
    row = conn.execute(_CART_OF_DELIVERY, (provider, reference, provider, payment_id)).fetchone()
    return str(row[0]) if row and row[0] else None


def _of_order(conn: Connection, found: Found) -> Result | None:
    """Its checkout's cart; else its gateway reference, when a delivery tells of it (the
    reference's timeline); else nothing: only an expectation names it (a checkout dropped)."""
    cart_id = cart_of(conn, found.provider, found.gateway_order_id, None)
    if cart_id is not None:
        return Result(matched=found.matched, cart_id=cart_id)
    told = timeline.story(conn, found.provider, found.gateway_order_id)
    if told is None or not (told.records or told.lines):
        return None
    return Result(matched=found.matched, provider=found.provider, reference=found.gateway_order_id)


def _keep_carts(
    conn: Connection,
    found: dict[tuple[str | None, ...], Result],
    matched: Matched,
    sql: str,
    params: dict[str, object],
) -> None:
    for (cart_id,) in conn.execute(sql, params):
        _keep(found, Result(matched=matched, cart_id=str(cart_id)))


def _keep(found: dict[tuple[str | None, ...], Result], result: Result) -> None:
    found.setdefault(result.key, result)
