"""``AsyncHooks``: the core's ``Hooks`` for an async pool, so handlers can ``await`` their
writes on the claim's connection.

::

    hooks = AsyncHooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def mark_paid(conn, event):
        await conn.execute("UPDATE orders SET paid = true WHERE ref = %s", (event.merchant_ref,))

Every function registered for the event's kind runs, in registration order, inside the
claim's transaction; ``None`` means processed, an ``Applied`` says otherwise, and an event
no function is registered for is answered ``ignored`` (the same rules as ``payhooks.Hooks``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from payhooks.events import Event, EventKind
from payhooks.ingest import Applied, Outcome

AsyncConnection = psycopg.AsyncConnection[tuple[Any, ...]]
AsyncHook = Callable[[AsyncConnection, Event], Awaitable[Applied | None]]
AsyncHandler = Callable[[AsyncConnection, Event], Awaitable[Applied]]


class AsyncHooks:
    def __init__(self) -> None:
        self._by_kind: dict[EventKind, list[AsyncHook]] = {}

    def on(self, *kinds: EventKind) -> Callable[[AsyncHook], AsyncHook]:
        """Register the decorated ``async def`` for each of ``kinds``."""
        if not kinds:
            raise ValueError("name at least one EventKind")

        def register(hook: AsyncHook) -> AsyncHook:
            if not inspect.iscoroutinefunction(hook):
                # Called without await, it would never run, and the delivery would be
                # recorded as processed all the same.
                raise TypeError(
                    f"{getattr(hook, '__name__', hook)!s} is not an async def: AsyncHooks "
                    "runs on an async pool (a plain def belongs on payhooks.Hooks)"
                )
            for kind in kinds:
                self._by_kind.setdefault(kind, []).append(hook)
            return hook

        return register

    async def __call__(self, conn: AsyncConnection, event: Event) -> Applied:
        hooks = self._by_kind.get(event.kind, [])
        if not hooks:
            return Applied(outcome=Outcome.IGNORED)
        result = Applied(outcome=Outcome.PROCESSED)
        for hook in hooks:
            result = await hook(conn, event) or result
        return result
