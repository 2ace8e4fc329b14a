"""One timeline per cart (or per gateway reference that matches no checkout): the checkout,
every delivery as it was answered, the payment's states, the order and its stock, the emails
and alerts, and what operators did, in the order it happened."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from psycopg.rows import dict_row

from payhooks.console.formats import rupees
from payhooks.events import EventKind, Provider
from payhooks.gateways._reports import is_reconciled
from payhooks.intake.stored import received_again
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import NotFound, PayhooksError
from payhooks.providers import Adapter
from payhooks.refunding.refunds import Refund, of_payment
from payhooks.service.console.actions import readable_error
from payhooks.service.shop.states import TARGET, PaymentStatus, advance


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
    """The refund intents of its payments (``payhooks.refunds``), oldest first."""


_CART = "SELECT * FROM carts WHERE id = %s"
_ITEMS = "SELECT sku, quantity, price_paise FROM cart_items WHERE cart_id = %s ORDER BY sku"
_CHECKOUTS = "SELECT * FROM checkouts WHERE cart_id = %s ORDER BY created_at"
# Each lookup starts from the few (provider, reference) and (provider, payment id) pairs a
# story names and joins through an index; an OR of two IN lists would read the table whole.
_NAMED_REF = """
unnest(%(providers)s::text[], %(refs)s::text[]) AS named (provider, ref)
JOIN {table} t ON t.provider = named.provider AND t.merchant_ref = named.ref
              AND t.merchant_ref IS NOT NULL
"""
_NAMED_PAY = """
unnest(%(pay_providers)s::text[], %(payment_ids)s::text[]) AS named (provider, payment_id)
JOIN {table} t ON t.provider = named.provider AND t.payment_id = named.payment_id
              AND t.payment_id IS NOT NULL
"""
_PAYMENTS = f"""
SELECT * FROM payments
WHERE (provider, payment_id) IN (
    SELECT provider, payment_id FROM payments WHERE cart_id = %(cart_id)s
    UNION
    SELECT t.provider, t.payment_id FROM {_NAMED_REF.format(table="processed_webhooks")})
ORDER BY created_at
"""
_ORDER = "SELECT * FROM orders WHERE cart_id = %s"
_MOVEMENTS = "SELECT * FROM inventory_movements WHERE order_id = %s ORDER BY id"
# Deliveries and records naming one of the references or payments.
_LOGGED = f"""
SELECT * FROM payhooks_deliveries
WHERE id IN (
    SELECT t.id FROM {_NAMED_REF.format(table="payhooks_deliveries")}
    UNION
    SELECT t.id FROM {_NAMED_PAY.format(table="payhooks_deliveries")})
ORDER BY received_at, id
"""
_RECORDS = f"""
SELECT w.provider, w.event_id, w.event_type, w.outcome, w.payment_id, w.merchant_ref,
       w.bank_ref, w.order_ref, w.processed_at, w.mismatches, w.body, w.headers,
       c.verdict, c.detail AS verdict_detail, c.attempts AS asked,
       m.expected_paise, m.paid_paise, m.resolution
FROM processed_webhooks w
LEFT JOIN payhooks_confirmations c ON c.provider = w.provider AND c.event_id = w.event_id
LEFT JOIN payhooks_amount_mismatches m ON m.provider = w.provider AND m.event_id = w.event_id
WHERE (w.provider, w.event_id) IN (
    SELECT t.provider, t.event_id FROM {_NAMED_REF.format(table="processed_webhooks")}
    UNION
    SELECT t.provider, t.event_id FROM {_NAMED_PAY.format(table="processed_webhooks")})
