"""Apply one normalised event to the shop, inside the caller's claim transaction.

Every effect here is business-keyed (one payment row per attempt, one order per cart, one
refund row per refund), so two *different* deliveries with the same meaning, such as
Razorpay's ``payment.captured`` and ``order.paid``, take effect once.
"""

from __future__ import annotations

from dataclasses import dataclass

from payhooks.events import Event, EventKind
from payhooks.gateways import title_of
from payhooks.intake import disputes
from payhooks.intake.ingest import Applied, Outcome
from payhooks.plumbing.db import Connection
from payhooks.service import outbox
from payhooks.service.shop.double_refunds import taken_back
from payhooks.service.shop.ids import record
from payhooks.service.shop.orders import place_order
from payhooks.service.shop.states import TARGET, PaymentStatus, advance


@dataclass(frozen=True, slots=True, kw_only=True)
class Payment:
    provider: str
    payment_id: str
    status: str
    cart_id: str | None
    amount_paise: int | None
    needs_refund: bool
    flags: tuple[str, ...]


_CART_OF_CHECKOUT = "SELECT cart_id FROM checkouts WHERE provider = %s AND gateway_order_id = %s"
_CART_OF_PAYMENT = "SELECT cart_id FROM payments WHERE provider = %s AND payment_id = %s"
_NEW_PAYMENT = """
INSERT INTO payments (provider, payment_id, cart_id, status, amount_paise, payment_amount_paise,
                      currency)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (provider, payment_id) DO NOTHING
RETURNING status
"""
# The capture is a fact apart from the status: a refund can set the status before the capture
# it refunds arrives, and that capture must still end in an order or a flag.
_FIRST_CAPTURE = """
UPDATE payments SET captured_at = now(), updated_at = now(),
    amount_paise = coalesce(%s, amount_paise),
    payment_amount_paise = coalesce(%s, payment_amount_paise),
    currency = coalesce(%s, currency)
WHERE provider = %s AND payment_id = %s AND captured_at IS NULL
RETURNING refunded_paise, coalesce(payment_amount_paise, amount_paise)
"""
_LOCK_PAYMENT = """
SELECT status FROM payments WHERE provider = %s AND payment_id = %s FOR NO KEY UPDATE
"""
_SET_STATUS = """
UPDATE payments SET status = %s, updated_at = now(),
    amount_paise = coalesce(%s, amount_paise),
    payment_amount_paise = coalesce(%s, payment_amount_paise),
    currency = coalesce(%s, currency)
WHERE provider = %s AND payment_id = %s
"""
_FLAG = """
UPDATE payments SET flags = array_append(flags, %s), needs_refund = needs_refund OR %s,
    updated_at = now()
WHERE provider = %s AND payment_id = %s AND NOT (%s = ANY(flags))
"""
# NO KEY UPDATE, not UPDATE: every payment row inserted for a cart holds KEY SHARE on it
# (foreign key), and FOR UPDATE would deadlock two tabs paying the same cart at once.
_LOCK_CART = """
SELECT status, amount_paise, currency, customer_email FROM carts WHERE id = %s
FOR NO KEY UPDATE
"""
_ORDER_PAID_BY = "SELECT id FROM orders WHERE cart_id = %s AND provider = %s AND payment_id = %s"
_PAID_BY = "SELECT id, provider, payment_id FROM orders WHERE cart_id = %s"
_NEW_REFUND = """
INSERT INTO refunds (provider, refund_id, payment_id, amount_paise) VALUES (%s, %s, %s, %s)
ON CONFLICT DO NOTHING RETURNING 1
"""
_ADD_REFUNDED = """
UPDATE payments SET refunded_paise = refunded_paise + %s, updated_at = now()
WHERE provider = %s AND payment_id = %s
RETURNING refunded_paise, coalesce(payment_amount_paise, amount_paise)
"""
_GET = """
SELECT provider, payment_id, status, cart_id, amount_paise, needs_refund, flags
FROM payments WHERE provider = %s AND payment_id = %s
"""


