"""A stored delivery applied through an app's own handler, sync (``payhooks.Hooks``) or async
(``payhooks.fastapi.AsyncHooks``): the console's replay and ``payhooks replay --hooks``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from payhooks.events import Received
from payhooks.intake.hooks import guarded
from payhooks.intake.ingest import Receipt, ingest_received
from payhooks.plumbing.db import Connection

Apply = Callable[[Connection, Received], Receipt]


def through(handler: Any, database_url: str) -> Apply:
    """``received`` claimed and applied through ``handler``: a sync one on the connection
    given, an async one on an async connection of its own to ``database_url``, on an event
    loop of its own (so call it from a thread, never on a running loop)."""
    if getattr(handler, "is_async", False):
        from payhooks.aio.reconcile import applying

        apply = applying(database_url, handler)
        return lambda conn, received: apply(received)
    safe = guarded(handler)
    return lambda conn, received: ingest_received(conn, received, safe)
