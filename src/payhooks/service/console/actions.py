"""What an operator of the reference shop does beyond the core console's actions: queue a dead
letter (an email or alert the worker gave up on) again, one or all, or to a corrected address;
refund a flagged payment; link a parked delivery to the cart it pays. Each is idempotent, and
recorded with the operator's name like the core's (``payhooks.console.actions``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.rows import class_row

from payhooks.console.actions import (
    PROVIDERS,
    Done,
    Parked,
    Replay,
    Result,
    read,
    record,
    replay_parked,
)
from payhooks.console.formats import rupees
from payhooks.events import Provider, kind_words
from payhooks.gateways import Adapter
from payhooks.plumbing.db import Connection, shaped_rows
from payhooks.plumbing.errors import Conflict, InvalidRequest, NotFound
from payhooks.refunding import refunds
from payhooks.service import outbox
from payhooks.service.shop import carts, double_refunds


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    id: int
    kind: str
    recipient: str | None
    subject: str
    attempts: int
    last_error: str | None
    failed_at: datetime
    order_id: str | None = None
    cart_id: str | None = None
    """The order it is about, and its cart: that order's (an order's confirmation, a
    backorder), else its payment's or its gateway reference's checkout's (an alert)."""
    provider: str | None = None
    payment_id: str | None = None
    reference: str | None = None
    """The gateway, payment and gateway reference an alert names (its payload); None where it
    names none."""

    @property
    def error(self) -> str:
        """The last error as a person reads it, rows written before the server's text was
        kept included (``readable_error``)."""
        return readable_error(self.last_error)


_DEAD = """
SELECT o.id, o.kind, o.recipient, o.subject, o.attempts, o.last_error, o.failed_at,
       r.id AS order_id, coalesce(r.cart_id, p.cart_id, c.cart_id) AS cart_id,
       o.payload ->> 'provider' AS provider, o.payload ->> 'payment_id' AS payment_id,
       o.payload ->> 'reference' AS reference
FROM outbox o
LEFT JOIN orders r ON o.payload ? 'order_id' AND r.id = o.payload ->> 'order_id'
LEFT JOIN payments p
       ON p.provider = o.payload ->> 'provider' AND p.payment_id = o.payload ->> 'payment_id'
LEFT JOIN checkouts c
       ON c.provider = o.payload ->> 'provider' AND c.gateway_order_id = o.payload ->> 'reference'
WHERE o.failed_at IS NOT NULL ORDER BY o.failed_at DESC, o.id DESC LIMIT %s
"""
_DEAD_COUNT = "SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL"
DEAD_PAGE = 200
"""Dead letters on the page, the newest first; "Retry all" retries exactly these (the page
says so when more are dead: the older show there once these are queued)."""


def dead_letters(conn: Connection, limit: int = DEAD_PAGE) -> list[DeadLetter]:
    return shaped_rows(conn, DeadLetter, _DEAD, (limit,))


# What the mail sender wrote before it kept the server's text: a list of codes, or the reply
# in Python's quotes.
_CODES_ONLY = re.compile(r"^recipient refused: \[([\d, ]*)\]$")
_QUOTED = re.compile(r"""^(?P<head>.*SMTP \d{3}): (?P<q>['"])(?P<text>.*)(?P=q)$""")


def readable_error(error: str | None) -> str:
    """``recipient refused: [550]`` as ``recipient refused: 550 (the server's text was not
    kept)``, ``SMTP 552: '5.3.4 Too big'`` as ``SMTP 552 5.3.4 Too big``; anything else as
    it is."""
    if not error:
        return "—"
    if found := _CODES_ONLY.match(error):
        codes = ", ".join(c.strip() for c in found.group(1).split(",") if c.strip())
        return f"recipient refused: {codes or 'no code'} (the server's text was not kept)"
    if found := _QUOTED.match(error):
        return f"{found.group('head')} {found.group('text')}"
    return error


def dead_count(conn: Connection) -> int:
    row = conn.execute(_DEAD_COUNT).fetchone()
    return int(row[0]) if row else 0


_RECORDED = "SELECT 1 FROM outbox WHERE id = %s"


def _not_dead(conn: Connection, message_id: int) -> Done:
    """Why a message could not be queued again: a colleague did it first (or it is sent since),
    or no message has that id (a stale or hand-made form)."""
    found = conn.execute(_RECORDED, (message_id,)).fetchone()
    return Done.ALREADY_QUEUED if found else Done.NO_SUCH_MESSAGE


def retry_dead_letter(conn: Connection, message_id: int, *, operator: str) -> Result:
    revived = outbox.revive(conn, message_id)
    result = Result(done=Done.QUEUED if revived else _not_dead(conn, message_id))
    record(conn, operator, "retry", None, str(message_id), result)
    return result