ORDER BY w.processed_at, w.event_id
"""
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
    reads = _Reads(conn)
    cart = reads.one(_CART, (cart_id,))
    if cart is None:
        raise NotFound("cart", cart_id)
    checkouts = reads.all(_CHECKOUTS, (cart_id,))
    refs = [(c["provider"], c["gateway_order_id"]) for c in checkouts]
    payments = reads.all(_PAYMENTS, {"cart_id": cart_id, **_pair_params(refs, [])})
    order = reads.one(_ORDER, (cart_id,))
    entries = [_checkout_entry(c) for c in checkouts]
    if order is not None:
        entries += [_order_entry(order)]
        entries += [_movement_entry(m) for m in reads.all(_MOVEMENTS, (order["id"],))]
    story = Story(
        title=f"Cart {cart_id}",
        cart=cart,
        items=reads.all(_ITEMS, (cart_id,)),
        payments=payments,
        order=order,
        refunds=[r for p in payments for r in of_payment(conn, p["provider"], p["payment_id"])],
    )
    pays = [(p["provider"], p["payment_id"]) for p in payments]
    return _with_deliveries(reads, story, entries, refs, pays, adapters)


def of_reference(
    conn: Connection, provider: str, reference: str, adapters: Mapping[Provider, Adapter]
) -> Story:
    """Deliveries naming a gateway reference that matches no checkout (parked, mostly)."""
    reads = _Reads(conn)
    story = Story(
        title=f"{provider} reference {reference}", cart=None, items=[], payments=[], order=None
    )
    return _with_deliveries(reads, story, [], [(provider, reference)], [], adapters)


def _with_deliveries(
    reads: _Reads,
    story: Story,
    entries: list[Entry],
    refs: Sequence[tuple[str, str]],
    pays: Sequence[tuple[str, str]],
    adapters: Mapping[Provider, Adapter],
) -> Story:
    params = _pair_params(refs, pays)
    records = reads.all(_RECORDS, params)
    logged = reads.all(_LOGGED, params)
    if not records and not logged and story.cart is None:
        raise NotFound("reference", refs[0][1] if refs else "")
    _mark_mismatched(records, story)
    entries += _delivery_entries(logged, records)
    entries += _state_entries(records, adapters)
    event_ids = [r["event_id"] for r in records]
    messages = reads.all(
        _MESSAGES,
        {
            "orders": [story.order["id"]] if story.order else [],
            "payment_ids": [p for _, p in pays] + [r["payment_id"] or "" for r in records],
            "event_ids": event_ids,
        },
    )
    entries += [_message_entry(m) for m in messages]
    targets = event_ids + [str(m["id"]) for m in messages] + [p for _, p in pays]
    entries += [_action_entry(a) for a in reads.all(_ACTIONS, (targets,))]
    entries.sort(key=lambda e: (e.at, _RANK.get(e.kind, len(_RANK))))
    return Story(
        title=story.title,
        cart=story.cart,
        items=story.items,
        payments=story.payments,
        order=story.order,
        entries=entries,
        refunds=story.refunds,
    )


# What happened first when several things share one instant (one transaction's now()).
_KINDS_IN_ORDER = ("checkout", "delivery", "payment", "order", "stock", "email", "alert")
_RANK = {kind: n for n, kind in enumerate(_KINDS_IN_ORDER)}


class _Reads:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def all(self, sql: str, params: Any) -> list[dict[str, Any]]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(sql, params).fetchall()

    def one(self, sql: str, params: Any) -> dict[str, Any] | None:
        rows = self.all(sql, params)
        return rows[0] if rows else None


def _columns(pairs: Iterable[tuple[str, str]]) -> tuple[list[str], list[str]]:
    listed = list(pairs)
    return [a for a, _ in listed], [b for _, b in listed]


def _pair_params(
    refs: Sequence[tuple[str, str]], pays: Sequence[tuple[str, str]]
) -> dict[str, list[str]]:
    providers, references = _columns(refs)
    pay_providers, payment_ids = _columns(pays)
    return {
        "providers": providers,
        "refs": references,
        "pay_providers": pay_providers,
        "payment_ids": payment_ids,
    }


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


def _confirmation(record: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """What the gateway's API said of a callback resting on a static credential, as a fact."""
    if record is None or record.get("asked") is None:
        return None
    if record["verdict"] is None:
        return ("status API", f"not confirmed yet (asked {record['asked']} times)")
    return ("status API", f"{record['verdict']}: {record['verdict_detail']}")


