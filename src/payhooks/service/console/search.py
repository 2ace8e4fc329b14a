"""One search box: whatever the customer or the gateway quoted, to the carts it concerns.

Each kind of identifier is looked up through an index (docs/console.md lists them, and the
gateway field behind each). A delivery that matches no checkout is a result of its own, by the
gateway's reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from payhooks.events import Provider
from payhooks.plumbing.db import Connection

MAX_QUERY_CHARS = 254  # the longest email address
MAX_RESULTS = 50
MIN_PREFIX = 4
"""The fewest characters of an email found by its start: fewer would list half the shop."""
PROVIDERS = [p.value for p in Provider]


class Matched(StrEnum):
    ORDER = "order id"
    CART = "cart id"
    GATEWAY_ORDER = "gateway order id"
    PAYMENT = "payment id"
    DELIVERY_KEY = "delivery key"
    BANK_REFERENCE = "bank reference (UTR/RRN)"
    EMAIL = "customer email"
    EMAIL_PREFIX = "start of a customer email"


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """A cart, or for a delivery that matches no checkout, the gateway's reference."""

    matched: Matched
    cart_id: str | None = None
    provider: str | None = None
    reference: str | None = None
    event_id: str | None = None
    email: str | None = None
    """The customer's email, for a cart found by the start of it."""

    @property
    def key(self) -> tuple[str | None, ...]:
        if self.cart_id:
            return ("cart", self.cart_id)
        if self.reference:
            return ("reference", self.provider, self.reference)
        return ("delivery", self.provider, self.event_id)


_CARTS = {
    Matched.ORDER: "SELECT cart_id FROM orders WHERE id = %(q)s",
    Matched.CART: "SELECT id FROM carts WHERE id = %(q)s",
    Matched.GATEWAY_ORDER: """
        SELECT cart_id FROM checkouts
        WHERE provider = ANY(%(providers)s) AND gateway_order_id = %(q)s""",
    Matched.PAYMENT: """
        SELECT cart_id FROM payments
        WHERE provider = ANY(%(providers)s) AND payment_id = %(q)s AND cart_id IS NOT NULL""",
    Matched.EMAIL: """
        SELECT id FROM carts WHERE lower(customer_email) = lower(%(q)s)
        ORDER BY created_at DESC LIMIT %(limit)s""",
}

# Deliveries name a reference and a payment; either may lead to a cart. A parked delivery has
# neither a checkout nor a payment row: it is found by what it names (its partial indexes).
_DELIVERIES = {
    Matched.GATEWAY_ORDER: """
        SELECT provider, merchant_ref, payment_id, event_id FROM processed_webhooks
        WHERE provider = ANY(%(providers)s) AND merchant_ref = %(q)s AND outcome = 'parked'
        LIMIT %(limit)s""",
    Matched.PAYMENT: """
        SELECT provider, merchant_ref, payment_id, event_id FROM processed_webhooks
        WHERE provider = ANY(%(providers)s) AND payment_id = %(q)s LIMIT %(limit)s""",
    Matched.DELIVERY_KEY: """
        SELECT provider, merchant_ref, payment_id, event_id FROM processed_webhooks
        WHERE provider = ANY(%(providers)s) AND event_id = %(q)s""",
    Matched.BANK_REFERENCE: """
        SELECT provider, merchant_ref, payment_id, event_id FROM processed_webhooks
        WHERE bank_ref = %(q)s LIMIT %(limit)s""",
}
# lower(customer_email) text_pattern_ops (shop migration 0016): the prefix is an index range.
_EMAIL_PREFIX = r"""
SELECT id, customer_email FROM carts WHERE lower(customer_email) LIKE %(prefix)s
ORDER BY created_at DESC LIMIT %(limit)s"""
_CART_OF_DELIVERY = """
SELECT coalesce(
    (SELECT cart_id FROM checkouts WHERE provider = %s AND gateway_order_id = %s),
    (SELECT cart_id FROM payments WHERE provider = %s AND payment_id = %s))
"""


def search(conn: Connection, query: str) -> list[Result]:
    """Every cart (or unmatched reference) ``query`` names, each once, in the order of the
    kinds above; only when it names none exactly, the carts whose email starts with it."""
    q = query.strip()
    if not q or len(q) > MAX_QUERY_CHARS:
        return []
    params = {"q": q, "providers": PROVIDERS, "limit": MAX_RESULTS}
    found: dict[tuple[str | None, ...], Result] = {}
    for matched, sql in _CARTS.items():
        for (cart_id,) in conn.execute(sql, params):
            _keep(found, Result(matched=matched, cart_id=str(cart_id)))
    for matched, sql in _DELIVERIES.items():
        for row in conn.execute(sql, params).fetchall():
            _keep(found, _of_delivery(conn, matched, *row))
    if not found and len(q) >= MIN_PREFIX:
        prefix = {"prefix": _like_prefix(q.lower()), "limit": MAX_RESULTS}
        for cart_id, email in conn.execute(_EMAIL_PREFIX, prefix):
            _keep(found, Result(matched=Matched.EMAIL_PREFIX, cart_id=str(cart_id), email=email))
    return list(found.values())[:MAX_RESULTS]


def _like_prefix(text: str) -> str:
    """``text%`` with LIKE's own characters taken literally (``_`` is common in emails)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def cart_of(
    conn: Connection, provider: str, reference: str | None, payment_id: str | None
) -> str | None:
    """The cart a delivery concerns: by its checkout's reference, or by its payment."""
    row = conn.execute(_CART_OF_DELIVERY, (provider, reference, provider, payment_id)).fetchone()
    return str(row[0]) if row and row[0] else None


def _of_delivery(
    conn: Connection,
    matched: Matched,
    provider: str,
    reference: str | None,
    payment_id: str | None,
    event_id: str,
) -> Result:
    cart_id = cart_of(conn, provider, reference, payment_id)
    if cart_id is not None:
        return Result(matched=matched, cart_id=cart_id)
    return Result(matched=matched, provider=provider, reference=reference, event_id=event_id)


def _keep(found: dict[tuple[str | None, ...], Result], result: Result) -> None:
    found.setdefault(result.key, result)