def retry_all(conn: Connection, listed: Sequence[int], *, operator: str) -> Result:
    """The dead letters the page listed (``listed``, their ids) queued again, each recorded on
    its own line, never one the page did not show; a second click, or a colleague's at once,
    finds them queued and says so."""
    queued = Result(done=Done.QUEUED)
    revived = [message_id for message_id in listed if outbox.revive(conn, message_id)]
    for message_id in revived:  # one already queued again is a colleague's, logged there
        record(conn, operator, "retry", None, str(message_id), queued)
    if not revived:
        return Result(done=Done.NOTHING_DEAD)
    return Result(done=Done.ALL_QUEUED if len(revived) == len(set(listed)) else Done.SOME_QUEUED)


_READDRESS = """
UPDATE outbox SET recipient = %s, failed_at = NULL, attempts = 0, available_at = now(),
    last_error = NULL
WHERE id = %s AND failed_at IS NOT NULL AND kind = 'email'
"""


def readdress(conn: Connection, message_id: int, recipient: str, *, operator: str) -> Result:
    """A dead-lettered email sent again to a corrected address (``mail.checked_address``
    normalised it, or refused it before this is called); one already queued is left alone."""
    changed = conn.execute(_READDRESS, (recipient, message_id)).rowcount
    result = Result(done=Done.READDRESSED if changed else _not_dead(conn, message_id))
    record(conn, operator, "readdress", None, str(message_id), result)
    return result


SAID_CHARS = 500
"""How much of why a refund cannot be asked for the action log keeps."""


_FLAGGED = f"""
SELECT {double_refunds.REFUNDABLE}, {double_refunds.PAID}, coalesce(c.currency, p.currency),
       p.cart_id, {double_refunds.ORDER}, c.attempt_id
FROM payments p {double_refunds.RECORD}
WHERE p.provider = %s AND p.payment_id = %s AND p.needs_refund
"""


def request_refund(conn: Connection, provider: str, payment_id: str, *, operator: str) -> Result:
    """A refund of what is left of a payment flagged ``needs_refund`` (what it paid, less what
    lost disputes took back and refunds returned), asked for under the same key the
    double-payment policy would take next (``double_refunds.key_of``): two operators, or an
    operator and the policy, ask for one refund. One still on its way (requested or sent) is
    "already asked for"; once every earlier one was refused, failed or cancelled, the next key
    is a new refund. The worker sends it. One lost disputes left nothing of needs none: its
    flag is cleared, and said. Why a refund cannot be asked for is in the action log."""
    if provider not in PROVIDERS:  # no payment of a gateway no one serves: nothing to refund,
        return Result(done=Done.REFUND_NOT_POSSIBLE)  # nothing recorded
    row = conn.execute(_FLAGGED, (provider, payment_id)).fetchone()
    earlier = refunds.of_payment(conn, provider, payment_id)
    on_its_way = (refunds.RefundState.REQUESTED, refunds.RefundState.SENT)
    said = None
    if row is None:
        result = Result(done=Done.REFUND_NOT_POSSIBLE)
    elif int(row[0]) <= 0:
        with conn.transaction():
            said = double_refunds.taken_back(conn, provider, payment_id)
        result = Result(done=Done.REFUND_NOT_POSSIBLE if said is None else Done.REFUND_TAKEN_BACK)
    elif any(r.state in on_its_way for r in earlier):
        result = Result(done=Done.REFUND_ALREADY_REQUESTED)
    else:
        result, said = _asked(conn, provider, payment_id, row, earlier, operator=operator)
    shown = None if said is None else f"{result.done.value}: {said}"[:SAID_CHARS]
    record(conn, operator, "refund", provider, payment_id, result, shown)
    return result


def _asked(
    conn: Connection,
    provider: str,
    payment_id: str,
    row: tuple[Any, ...],
    earlier: list[refunds.Refund],
    *,
    operator: str,
) -> tuple[Result, str | None]:
    """The refund of what is left, written: what it came to, and why not when it was not."""
    left, paid, currency, cart_id, order_ref, attempt = row
    key = double_refunds.key_of(payment_id, len(earlier))
    try:
        with conn.transaction():
            made = refunds.request(
                conn, provider, payment_id, int(left), key=key, captured_paise=int(paid),
                reason=f"asked for in the console for cart {cart_id}", requested_by=operator,
                currency=currency or "INR", gateway_order_id=order_ref, attempt_id=attempt,
            )  # fmt: skip
    except refunds.RefundTooLarge as exc:
        return Result(done=Done.REFUND_TOO_LARGE), str(exc)
    except (InvalidRequest, Conflict) as exc:
        return Result(done=Done.REFUND_NOT_POSSIBLE), str(exc)
    fresh = made.idempotency_key not in {r.idempotency_key for r in earlier}
    return Result(done=Done.REFUND_REQUESTED if fresh else Done.REFUND_ALREADY_REQUESTED), None