def _checkout_entry(row: dict[str, Any]) -> Entry:
    return Entry(
        at=row["created_at"],
        kind="checkout",
        title=f"Checkout with {row['provider']}",
        facts=(("gateway order id", row["gateway_order_id"]),),
    )


def _mark_mismatched(records: list[dict[str, Any]], story: Story) -> None:
    """A capture the shop itself flagged ``amount_mismatch`` (a checkout from before the
    expectations) carries both amounts, as one the core parked for its amount does."""
    expected = story.cart["amount_paise"] if story.cart else None
    flagged = {
        (p["provider"], p["payment_id"]): p["amount_paise"]
        for p in story.payments
        if "amount_mismatch" in (p.get("flags") or ())
    }
    for record in records:
        paid = flagged.get((record["provider"], record["payment_id"]))
        if record["expected_paise"] is None and paid is not None and expected is not None:
            record.update(expected_paise=expected, paid_paise=paid)


def _mismatch(record: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """Both amounts of a payment that was not the amount expected, as a fact."""
    if record is None or record.get("expected_paise") is None:
        return None
    paid, expected = rupees(record["paid_paise"]), rupees(record["expected_paise"])
    settled = f" (settled: {record['resolution']})" if record.get("resolution") else ""
    return ("amount mismatch", f"captured {paid}, expected {expected}{settled}")


def _delivery_entries(logged: list[dict[str, Any]], records: list[dict[str, Any]]) -> list[Entry]:
    stored = {(r["provider"], r["event_id"]): r for r in records}
    entries = [_logged_entry(rows, stored) for rows in _by_key(logged)]
    seen = {(row["provider"], row["event_id"]) for row in logged}
    # Records kept from before the delivery log, or whose log line was lost with the database.
    entries += [_record_entry(r) for key, r in stored.items() if key not in seen]
    return entries


def _by_key(logged: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The log's lines, those of one delivery key together (a gateway's retries of one
    delivery), in the order of each key's first request; a line without a key alone."""
    groups: dict[tuple[str, str] | int, list[dict[str, Any]]] = {}
    for n, row in enumerate(logged):
        key = (row["provider"], row["event_id"]) if row["event_id"] else n
        groups.setdefault(key, []).append(row)
    return list(groups.values())


def _answer(row: Mapping[str, Any]) -> str:
    return f"HTTP {row['status']} {row['outcome']}"


def _logged_entry(rows: list[dict[str, Any]], stored: Mapping[tuple[str, str], Any]) -> Entry:
    row = rows[0]
    key = (row["provider"], row["event_id"])
    record = stored.get(key)
    outcome = record["outcome"] if record is not None else rows[-1]["outcome"]
    last = rows[-1]
    tone = _TONE_OF_OUTCOME.get(outcome, Tone.BAD if last["status"] >= 500 else Tone.WARN)
    facts = [
        ("answer", _answer(row)),
        ("signature", "verified" if row["verified"] else "refused"),
        ("delivery key", row["event_id"] or "—"),
    ]
    if len(rows) > 1:
        facts.append(("attempts", f"{len(rows)}, the last answered {_answer(last)}"))
    if any(r["mismatch"] for r in rows):
        facts.append(("body", "differs from the first delivery of this key (mismatch)"))
        tone = Tone.WARN
    if record is not None and record["bank_ref"]:
        facts.append(("bank reference", record["bank_ref"]))
    if (said := _confirmation(record)) is not None:
        facts.append(said)
        tone = _TONE_OF_OUTCOME.get(outcome, tone)
    if (amounts := _mismatch(record)) is not None:
        facts.append(amounts)
        tone = Tone.WARN
    parked = record is not None and record["outcome"] == "parked"
    return Entry(
        at=row["received_at"],
        kind="delivery",
        title=f"{row['provider']} {row['event_type'] or 'delivery'}",
        facts=tuple(facts),
        tone=tone,
        delivery=key if record is not None else None,
        parked=key if parked else None,
        attempts=tuple(
            Attempt(at=r["received_at"], answer=_answer(r), verified=r["verified"]) for r in rows
        ),
    )


def _record_entry(record: dict[str, Any]) -> Entry:
    """A record without a line in the delivery log: found through a gateway's status API
    (reconciliation), or kept from before the log existed."""
    key = (record["provider"], record["event_id"])
    parked = record["outcome"] == "parked"
    if is_reconciled(record["event_id"]):
        title = f"{record['provider']} status API: {record['event_type']}"
    else:
        title = f"{record['provider']} {record['event_type']} (recorded)"
    amounts = _mismatch(record)
    tone = _TONE_OF_OUTCOME.get(record["outcome"], Tone.PLAIN)
    return Entry(
        at=record["processed_at"],
        kind="delivery",
        title=title,
        facts=(
            ("outcome", record["outcome"]),
            ("delivery key", record["event_id"]),
            *filter(None, [_confirmation(record), amounts]),
        ),
        tone=Tone.WARN if amounts else tone,
        delivery=key,
        parked=key if parked else None,
    )


def _state_entries(
    records: list[dict[str, Any]], adapters: Mapping[Provider, Adapter]
) -> list[Entry]:
    """The payment states the recorded deliveries moved each payment through, replayed with
    the state machine itself (``states.advance``) on the stored bodies."""
    current: dict[tuple[str, str], PaymentStatus | None] = {}
    entries: list[Entry] = []
    for record in records:
        if record["outcome"] != "processed":
            continue
        kind = _kind_of(record, adapters)
        target = TARGET.get(kind) if kind is not None else None
        key = (record["provider"], record["payment_id"] or "")
        if target is None or not key[1]:
            continue
        before = current.get(key)
        after = advance(before, target)
        if after is None:
            continue
        current[key] = after
        entries.append(
            Entry(
                at=record["processed_at"],
                kind="payment",
                title=f"Payment {key[1]}: {before or 'new'} → {after}",
                facts=(("by", record["event_type"]), *filter(None, [_mismatch(record)])),
                tone=_payment_tone(after, record),
            )
        )
    return entries


def _payment_tone(after: PaymentStatus, record: Mapping[str, Any]) -> Tone:
    """A capture of another amount than the cart's is no success, whatever its state."""
    if _mismatch(record) is not None:
        return Tone.WARN
    return Tone.GOOD if after is PaymentStatus.CAPTURED else Tone.PLAIN


def _kind_of(record: dict[str, Any], adapters: Mapping[Provider, Adapter]) -> EventKind | None:
    try:
        return received_again(
            adapters,
            provider=record["provider"],
            event_id=record["event_id"],
            body=record["body"],
            headers=record["headers"],
        ).event.kind
    except PayhooksError:
        return None  # a gateway served no more, or a record that no longer reads


def _order_entry(order: dict[str, Any]) -> Entry:
    return Entry(
        at=order["created_at"],
        kind="order",
        title=f"Order {order['id']} {order['status']}",
        facts=(
            ("paid by", f"{order['provider']} {order['payment_id']}"),
            ("amount", rupees(order["amount_paise"])),
            ("from delivery", order["event_id"]),
        ),
        tone=Tone.GOOD if order["status"] == "confirmed" else Tone.WARN,
    )


def _movement_entry(move: dict[str, Any]) -> Entry:
    return Entry(
        at=move["created_at"],
        kind="stock",
        title=f"Stock {move['sku']} {move['delta']:+d} ({move['reason']})",
    )


def _message_entry(message: dict[str, Any]) -> Entry:
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


def _action_entry(action: dict[str, Any]) -> Entry:
    return Entry(
        at=action["at"],
        kind="operator",
        title=f"{action['operator']}: {action['action']} {action['target']}",
        facts=(("result", action["result"]),),
    )
