"""One timeline per cart (or per gateway reference that matches no checkout), in the order it
happened: the core's stories of its checkouts' gateway orders
(``payhooks.operations.timeline.told``: every delivery as it was answered, the records,
confirmations and amount mismatches), and what only the shop knows, added through the timeline's
``Extension``: the checkout, the payment's states, the order and its stock, the emails and alerts,
and what operators did."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from payhooks.console.formats import action_words, result_words, rupees
from payhooks.events import EventKind, Provider
from payhooks.gateways import Adapter, title_of
from payhooks.intake.disputes import Dispute
from payhooks.intake.stored import received_stored
from payhooks.operations import timeline
from payhooks.operations.timeline import Line, Lookup, Record
from payhooks.plumbing.db import Connection, Named, named_row, named_rows
from payhooks.plumbing.errors import NotFound, PayhooksError
from payhooks.refunding.refunds import Refund, RefundState, of_payment
from payhooks.service.console.actions import readable_error
from payhooks.service.console.search import LOOKUPS
from payhooks.service.shop import double_refunds
from payhooks.service.shop.states import TARGET, PaymentStatus, advance
from payhooks.settlements import listing


class Tone(StrEnum):
    """How an entry reads at a glance (its colour)."""

    GOOD = "good"
    PLAIN = "plain"
    WARN = "warn"
    BAD = "bad"


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One request of a delivery: the gateway's retries of one key are attempts of one entry."""

    at: datetime
    answer: str
    verified: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    at: datetime
    kind: str
    title: str
    facts: tuple[tuple[str, str | datetime], ...] = ()
    """What it says, by name; a time is shown in the console's zone."""
    tone: Tone = Tone.PLAIN
    delivery: tuple[str, str] | None = None  # (provider, delivery key) of its stored record
    dead_letter: int | None = None  # an outbox id an operator may queue again
    parked: tuple[str, str] | None = None  # a parked record an operator may replay
    attempts: tuple[Attempt, ...] = ()
    """Every request of its delivery key, oldest first (one, for most)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Story:
    title: str
    cart: dict[str, Any] | None
    items: list[dict[str, Any]]
    payments: list[dict[str, Any]]
    order: dict[str, Any] | None
    entries: list[Entry] = field(default_factory=list)
    refunds: list[Refund] = field(default_factory=list)
    """The refund intents of its payments (``payhooks.refunding.refunds``), oldest first."""
    disputes: list[Dispute] = field(default_factory=list)
    """The disputes of its payments, as the core holds them (``payhooks.intake.disputes``)."""
    settled: list[listing.Entry] = field(default_factory=list)
    """The settlement lines naming its payments (``payhooks.settlements``), oldest first."""
    unsettled: list[listing.Unsettled] = field(default_factory=list)
    """Its captures no payout named within their gateway's cycle and the margin."""
    mismatched: list[timeline.KeptMismatch] = field(default_factory=list)
    """Its payments not the amount expected whose deliveries the purge deleted: what is kept
    of them (both amounts, how they were settled)."""

    def on_its_way(self, provider: str, payment_id: str) -> str | None:
        """The state of the payment's refund still on its way (``requested`` or ``sent``),
        whose button asks for nothing more: the page says it was already asked for."""
        waiting = (r for r in self.refunds if r.state in _ON_ITS_WAY)
        found = (r for r in waiting if (r.provider.value, r.payment_id) == (provider, payment_id))
        return next((r.state.value for r in found), None)


_ON_ITS_WAY = (RefundState.REQUESTED, RefundState.SENT)


_CART = "SELECT * FROM carts WHERE id = %s"
_ITEMS = "SELECT sku, quantity, price_paise FROM cart_items WHERE cart_id = %s ORDER BY sku"
_CHECKOUTS = "SELECT * FROM checkouts WHERE cart_id = %s ORDER BY created_at"
# Each payment with what is left to refund of it (``double_refunds.REFUNDABLE``): the amount
# its Refund button asks for; its gateway order (whose page tells it from the core's tables)
# and its UTR/RRN, kept on its record past the purge of its deliveries (core 0036).
_PAYMENTS = f"""
SELECT p.*, {double_refunds.REFUNDABLE} AS refundable_paise,
       {double_refunds.ORDER} AS gateway_order_id, c.bank_ref
FROM payments p {double_refunds.RECORD}
"""
_CART_PAYMENTS = _PAYMENTS + "WHERE p.cart_id = %s ORDER BY p.created_at"
# The payments the cart's deliveries name that the shop did not tie to the cart.
_NAMED_PAYMENTS = (
    _PAYMENTS + "WHERE (p.provider, p.payment_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
)
_ORDER = "SELECT * FROM orders WHERE cart_id = %s"
_MOVEMENTS = "SELECT * FROM inventory_movements WHERE order_id = %s ORDER BY id"
_MESSAGES = """
SELECT id, kind, dedupe_key, recipient, subject, created_at, attempts, sent_at, failed_at,
       last_error
FROM outbox
WHERE (payload ? 'order_id' AND payload ->> 'order_id' = ANY(%(orders)s))
   OR (payload ? 'payment_id' AND payload ->> 'payment_id' = ANY(%(payment_ids)s))
   OR (payload ? 'event_id' AND payload ->> 'event_id' = ANY(%(event_ids)s))
ORDER BY created_at, id
"""
_ACTIONS = "SELECT * FROM payhooks_console_actions WHERE target = ANY(%s) ORDER BY at, id"