# --- parked deliveries and the carts they may pay --------------------------------------------

WINDOW = timedelta(hours=24)
"""How long before a parked delivery a cart of its amount may have been opened."""
_CART_ID = re.compile(r"\bcart_[0-9a-f]{16}\b")


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """An open cart a parked delivery may pay: named in its body, or of its amount, opened in
    the window before it, and not checked out with its gateway under another reference."""

    cart_id: str
    amount_paise: int
    created_at: datetime
    named: bool
    """Named in the delivery's body (its notes, its receipt), not only of the same amount."""


_NAMED_CARTS = """
SELECT k.id AS cart_id, k.amount_paise, k.created_at, true AS named FROM carts k
WHERE k.id = ANY(%(ids)s) AND k.status = 'open'
  AND NOT EXISTS (SELECT 1 FROM checkouts c WHERE c.cart_id = k.id AND c.provider = %(provider)s)
ORDER BY k.created_at DESC LIMIT 1
"""
# Carts of the amount by their opening time (shop migration 0020's index): a day's worth at most.
_SAME_AMOUNT = """
SELECT k.id AS cart_id, k.amount_paise, k.created_at, false AS named FROM carts k
WHERE k.status = 'open' AND k.created_at BETWEEN %(since)s AND %(until)s
  AND k.amount_paise = %(amount)s
  AND NOT EXISTS (SELECT 1 FROM checkouts c WHERE c.cart_id = k.id AND c.provider = %(provider)s)
ORDER BY k.created_at DESC LIMIT 1
"""


def candidate(conn: Connection, row: Parked) -> Candidate | None:
    """The cart ``row`` most likely pays, or ``None``; a cart named in the body first."""
    if row.merchant_ref is None or not row.pays or row.for_amount or row.beside_mismatch:
        return None  # nothing to link: no reference, no payment (a refund or a dispute of a
        # payment never taken pays no cart), or parked for its amount with its checkout known
    named = sorted(set(_CART_ID.findall(row.notes)))[:10]
    params = {"ids": named, "provider": row.provider}
    with conn.cursor(row_factory=class_row(Candidate)) as cur:
        found = cur.execute(_NAMED_CARTS, params).fetchone() if named else None
        if found is None and row.amount_paise is not None:
            window = {"since": row.processed_at - WINDOW, "until": row.processed_at,
                      "amount": row.amount_paise}  # fmt: skip
            found = cur.execute(_SAME_AMOUNT, params | window).fetchone()
    return found


def candidates(conn: Connection, rows: Sequence[Parked]) -> dict[tuple[str, str], Candidate]:
    found = {(row.provider, row.event_id): candidate(conn, row) for row in rows[:LINK_ROWS]}
    return {key: value for key, value in found.items() if value is not None}


LINK_ROWS = 50
"""Parked rows a candidate is looked for: the newest, two short statements each."""