def apply_event(conn: Connection, event: Event) -> Applied:
    """The reference shop's handler: payment state machine, order, stock, outbox. A kind
    takes the path of what the state machine makes of it (``states.target``, which matches
    every kind: mypy refuses a new one it does not place), a dispute the core's
    (``EventKind.is_dispute``); one that moves no payment (a settlement) is ignored."""
    if event.kind.is_dispute:
        return _apply_dispute(conn, event)
    match TARGET.get(event.kind):
        case None:
            return Applied(outcome=Outcome.IGNORED)
        case PaymentStatus.REFUNDED:
            return _apply_refund(conn, event)
        case _:
            return _apply_payment(conn, event)


def _apply_payment(conn: Connection, event: Event) -> Applied:
    """A payment's event: its row moved forward; on its first capture, the order."""
    cart_id = _cart_of(conn, event)
    if cart_id is None:
        return _park(conn, event, "no checkout matches its reference", _AWAITS_CHECKOUT)
    _move_payment(conn, event, cart_id)
    if event.kind is EventKind.PAYMENT_CAPTURED:
        captured = _first_capture(conn, event)
        if captured is not None:
            return Applied(
                outcome=Outcome.PROCESSED, order_id=_capture(conn, event, cart_id, captured)
            )
    return Applied(outcome=Outcome.PROCESSED, order_id=_order_paid_by(conn, cart_id, event))


