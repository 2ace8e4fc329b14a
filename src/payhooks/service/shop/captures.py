"""A first capture in one statement: the reference shop's fixed path, run in PostgreSQL.

Most deliveries a shop receives are the first capture of a checked-out cart, at its price,
with stock to take. ``shop_first_capture`` (shop migration 0024) runs exactly what the general
path (``ingest_received`` with ``payments.apply_event``) runs for it, in one round trip (the
capture queued for the relay too, ``payhooks.intake.relaying``), and
declines everything else: a refund, a parked or unknown reference, a cart already paid, an
amount off, the last units spread over slots, a backorder. A declined delivery has written
nothing, and takes the general path, which is where the state machine lives.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from payhooks.events import Event, EventKind, Received
from payhooks.intake import idempotency, relaying
from payhooks.intake.ingest import Outcome, Receipt, duplicate
from payhooks.plumbing.db import AsyncConnection, Connection, execute_async
from payhooks.service.shop.ids import new_id
from payhooks.service.shop.orders import confirmation

DECLINED = "PH001"
"""Raised by the function to roll back what it wrote before it found the path was not its."""

_FIRST_CAPTURE = """
SELECT state, outcome, payload_sha256, order_ref FROM shop_first_capture(
    %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""

Answer = tuple[str, str | None, str | None, str | None]


def eligible(event: Event) -> bool:
    """Only a capture naming its checkout and amount can be a first capture of one; never a
    callback resting on a static credential, which only the gateway's API can make a capture
    (``payhooks.intake.confirmations``: the general path records it ``confirming``)."""
    return (
        event.kind is EventKind.PAYMENT_CAPTURED
        and not event.unconfirmed
        and event.merchant_ref is not None
        and event.payment_id is not None
        and event.amount_paise is not None
    )


def arguments(received: Received) -> tuple[object, ...]:
    """The delivery, its claim row, the order and email the path would create, and the
    message a relay publishes for it (queued only while a relay channel is set up)."""
    event = received.event
    assert event.amount_paise is not None
    order_id = new_id("ord")
    email = confirmation(order_id, "", event.amount_paise, "confirmed")
    message = relaying.relayed(event, order_id)
    return (
        *idempotency.claim_values(received),  # the claim row, in the order the function takes it
        event.amount_paise,
        event.payment_amount_paise,
        event.currency,
        event.attempt_id,
        order_id,
        email.dedupe_key,
        email.subject,
        email.body,
        json.dumps(email.payload),
        message.message_id,
        message.payment,
        message.subject,
        message.body,
    )


def first_capture(conn: Connection, received: Received) -> Receipt | None:
    """The answer, when the fixed path gave it; None: take the general path."""
    if not eligible(received.event):
        return None
    try:
        row = _run(conn, arguments(received))
    except psycopg.Error as exc:
        if exc.sqlstate == DECLINED:
            return None
        raise
    return receipt(received, row)


async def first_capture_async(conn: AsyncConnection, received: Received) -> Receipt | None:
    """``first_capture`` on an async connection: the service answers it on the event loop.

    A copy is answered by the record's plain read first (``idempotency.existing``, the
    statement ``seeing`` runs): a retry storm's deliveries then cost two parameters, not the
    function's twenty-two, at one round trip more for a new capture (docs/performance.md
    measures both)."""
    if not eligible(received.event):
        return None
    record = await execute_async(conn, idempotency.existing(received.event))
    if record is not None:
        return receipt(received, ("seen", record[0], record[1], record[2]))
    try:
        row = await _run_async(conn, arguments(received))
    except psycopg.Error as exc:
        if exc.sqlstate == DECLINED:
            return None
        raise
    return receipt(received, row)


def _run(conn: Connection, args: tuple[object, ...]) -> Answer:
    if not getattr(conn, "per_transaction", ()):
        return _answer(conn.execute(_FIRST_CAPTURE, args).fetchone())
    # Behind a transaction pooler the bounds are set in a transaction: one round trip.
    with conn.pipeline(), conn.transaction():
        cursor = conn.execute(_FIRST_CAPTURE, args)
    return _answer(cursor.fetchone())


async def _run_async(conn: AsyncConnection, args: tuple[object, ...]) -> Answer:
    if not getattr(conn, "per_transaction", ()):
        return _answer(await (await conn.execute(_FIRST_CAPTURE, args)).fetchone())
    async with conn.pipeline(), conn.transaction():
        cursor = await conn.execute(_FIRST_CAPTURE, args)
    return _answer(await cursor.fetchone())


def _answer(row: tuple[Any, ...] | None) -> Answer:
    assert row is not None  # the function returns one row
    return (str(row[0]), row[1], row[2], row[3])


def receipt(received: Received, row: Answer) -> Receipt | None:
    """``processed`` with its order; a record of this key is read as ``seeing`` reads it (a
    settled record of this very body is a duplicate); anything else is for the general path."""
    state, outcome, digest, order_ref = row
    if state == "processed":
        return Receipt(outcome=Outcome.PROCESSED, event=received.event, order_id=order_ref)
    if state != "seen":
        return None
    copy = idempotency.settled_copy(received.event, (outcome, digest, order_ref))
    return None if copy is None else duplicate(received, copy)