def why(found: Candidate, row: Parked) -> str:
    if found.named:
        return "named in the delivery's body"
    before = row.processed_at - found.created_at
    minutes = int(before.total_seconds() // 60)
    return f"same amount ({rupees(found.amount_paise)}), opened {minutes} min before it"


_PARKED_RECORD = """
SELECT merchant_ref, outcome, body, headers FROM processed_webhooks
WHERE provider = %s AND event_id = %s
"""


def link_parked(
    conn: Connection,
    replay: Replay,
    adapters: Mapping[Provider, Adapter],
    *,
    provider: str,
    event_id: str,
    cart_id: str,
    operator: str,
) -> Result:
    """Check the cart out under the parked delivery's reference (``carts.checkout``, as the
    shop does at checkout), then replay the delivery through the same claim as any replay. A
    payment of another amount than the cart's is not linked: it would stay parked, and its
    checkout hold the cart, refused to the cart's own order at that gateway (``OTHER_AMOUNT``). A
    delivery that cannot be replayed (its stored record does not read with ``adapters``, as
    the replay would read it) is not linked: its checkout would hold the cart for a payment
    that never applies, refused to any other delivery as taken. A checkout the link made for a
    delivery a colleague settled before its replay is taken back (``_UNLINKED``)."""
    checked_out = _checked_out(conn, provider, event_id, cart_id)
    linked = _linked(conn, adapters, provider, event_id, cart_id)
    said = None if linked.why is None else f"{linked.done.value}: {linked.why}"
    record(conn, operator, "link", provider, event_id, linked, said)
    if linked.done is not Done.LINKED:
        return linked
    replayed = replay_parked(conn, replay, provider=provider, event_id=event_id, operator=operator)
    if not checked_out:  # a checkout this link made, for a delivery settled meanwhile: undone
        with conn.transaction():
            conn.execute(_UNLINKED, {"provider": provider, "event_id": event_id, "cart": cart_id})
    return replayed


_CART_COSTS = "SELECT amount_paise, currency FROM carts WHERE id = %s"
_CHECKED_OUT = """
SELECT 1 FROM checkouts c JOIN processed_webhooks w
  ON w.provider = c.provider AND w.merchant_ref = c.gateway_order_id
WHERE w.provider = %s AND w.event_id = %s AND c.cart_id = %s
"""
# A colleague's Settle may land between a link's checkout and its replay, which then finds
# nothing parked: the cart, still open, would stay checked out under the delivery's reference,
# and the gateway's next report of that payment (Razorpay's ``order.paid``, reconciliation)
# would place an order for money settled outside payhooks. The checkout the link made is taken
# back, with the expectation it told the core (its reconciliation row goes with it), under the
# cart's lock (as a capture takes it) while the cart is open and the delivery settled.
_UNLINKED = """
WITH settled AS (
    SELECT w.provider, w.merchant_ref FROM processed_webhooks w
    WHERE w.provider = %(provider)s AND w.event_id = %(event_id)s AND w.outcome = 'ignored'
), open_cart AS (
    SELECT k.id FROM carts k WHERE k.id = %(cart)s AND k.status = 'open' FOR UPDATE
), checkout AS (
    DELETE FROM checkouts c USING settled s, open_cart k
    WHERE c.provider = s.provider AND c.gateway_order_id = s.merchant_ref AND c.cart_id = k.id
    RETURNING c.provider, c.gateway_order_id
)
DELETE FROM payhooks_expectations e USING checkout c
WHERE e.provider = c.provider AND e.gateway_order_id = c.gateway_order_id
"""


def _checked_out(conn: Connection, provider: str, event_id: str, cart_id: str) -> bool:
    """Whether the cart is checked out under the delivery's reference already."""
    return conn.execute(_CHECKED_OUT, (provider, event_id, cart_id)).fetchone() is not None


def _linked(
    conn: Connection,
    adapters: Mapping[Provider, Adapter],
    provider: str,
    event_id: str,
    cart_id: str,
) -> Result:
    if provider not in PROVIDERS:
        return Result(done=Done.NOT_FOUND)  # nothing recorded for a gateway no one serves
    row = conn.execute(_PARKED_RECORD, (provider, event_id)).fetchone()
    if row is None:
        return Result(done=Done.NOT_FOUND)
    reference, outcome, body, headers = row
    if outcome != "parked":
        return Result(done=Done.ALREADY_APPLIED)
    if reference is None:
        return Result(done=Done.NOT_LINKABLE)
    event, why = read(adapters, provider, event_id, bytes(body), headers)
    if event is None:
        return Result(done=Done.NOT_REPLAYABLE, why=why)
    if not event.kind.pays:  # a refund or a dispute of a payment never taken: settled
        return Result(done=Done.NOT_A_PAYMENT, why=kind_words(event.kind))
    cart = conn.execute(_CART_COSTS, (cart_id,)).fetchone()
    if cart is None:
        return Result(done=Done.NO_SUCH_CART)
    if (event.amount_paise, event.currency) != (cart[0], cart[1]):
        # It would stay parked after the replay, and its checkout hold the cart for good.
        paid = (
            rupees(event.amount_paise)
            if event.currency in (None, "INR")
            else (f"{event.amount_paise} {event.currency} (in its smallest unit)")
        )
        return Result(done=Done.OTHER_AMOUNT,
                      why=f"the payment paid {paid}; the cart costs {rupees(cart[0])}")  # fmt: skip
    try:
        carts.checkout(conn, cart_id, Provider(provider), reference)
    except NotFound:
        return Result(done=Done.NO_SUCH_CART)
    except Conflict as exc:
        # The cart may be paid by this very delivery, linked and replayed by a colleague a
        # moment ago: that is nothing left to do, not a cart taken by another payment.
        again = conn.execute(_PARKED_RECORD, (provider, event_id)).fetchone()
        if again is not None and again[1] != "parked":
            return Result(done=Done.ALREADY_APPLIED)
        return Result(done=Done.CART_TAKEN, why=str(exc))  # which: paid, another reference
    return Result(done=Done.LINKED)
