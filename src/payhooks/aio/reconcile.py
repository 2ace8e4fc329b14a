"""Reconciliation through a FastAPI app's ``AsyncHooks``: what a pass finds is claimed and
applied on an async connection, as the app's webhook route does (``payhooks.aio.claims``).

``payhooks reconcile --hooks myshop.webhooks:hooks`` picks this when ``hooks`` is async.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Unpack

import psycopg

from payhooks.aio.claims import ingest_received
from payhooks.aio.hooks import AsyncHandler, guarded
from payhooks.events import Received
from payhooks.gateways import credentials
from payhooks.intake.ingest import Applied, Outcome, Receipt
from payhooks.plumbing.db import libpq_url
from payhooks.reconcile.passes import Deliver, Followup, Tally
from payhooks.reconcile.running import PassOptions, connecting, reach_from, reconcile_once


def applying(database_url: str, hooks: AsyncHandler) -> Callable[[Received], Receipt]:
    """A delivery claimed and applied through ``hooks`` on an async connection of its own, on
    an event loop of its own (``payhooks replay --hooks`` and the pass below)."""
    database_url = libpq_url(database_url)
    safe = guarded(hooks)

    async def apply(received: Received) -> Receipt:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            return await ingest_received(conn, received, safe)

    return lambda received: asyncio.run(apply(received))


def delivering(database_url: str, hooks: AsyncHandler) -> Deliver:
    """Each payment a pass finds applied through ``hooks`` on an async connection of its own.
    ``then`` (the missing-webhook check) runs after the commit, on a connection of its own:
    it only reads, and what it reads is committed by then."""
    database_url = libpq_url(database_url)
    apply = applying(database_url, hooks)

    def deliver(received: Received, *, then: Followup) -> Receipt:
        receipt = apply(received)
        if receipt.outcome is Outcome.PROCESSED:
            with psycopg.connect(database_url, autocommit=True, prepare_threshold=None) as conn:
                then(conn, received.event, Applied(outcome=receipt.outcome))
        return receipt

    return deliver


def run(
    database_url: str,
    hooks: AsyncHandler,
    *,
    environ: Mapping[str, str] | None = None,
    confirm_only: bool = False,
    **reach: Unpack[PassOptions],
) -> Tally:
    """``payhooks.reconcile.run`` through ``AsyncHooks``: one pass on ``database_url``, the
    credentials and the reach from ``environ`` (the process's environment by default;
    ``reach`` outranks it; ``confirm_only``: ``payhooks confirm``'s pass alone). It runs an
    event loop of its own for each payment it applies: call it from a thread (``await
    asyncio.to_thread(run, url, hooks)``), not on the app's loop."""
    environ = os.environ if environ is None else environ
    found = credentials(environ)
    deliver = delivering(database_url, hooks)
    options: PassOptions = {**reach_from(environ), **reach}
    return reconcile_once(
        connecting(database_url), deliver, found, confirm_only=confirm_only, **options
    )


__all__ = ["applying", "delivering", "run"]