def _cart_of(conn: Connection, event: Event) -> str | None:
    provider = event.provider.value
    if event.merchant_ref is not None:
        row = conn.execute(_CART_OF_CHECKOUT, (provider, event.merchant_ref)).fetchone()
        if row:
            return str(row[0])
    row = conn.execute(_CART_OF_PAYMENT, (provider, event.payment_id)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _move_payment(conn: Connection, event: Event, cart_id: str) -> PaymentStatus | None:
    """Record the event on its payment row; returns the new status, or None if unchanged."""
    target = TARGET[event.kind]
    amounts = (event.amount_paise, event.payment_amount_paise, event.currency)
    key = (event.provider.value, event.payment_id)
    created = conn.execute(_NEW_PAYMENT, (*key, cart_id, target.value, *amounts)).fetchone()
    if created:
        return target
    row = conn.execute(_LOCK_PAYMENT, key).fetchone()
    new = advance(PaymentStatus(row[0]), target) if row else None
    if new is not None:
        conn.execute(_SET_STATUS, (new.value, *amounts, *key))
    return new


@dataclass(frozen=True, slots=True, kw_only=True)
class _Money:
    """What was refunded of a payment so far, and what it paid (None until a report says)."""

    refunded: int
    paid: int | None

    @property
    def fully_refunded(self) -> bool:
        return self.refunded > 0 and self.paid is not None and self.refunded >= self.paid

    @property
    def over_refunded(self) -> bool:
        return self.paid is not None and self.refunded > self.paid


def _first_capture(conn: Connection, event: Event) -> _Money | None:
    """Mark the payment captured; None when an earlier capture report already did."""
    amounts = (event.amount_paise, event.payment_amount_paise, event.currency)
    row = conn.execute(
        _FIRST_CAPTURE, (*amounts, event.provider.value, event.payment_id)
    ).fetchone()
    return None if row is None else _Money(refunded=row[0], paid=row[1])


def _capture(conn: Connection, event: Event, cart_id: str, money: _Money) -> str | None:
    """First capture of this payment: an order, unless the money is already back with the
    customer, the cart is paid, or the amount is off; each of those is flagged."""
    if money.over_refunded:
        _flag_over_refund(conn, event, money)
    if money.fully_refunded:
        _flag(
            conn,
            event,
            "captured_after_full_refund",
            f"was captured after its full amount was refunded, so no order was placed for "
            f"cart {cart_id}",
            needs_refund=False,
        )
        return _order_paid_by(conn, cart_id, event)
    status, amount, currency, email = conn.execute(_LOCK_CART, (cart_id,)).fetchone()  # type: ignore[misc]
    if status == "paid":
        # Read after the lock, in a statement of its own: a join in the locking statement
        # would see the order table as it was before the wait.
        order_id, provider, payment_id = conn.execute(_PAID_BY, (cart_id,)).fetchone()  # type: ignore[misc]
        if (provider, payment_id) == (event.provider.value, event.payment_id):
            return str(order_id)  # this payment's own order (placed before captured_at existed)
        _flag(
            conn,
            event,
            "duplicate_payment",
            f"was captured but cart {cart_id} is already paid (order {order_id})",
        )
        return None  # money to give back: this payment paid no order
    if event.amount_paise != amount or (event.currency or "INR") != currency:
        got = f"{event.amount_paise} {event.currency or 'INR'}"
        _flag(
            conn,
            event,
            "amount_mismatch",
            f"was captured for {got} but cart {cart_id} is {amount} {currency}",
        )
        return None
    return place_order(conn, event, cart_id, email)


def _flag(
    conn: Connection, event: Event, flag: str, why: str, *, needs_refund: bool = True
) -> None:
    """Mark a payment an operator must look at, and tell the merchant once per flag."""
    key = (event.provider.value, event.payment_id)
    conn.execute(_FLAG, (flag, needs_refund, *key, flag))
    action = "It needs a refund." if needs_refund else "No refund is due; please check it."
    subject = "Refund needed" if needs_refund else "Check payment"
    outbox.enqueue(
        conn,
        outbox.alert(
            f"alert:{flag}:{key[0]}:{key[1]}",
            f"{subject}: {flag.replace('_', ' ')} for {title_of(key[0])} payment {key[1]}",
            f"{title_of(key[0])} payment {key[1]} {why}. {action}",
            provider=key[0],
            payment_id=key[1],
            flag=flag,
            event_id=event.event_id,
        ),
    )


def _flag_over_refund(conn: Connection, event: Event, money: _Money) -> None:
    _flag(
        conn,
        event,
        "over_refund",
        f"has refunds of {money.refunded} paise, more than the {money.paid} paise it paid",
        needs_refund=False,
    )


def _apply_refund(conn: Connection, event: Event) -> Applied:
    """Record a refund once per refund id. A refund that overtakes its capture (or races it)
    waits on, or creates, the payment row; the late capture then finds what was refunded.
    A refund that names no payment (PhonePe's, when its original order shows no one completed
    payment) is parked: which payment it returned is a person's call."""
    if event.payment_id is None:
        return _park(conn, event, "the refund names no payment it returns", _NAMES_NO_PAYMENT)
    cart_id = _cart_of(conn, event)
    if cart_id is None:
        return _park(conn, event, "neither its payment nor its checkout is known", _AWAITS_PAYMENT)
    _move_payment(conn, event, cart_id)
    key = (event.provider.value, event.payment_id)
    refund = (key[0], event.refund_id, key[1], event.refund_amount_paise)
    if conn.execute(_NEW_REFUND, refund).fetchone():
        row = conn.execute(_ADD_REFUNDED, (event.refund_amount_paise, *key)).fetchone()
        money = _Money(refunded=row[0], paid=row[1]) if row else None
        if money is not None:
            _check_refunds(conn, event, cart_id, money)
    return Applied(outcome=Outcome.PROCESSED, order_id=_order_paid_by(conn, cart_id, event))


# The order the disputed payment paid, marked with where its dispute stands (the core keeps
# the dispute itself, in order: only a report that moves it reaches here). The cart is locked
# first, in a statement of its own: a capture holds it from before it inserts the order until
# it commits, on either path, so the report marks the order that capture committed, or, when
# it commits first, is what the order's insert reads after its wait (shop migration 0023).
_LOCK_DISPUTED_CART = "SELECT 1 FROM carts WHERE id = %s FOR NO KEY UPDATE"
_MARK_ORDER = """
UPDATE orders SET dispute = %s, dispute_id = %s
WHERE cart_id = %s AND provider = %s AND payment_id = %s
RETURNING id
"""


def _apply_dispute(conn: Connection, event: Event) -> Applied:
    """A dispute of a payment marks the order that payment paid (the console shows it; a
    person answers the dispute at the gateway). A dispute of a payment that paid no order (a
    second payment of a paid cart, a flagged one) marks nothing; one of a payment this shop
    never took is parked like a refund of it. A loss that leaves nothing of a payment flagged
    for a refund clears its flag (``double_refunds.taken_back``)."""
    cart_id = _cart_of(conn, event)
    if cart_id is None:
        return _park(conn, event, "neither its payment nor its checkout is known", _DISPUTED)
    dispute = event.dispute.id if event.dispute else None
    status = disputes.STATUS[event.kind].value
    key = (event.provider.value, event.payment_id)
    if event.payment_id is not None:  # the payment's row before the cart, as a capture
        taken_back(conn, event.provider.value, event.payment_id)
    conn.execute(_LOCK_DISPUTED_CART, (cart_id,))
    marked = conn.execute(_MARK_ORDER, (status, dispute, cart_id, *key)).fetchone()
    return Applied(outcome=Outcome.PROCESSED, order_id=str(marked[0]) if marked else None)


# A payment refunded in full needs no refund any more (a double payment, refunded).
_REFUNDED_IN_FULL = """
UPDATE payments SET needs_refund = false
WHERE provider = %s AND payment_id = %s AND needs_refund
"""


def _check_refunds(conn: Connection, event: Event, cart_id: str, money: _Money) -> None:
    """Refunds beyond what was paid, or the whole of a payment that paid an order: the
    order stands (it is the merchant's to cancel), so an operator must hear of it. Refunds
    of what lost disputes left of a payment flagged for a refund leave it needing none."""
    if money.over_refunded:
        _flag_over_refund(conn, event, money)
    if not money.fully_refunded:
        if event.payment_id is not None:
            taken_back(conn, event.provider.value, event.payment_id)
        return
    conn.execute(_REFUNDED_IN_FULL, (event.provider.value, event.payment_id))
    paid = conn.execute(_PAID_BY, (cart_id,)).fetchone()
    if paid and (paid[1], paid[2]) == (event.provider.value, event.payment_id):
        _flag(
            conn,
            event,
            "refunded_after_order",
            f"paid order {paid[0]} and was then refunded in full; the order still stands",
            needs_refund=False,
        )


# What the operator does, by why a delivery was parked; ``{gateway}``, ``{refund}`` and
# ``{reference}`` are the event's.
_AWAITS_CHECKOUT = (
    "It is applied by itself once its checkout exists: the worker tries it again within a "
    "minute of the checkout being made, as does a redelivery by the gateway. A payment for "
    "no checkout of this shop will never apply: refund it at {gateway}."
)
_AWAITS_PAYMENT = (
    "It is applied by itself once its payment is recorded: the worker tries it again within "
    "a minute, as does a redelivery by the gateway. A refund of a payment this shop never "
    "took needs a person: look it up at {gateway}."
)
_DISPUTED = (
    "It is applied by itself once its payment is recorded: the worker tries it again within "
    "a minute. The dispute itself is recorded and on the console's Disputes page whatever "
    "becomes of this delivery: answer it at {gateway} before its deadline."
)
_NAMES_NO_PAYMENT = (
    "Nothing applies it by itself, and a redelivery will not: find at {gateway} which payment "
    "of order {reference} refund {refund} returned, and record it on that payment's order by "
    "hand. `payhooks parked` lists the delivery and `payhooks trace` shows it."
)


def _park(conn: Connection, event: Event, why: str, then: str) -> Applied:
    """One alert per unknown reference, however many deliveries (or replays) name it,
    saying what a person does for this reason of parking."""
    reference = event.merchant_ref or event.payment_id or event.event_id
    gateway = title_of(event.provider.value)
    action = then.format(gateway=gateway, refund=event.refund_id, reference=reference)
    outbox.enqueue(
        conn,
        outbox.alert(
            f"alert:parked:{event.provider.value}:{reference}",
            f"Webhook parked: {gateway} {event.event_type}",
            f"Delivery {event.event_id} was parked because {why}. {action}",
            provider=event.provider.value,
            event_id=event.event_id,
            reference=event.merchant_ref,
        ),
    )
    return Applied(outcome=Outcome.PARKED)


def _order_paid_by(conn: Connection, cart_id: str, event: Event) -> str | None:
    """The order ``event``'s payment paid, if any: the one an answer and a relayed message
    name. Not its cart's order: a second payment of a paid cart paid none (its events named
    the first payment's order, and a consumer shipping each captured order shipped it twice)."""
    paid_by = (cart_id, event.provider.value, event.payment_id)
    row = conn.execute(_ORDER_PAID_BY, paid_by).fetchone()
    return None if row is None else str(row[0])


def get_payment(conn: Connection, provider: str, payment_id: str) -> Payment:
    found = record(conn, _GET, (provider, payment_id), "payment")
    return Payment(**{**found, "flags": tuple(found["flags"])})