def of_cart(conn: Connection, cart_id: str, adapters: Mapping[Provider, Adapter]) -> Story:
    cart = named_row(conn, _CART, (cart_id,))
    if cart is None:
        raise NotFound("cart", cart_id)
    shop = Shop(
        adapters=adapters,
        cart=cart,
        checkouts=named_rows(conn, _CHECKOUTS, (cart_id,)),
        order=named_row(conn, _ORDER, (cart_id,)),
        own=named_rows(conn, _CART_PAYMENTS, (cart_id,)),
    )
    orders = [(c["provider"], c["gateway_order_id"]) for c in shop.checkouts]
    paid = [(p["provider"], p["payment_id"]) for p in shop.own]
    told = timeline.told(conn, orders, shop, paid)
    added = told.extra
    return Story(
        title=f"Cart {cart_id}",
        cart=cart,
        items=named_rows(conn, _ITEMS, (cart_id,)),
        payments=added.payments,
        order=shop.order,
        entries=added.entries,
        refunds=[
            r for p in added.payments for r in of_payment(conn, p["provider"], p["payment_id"])
        ],
        **_of_payments(told.stories),
    )


def _of_payments(stories: Sequence[timeline.Story]) -> dict[str, Any]:
    """What the core's stories tell of the payments beside their entries, each once, as a
    cart's page and a reference's both show it: the disputes, the mismatches kept past the
    purge, the settlement lines and the flags."""
    lines = {(e.provider, e.settlement_id, e.entry_type, e.entry_id): e
             for s in stories for e in s.settled}  # fmt: skip
    flags = {(u.provider, u.payment_id): u for s in stories for u in s.unsettled}
    return {
        "disputes": disputes_of(stories),
        "mismatched": [m for s in stories for m in s.mismatched],
        "settled": list(lines.values()),
        "unsettled": list(flags.values()),
    }


def of_reference(
    conn: Connection, provider: str, reference: str, adapters: Mapping[Provider, Adapter]
) -> Story:
    """Deliveries naming a gateway reference that matches no checkout (parked, mostly)."""
    told = timeline.told(conn, [(provider, reference)], Shop(adapters=adapters))
    if not any(s.records or s.lines for s in told.stories):
        raise NotFound("reference", reference)
    return Story(
        title=f"{title_of(provider)} reference {reference}",
        cart=None,
        items=[],
        payments=[],
        order=None,
        entries=told.extra.entries,
        **_of_payments(told.stories),
    )


def disputes_of(stories: Sequence[timeline.Story]) -> list[Dispute]:
    """The disputes of ``stories`` once each, in the order they were opened."""
    found = {(d.provider, d.dispute_id): d for s in stories for d in s.disputes}
    return sorted(found.values(), key=lambda d: (d.opened_at, d.dispute_id))


# --- the shop's extension of the timeline ----------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Added:
    """What the shop adds to its checkouts' stories."""

    payments: list[Named]
    """Its payments: the cart's, and those its deliveries name, oldest first."""
    entries: list[Entry]


