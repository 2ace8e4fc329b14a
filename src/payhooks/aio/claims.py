"""The claim path of ``payhooks.intake.ingest.ingest_received``, on an async connection.

The statements and steps are the core's own (``payhooks.intake.ingest.Delivery``, built on
``payhooks.intake.idempotency``): this module only drives them, awaiting each statement and the
handler, so both paths run the same statements, take the same locks and write the same rows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping

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
    receive,
    restored,
)
from payhooks.plumbing.db import Done, advance, execute_async, run_async, translated
from payhooks.plumbing.errors import HandlerCommitted


async def ingest(
    conn: AsyncConnection,
    adapter: Adapter,
    body: bytes,
    headers: Mapping[str, str],
    handler: AsyncHandler,
) -> Receipt:
    """``payhooks.ingest`` awaited, for a delivery a route of the app's own received (PayU's
    return page): the exact bytes verified and parsed in a worker thread, never on the event
    loop, then claimed and applied in a transaction of its own, the answer final when this
    returns. ``conn`` has no transaction open; one not in autocommit (as ``pool.connection()``
    lends it) is put in autocommit for the claim and given back in its mode."""
    received = await asyncio.to_thread(receive, adapter, body, headers)
    async with autocommitted(conn):
        return await ingest_received(conn, received, handler)


@contextlib.asynccontextmanager
async def autocommitted(conn: AsyncConnection) -> AsyncIterator[AsyncConnection]:
    """``conn`` in autocommit for one delivery (the claim opens and commits a transaction of
    its own), then back in the mode it was lent in, unless it was lost meanwhile."""
    lent = conn.autocommit
    await conn.set_autocommit(True)
    try:
        yield conn
    finally:
        if not conn.closed and conn.autocommit != lent:
            await conn.set_autocommit(lent)


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
