"""The claim path of ``payhooks.ingest.ingest_received``, on an async connection.

The statements are the core's own (``payhooks.idempotency``): only the driver calls are
awaited here, in the same order, so both paths take the same locks and write the same rows.
Keep the two in step; the tests play the same deliveries through both.
"""

from __future__ import annotations

import psycopg
from psycopg.errors import InvalidSavepointSpecification
from psycopg.pq import TransactionStatus

from payhooks.db import translated
from payhooks.errors import HandlerCommitted
from payhooks.events import Event, Received
from payhooks.fastapi.hooks import AsyncConnection, AsyncHandler
from payhooks.idempotency import (
    _EXISTING,
    _INSERT,
    _LOCK_PARKED,
    _MARK_MISMATCH,
    _RECORD,
    _SAME_BODY,
    _UNCLAIM,
    Claim,
    ClaimState,
    claim_values,
    unclaim_values,
)
from payhooks.ingest import Outcome, Receipt, ended_by_handler


async def ingest_received(
    conn: AsyncConnection, received: Received, handler: AsyncHandler
) -> Receipt:
    """Claim and apply a verified delivery on an autocommit async connection (no
    transaction open); the answer is final when this returns."""
    if not conn.autocommit or conn.info.transaction_status is not TransactionStatus.IDLE:
        raise ValueError("ingest needs an autocommit connection with no open transaction")
    with translated(received.event.event_id):
        seen = await _seen(conn, received.event)
        if seen is not None:
            return _duplicate(received, seen)
        return await _claim_and_apply(conn, received, handler)


async def _claim_and_apply(
    conn: AsyncConnection, received: Received, handler: AsyncHandler
) -> Receipt:
    event = received.event
    claimed: list[Claim] = []
    try:
        async with conn.transaction() as tx:
            claim = await _claim(conn, received)
            claimed.append(claim)
            if claim.state is ClaimState.DUPLICATE:
                return _duplicate(received, claim)
            applied = await handler(conn, event)
            if claim.state is ClaimState.PARKED and applied.outcome is Outcome.PARKED:
                raise psycopg.Rollback(tx)  # still nothing to apply it to: leave the row as it was
            await conn.execute(
                _RECORD, (applied.outcome, applied.order_id, event.provider.value, event.event_id)
            )
    except (HandlerCommitted, InvalidSavepointSpecification) as exc:
        ended = ended_by_handler(exc)
        if ended is None:
            raise
        await _unclaim(conn, unclaim_values(event, claimed[0] if claimed else None))
        raise ended from exc
    return Receipt(outcome=applied.outcome, event=event, order_id=applied.order_id)


async def _unclaim(conn: AsyncConnection, values: tuple[str, str, str] | None) -> None:
    """``payhooks.ingest._unclaim``: the record a handler's ``COMMIT`` made final, deleted."""
    if values is None:
        return
    if conn.info.transaction_status is not TransactionStatus.IDLE:
        await conn.execute("ROLLBACK")
    await conn.execute(_UNCLAIM, values)
    if not conn.autocommit:
        await conn.execute("COMMIT")


async def _seen(conn: AsyncConnection, event: Event) -> Claim | None:
    """A committed, settled record of this very delivery (``idempotency.seen``)."""
    row = await (await conn.execute(_EXISTING, _key(event))).fetchone()
    if row is None or row[0] == "parked" or row[1] != event.payload_sha256:
        return None
    return Claim(state=ClaimState.DUPLICATE, outcome=str(row[0]), order_ref=_text(row[2]))


async def _claim(conn: AsyncConnection, received: Received) -> Claim:
    """``idempotency.claim``: insert first; on a conflict, find out what it conflicted with."""
    event = received.event
    key = _key(event)
    inserted = await (await conn.execute(_INSERT, claim_values(received))).fetchone()
    if inserted:
        return Claim(state=ClaimState.NEW, xmin=str(inserted[0]))
    row = await (await conn.execute(_EXISTING, key)).fetchone()
    if row is None:
        return await _same_body(conn, event)
    outcome, digest, order_ref = str(row[0]), str(row[1]), row[2]
    if digest != event.payload_sha256:
        await conn.execute(_MARK_MISMATCH, key)
        return Claim(
            state=ClaimState.DUPLICATE, outcome=outcome, order_ref=_text(order_ref), mismatch=True
        )
    if outcome == "parked":
        if await (await conn.execute(_LOCK_PARKED, key)).fetchone():
            return Claim(state=ClaimState.PARKED, outcome=outcome)
        # A twin applied it while we waited: answer with what it recorded.
        again = await (await conn.execute(_EXISTING, key)).fetchone()
        outcome, _, order_ref = again or (outcome, None, None)
    return Claim(state=ClaimState.DUPLICATE, outcome=outcome, order_ref=_text(order_ref))


async def _same_body(conn: AsyncConnection, event: Event) -> Claim:
    """These very bytes under another key, or a record purged between two statements."""
    same = (event.provider.value, event.payload_sha256)
    row = await (await conn.execute(_SAME_BODY, same)).fetchone()
    if row is None:
        return Claim(state=ClaimState.DUPLICATE)
    return Claim(state=ClaimState.DUPLICATE, outcome=str(row[0]), order_ref=_text(row[1]))


def _key(event: Event) -> tuple[str, str]:
    return (event.provider.value, event.event_id)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _duplicate(received: Received, claim: Claim) -> Receipt:
    return Receipt(
        outcome=Outcome.DUPLICATE,
        event=received.event,
        order_id=claim.order_ref,
        mismatch=claim.mismatch,
    )
