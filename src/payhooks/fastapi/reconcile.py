"""Reconciliation through a FastAPI app's ``AsyncHooks``: what a pass finds is claimed and
applied on an async connection, as the app's webhook route does (``payhooks.fastapi.claims``).

``payhooks reconcile --hooks myshop.webhooks:hooks`` picks this when ``hooks`` is async.
"""

from __future__ import annotations

import asyncio

import psycopg

from payhooks.events import Received
from payhooks.fastapi.claims import ingest_received
from payhooks.fastapi.hooks import AsyncHandler, guarded
from payhooks.ingest import Applied, Outcome, Receipt
from payhooks.reconcile.passes import Deliver, Followup


def delivering(database_url: str, hooks: AsyncHandler) -> Deliver:
    """Each payment a pass finds applied through ``hooks`` on an async connection of its own.
    ``then`` (the missing-webhook check) runs after the commit, on a connection of its own:
    it only reads, and what it reads is committed by then."""
    safe = guarded(hooks)

    async def apply(received: Received) -> Receipt:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            return await ingest_received(conn, received, safe)

    def deliver(received: Received, *, then: Followup) -> Receipt:
        receipt = asyncio.run(apply(received))
        if receipt.outcome is Outcome.PROCESSED:
            with psycopg.connect(database_url, autocommit=True) as conn:
                then(conn, received.event, Applied(outcome=receipt.outcome))
        return receipt

    return deliver


__all__ = ["delivering"]
