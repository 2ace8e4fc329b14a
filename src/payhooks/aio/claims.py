"""The claim path of ``payhooks.intake.ingest.ingest_received``, on an async connection.

The statements and steps are the core's own (``payhooks.intake.ingest.Delivery``, built on
``payhooks.intake.idempotency``): this module only drives them, awaiting each statement and the
handler, so both paths run the same statements, take the same locks and write the same rows.
"""

from __future__ import annotations

import psycopg
from psycopg.errors import InvalidSavepointSpecification
from psycopg.pq import TransactionStatus

from payhooks.aio.hooks import AsyncConnection, AsyncHandler
from payhooks.events import Event, Received
from payhooks.gateways import Adapter
from payhooks.intake import idempotency
from payhooks.intake.ingest import (
    Apply,
    Delivery,
    DeliverySteps,
    Receipt,
    Settled,
    duplicate,
    ended_by_handler,
    restored,
)
from payhooks.plumbing.db import Done, advance, execute_async, run_async, translated
from payhooks.plumbing.errors import HandlerCommitted


async def ingest_received(
    conn: AsyncConnection, received: Received, handler: AsyncHandler
) -> Receipt:
    """Claim and apply a verified delivery on an autocommit async connection (no
    transaction open); the answer is final when this returns."""
    if not conn.autocommit or conn.info.transaction_status is not TransactionStatus.IDLE:
        raise ValueError("ingest needs an autocommit connection with no open transaction")
    with translated(received.event.event_id):
        seen = await run_async(conn, idempotency.seeing(received.event))
        if seen is not None:
            return duplicate(received, seen)
        return await _claim_and_apply(conn, received, handler)


async def _claim_and_apply(
    conn: AsyncConnection, received: Received, handler: AsyncHandler
) -> Receipt:
    """``payhooks.intake.ingest._claim_and_apply``, awaited."""
    delivery = Delivery(received)
    try:
        async with conn.transaction() as tx:
            settled = await _settle(conn, delivery.steps(), handler, received.event)
            if not settled.keep:
                raise psycopg.Rollback(tx)
    except (HandlerCommitted, InvalidSavepointSpecification) as exc:
        if (ended := ended_by_handler(exc)) is None:
            raise
        await run_async(conn, delivery.unclaiming(conn))
        raise ended from exc
    return settled.receipt


async def _settle(
    conn: AsyncConnection, steps: DeliverySteps, handler: AsyncHandler, event: Event
) -> Settled:
    answer: object = None
    while not isinstance(command := advance(steps, answer), Done):
        if isinstance(command, Apply):
            answer = await handler(conn, event)
        else:
            answer = await execute_async(conn, command)
    return command.value


async def replay(
    conn: AsyncConnection, adapter: Adapter, stored: idempotency.Stored, handler: AsyncHandler
) -> Receipt:
    """``payhooks.intake.ingest.replay`` on an async connection: a stored delivery
    (``parked(conn)``) through the same claim again, under the key it was stored with."""
    again = restored(adapter, event_id=stored.event_id, body=stored.body, headers=stored.headers)
    return await ingest_received(conn, again, handler)