@dataclass(frozen=True, slots=True, kw_only=True)
class Shop:
    """The shop's ``timeline.Extension``: its search keys (``search.LOOKUPS``), and for one
    cart (or none, for a reference no checkout names) the entries only it can tell."""

    adapters: Mapping[Provider, Adapter]
    cart: Named | None = None
    checkouts: list[Named] = field(default_factory=list)
    order: Named | None = None
    own: list[Named] = field(default_factory=list)
    """The cart's payments (``payments.cart_id``)."""
    lookups: Sequence[Lookup] = LOOKUPS

    def extra(self, conn: Connection, stories: Sequence[timeline.Story]) -> Added:
        records, lines = timeline.records_of(stories), timeline.lines_of(stories)
        payments = self._payments(conn, records)
        facts = _Facts(cart=self.cart, payments=payments)
        entries = [*map(_checkout_entry, self.checkouts)]
        entries += _delivery_entries(lines, records, facts)
        purged = [(s.provider, p) for s in stories for p in s.payments if not p.stored]
        entries += _state_entries(conn, records, self.adapters, facts, purged)
        if self.order is not None:
            entries += [_order_entry(self.order)]
            entries += map(_movement_entry, named_rows(conn, _MOVEMENTS, (self.order["id"],)))
        entries += self._told_by_others(conn, records, payments)
        entries.sort(key=lambda e: (e.at, _RANK.get(e.kind, len(_RANK))))
        return Added(payments=payments, entries=entries)

    def _payments(self, conn: Connection, records: list[tuple[str, Record]]) -> list[Named]:
        if self.cart is None:
            return []  # a reference no checkout names: no payment of the shop's is its
        named = {(p, r.payment_id) for p, r in records if r.payment_id}
        pairs = sorted(named - {(p["provider"], p["payment_id"]) for p in self.own})
        params = ([p for p, _ in pairs], [i for _, i in pairs])
        found = self.own + named_rows(conn, _NAMED_PAYMENTS, params) if pairs else self.own
        return sorted(found, key=lambda p: p["created_at"])

    def _told_by_others(
        self, conn: Connection, records: list[tuple[str, Record]], payments: list[Named]
    ) -> list[Entry]:
        """The emails and alerts about the order, its payments or its deliveries, and what
        operators did to them."""
        event_ids = [r.event_id for _, r in records]
        pays = [p["payment_id"] for p in payments]
        params = {
            "orders": [self.order["id"]] if self.order else [],
            "payment_ids": pays + [r.payment_id or "" for _, r in records],
            "event_ids": event_ids,
        }
        messages = named_rows(conn, _MESSAGES, params)
        targets = event_ids + [str(m["id"]) for m in messages] + pays
        actions = named_rows(conn, _ACTIONS, (targets,))
        return [*map(_message_entry, messages), *map(_action_entry, actions)]


# What happened first when several things share one instant (one transaction's now()).
_KINDS_IN_ORDER = ("checkout", "delivery", "payment", "order", "stock", "email", "alert")
_RANK = {kind: n for n, kind in enumerate(_KINDS_IN_ORDER)}


# --- entries ---------------------------------------------------------------------------------

_TONE_OF_OUTCOME = {
    "processed": Tone.GOOD,
    "duplicate": Tone.PLAIN,
    "ignored": Tone.PLAIN,
    "parked": Tone.WARN,
    "confirming": Tone.PLAIN,
    "confirmed": Tone.GOOD,
    "refuted": Tone.BAD,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Facts:
    """What the shop's tables add to a record's facts."""

    cart: Named | None
    payments: list[Named]

    def mismatch(self, provider: str, record: Record | None) -> tuple[str, str] | None:
        """Both amounts of a payment that was not the amount expected, as a fact: one the core
        parked for its amount, or a capture the shop itself flagged ``amount_mismatch`` (a
        checkout from before the expectations), against the cart's amount."""
        if record is None:
            return None
        found = record.amount_mismatch
        if found is not None:
            return _amounts(found.paid_paise, found.expected_paise, found.resolution)
        flagged = [
            p["amount_paise"]
            for p in self.payments
            if (p["provider"], p["payment_id"]) == (provider, record.payment_id)
            and "amount_mismatch" in (p.get("flags") or ())
        ]
        if not flagged or self.cart is None or self.cart["amount_paise"] is None:
            return None
        return _amounts(flagged[0], self.cart["amount_paise"], None)


def _amounts(paid: int | None, expected: int, resolution: str | None) -> tuple[str, str]:
    settled = f" (settled: {resolution})" if resolution else ""
    return ("amount mismatch", f"captured {rupees(paid)}, expected {rupees(expected)}{settled}")


def _confirmation(record: Record | None) -> tuple[str, str] | None:
    """What the gateway's API said of a callback resting on a static credential, as a fact
    (none where a person settled it by hand: ``_settled`` says so)."""
    if record is None or record.confirmation is None or record.settled is not None:
        return None
    said = record.confirmation
    if said.verdict is None:
        times = "time" if said.attempts == 1 else "times"
        return ("status API", f"not confirmed yet (asked {said.attempts} {times})")
    return ("status API", f"{said.verdict}: {said.detail}")


def _settled(record: Record | None) -> tuple[tuple[str, str | datetime], ...]:
    """A delivery a person settled by hand (``payhooks resolve``: parked, or waiting for its
    gateway's API), as facts: when (a moment, written in the console's zone as every time of
    the page), and their words."""
    if record is None or record.settled is None:
        return ()
    said = record.settled
    return (("settled by hand", said.at), ("their words", said.note))


def _checkout_entry(row: Named) -> Entry:
    return Entry(
        at=row["created_at"],
        kind="checkout",
        title=f"Checkout with {title_of(row['provider'])}",
        facts=(("gateway order id", row["gateway_order_id"]),),
    )


def _delivery_entries(
    lines: list[tuple[str, Line]], records: list[tuple[str, Record]], facts: _Facts
) -> list[Entry]:
    stored = {(p, r.event_id): r for p, r in records}
    entries = [_logged_entry(group, stored, facts) for group in _by_key(lines)]
    seen = {(provider, line.event_id) for provider, line in lines}
    # Records kept from before the delivery log, or whose log line was lost with the database.
    entries += [
        _record_entry(p, r, facts) for (p, key), r in stored.items() if (p, key) not in seen
    ]
    return entries


def _by_key(lines: list[tuple[str, Line]]) -> list[list[tuple[str, Line]]]:
    """The log's lines, those of one delivery key together (a gateway's retries of one
    delivery), in the order of each key's first request; a line without a key alone."""
    groups: dict[tuple[str, str] | int, list[tuple[str, Line]]] = {}
    for n, (provider, line) in enumerate(lines):
        key = (provider, line.event_id) if line.event_id else n
        groups.setdefault(key, []).append((provider, line))
    return list(groups.values())


def _answer(line: Line) -> str:
    return f"HTTP {line.status} {line.outcome}"


def _logged_entry(
    group: list[tuple[str, Line]], stored: Mapping[tuple[str, str], Record], facts: _Facts
) -> Entry:
    provider, first = group[0]
    last = group[-1][1]
    key = (provider, first.event_id or "")
    record = stored.get(key) if first.event_id else None
    outcome = record.outcome if record is not None else last.outcome
    tone = _TONE_OF_OUTCOME.get(outcome, Tone.BAD if last.status >= 500 else Tone.WARN)
    said: list[tuple[str, str | datetime]] = [
        ("answer", _answer(first)),
        ("signature", "verified" if first.verified else "refused"),
        ("delivery key", first.event_id or "—"),
    ]
    if len(group) > 1:
        said.append(("attempts", f"{len(group)}, the last answered {_answer(last)}"))
    if any(line.mismatch for _, line in group):
        said.append(("body", "differs from the first delivery of this key (mismatch)"))
        tone = Tone.WARN
    if record is not None and record.bank_ref:
        said.append(("bank reference", record.bank_ref))
    for known in (_confirmation(record), *_settled(record)):
        if known is not None:
            said.append(known)
            tone = _TONE_OF_OUTCOME.get(outcome, tone)
    if (amounts := facts.mismatch(provider, record)) is not None:
        said.append(amounts)
        tone = Tone.WARN
    return Entry(
        at=first.received_at,
        kind="delivery",
        title=f"{title_of(provider)} {first.event_type or 'delivery'}",
        facts=tuple(said),
        tone=tone,
        delivery=key if record is not None else None,
        parked=key if record is not None and record.parked else None,
        attempts=tuple(
            Attempt(at=line.received_at, answer=_answer(line), verified=line.verified)
            for _, line in group
        ),
    )


def _record_entry(provider: str, record: Record, facts: _Facts) -> Entry:
    """A record without a line in the delivery log: found through a gateway's status API
    (reconciliation), or kept from before the log existed."""
    key = (provider, record.event_id)
    if record.reconciled:
        title = f"{title_of(provider)} status API: {record.event_type}"
    else:
        title = f"{title_of(provider)} {record.event_type} (recorded)"
    amounts = facts.mismatch(provider, record)
    tone = _TONE_OF_OUTCOME.get(record.outcome, Tone.PLAIN)
    return Entry(
        at=record.at,
        kind="delivery",
        title=title,
        facts=(
            ("outcome", record.outcome),
            ("delivery key", record.event_id),
            *filter(None, [_confirmation(record), *_settled(record), amounts]),
        ),
        tone=Tone.WARN if amounts else tone,
        delivery=key,
        parked=key if record.parked else None,
    )


def _state_entries(
    conn: Connection,
    records: list[tuple[str, Record]],
    adapters: Mapping[Provider, Adapter],
    facts: _Facts,
    purged: Sequence[tuple[str, timeline.Payment]] = (),
) -> list[Entry]:
    """The payment states the recorded deliveries moved each payment through, replayed with
    the state machine itself (``states.advance``) on the stored bodies; first, those of the
    payments whose delivery the purge took, from their records (``purged``: kept a refund's
    year), so a refund kept is told after the capture it refunds."""
    moves: list[tuple[datetime, str, str, EventKind | None, str, Record | None]] = [
        (payment.applied_at, provider, payment.payment_id,
         EventKind(payment.kind) if payment.kind in _KINDS else None, PURGED_BY, None)
        for provider, payment in sorted(purged, key=lambda pair: pair[1].applied_at)
    ]  # fmt: skip
    moves += [
        (record.at, provider, record.payment_id, _kind_of(conn, provider, record, adapters),
         record.event_type, record)
        for provider, record in records
        if record.outcome == "processed" and record.payment_id
    ]  # fmt: skip
    current: dict[tuple[str, str], PaymentStatus | None] = {}
    entries: list[Entry] = []
    for at, provider, payment_id, kind, by, record in moves:
        target = TARGET.get(kind) if kind is not None else None
        before = current.get((provider, payment_id))
        after = advance(before, target) if target is not None else None
        if after is None:
            continue
        current[(provider, payment_id)] = after
        amounts = facts.mismatch(provider, record)
        entries.append(
            Entry(
                at=at,
                kind="payment",
                title=f"Payment {payment_id}: {before or 'new'} → {after}",
                facts=(("by", by), *filter(None, [amounts])),
                tone=_payment_tone(after, amounts),
            )
        )
    return entries


_KINDS = frozenset(kind.value for kind in EventKind)
PURGED_BY = "its delivery, purged (the payment's record keeps it)"
"""What brought a payment whose delivery the purge took, as its state's entry says."""


def _payment_tone(after: PaymentStatus, amounts: tuple[str, str] | None) -> Tone:
    """A capture of another amount than the cart's is no success, whatever its state."""
    if amounts is not None:
        return Tone.WARN
    return Tone.GOOD if after is PaymentStatus.CAPTURED else Tone.PLAIN


def _kind_of(
    conn: Connection, provider: str, record: Record, adapters: Mapping[Provider, Adapter]
) -> EventKind | None:
    try:
        return received_stored(conn, adapters, record.event_id, provider).event.kind
    except PayhooksError:
        return None  # a gateway served no more, or a record that no longer reads


def _order_entry(order: Named) -> Entry:
    return Entry(
        at=order["created_at"],
        kind="order",
        title=f"Order {order['id']} {order['status']}",
        facts=(
            ("paid by", f"{title_of(order['provider'])} {order['payment_id']}"),
            ("amount", rupees(order["amount_paise"])),
            ("from delivery", order["event_id"]),
        ),
        tone=Tone.GOOD if order["status"] == "confirmed" else Tone.WARN,
    )


def _movement_entry(move: Named) -> Entry:
    return Entry(
        at=move["created_at"],
        kind="stock",
        title=f"Stock {move['sku']} {move['delta']:+d} ({move['reason']})",
    )


def _message_entry(message: Named) -> Entry:
    sent: list[tuple[str, str | datetime]] = []
    if message["sent_at"] is not None:
        state, tone = "sent", Tone.GOOD
        sent = [("sent at", message["sent_at"])]
    elif message["failed_at"] is not None:
        state, tone = f"dead letter: {readable_error(message['last_error'])}", Tone.BAD
    else:
        state, tone = f"waiting (attempts {message['attempts']})", Tone.PLAIN
    facts = [("to", message["recipient"] or "operators"), ("state", state), *sent]
    return Entry(
        at=message["created_at"],
        kind=str(message["kind"]),
        title=message["subject"],
        facts=tuple(facts),
        tone=tone if message["kind"] == "email" else (Tone.WARN if tone is Tone.GOOD else tone),
        dead_letter=message["id"] if message["failed_at"] is not None else None,
    )


def _action_entry(action: Named) -> Entry:
    return Entry(
        at=action["at"],
        kind="operator",
        title=f"{action['operator']}: {action_words(action['action'])} {action['target']}",
        facts=(("result", result_words(action["result"])),),
    )
