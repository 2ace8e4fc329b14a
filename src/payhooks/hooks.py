"""A registry of small handlers by event kind, so a merchant writes functions, not a dispatcher.

::

    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        conn.execute("UPDATE orders SET paid = true WHERE ref = %s", (event.merchant_ref,))

``hooks`` is then the handler ``ingest`` takes: every function registered for the event's kind
runs, in registration order, inside the claim's transaction. A function returns ``None``
(processed) or an ``Applied`` saying otherwise (ignored, parked, with an order id); an event
no function is registered for is answered ``ignored``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from payhooks.db import Connection
from payhooks.events import Event, EventKind
from payhooks.ingest import Applied, Outcome

Hook = Callable[[Connection, Event], Applied | None]


class Hooks:
    def __init__(self) -> None:
        self._by_kind: dict[EventKind, list[Hook]] = {}

    def on(self, *kinds: EventKind) -> Callable[[Hook], Hook]:
        """Register the decorated function for each of ``kinds``."""
        if not kinds:
            raise ValueError("name at least one EventKind")

        def register(hook: Hook) -> Hook:
            if inspect.iscoroutinefunction(hook):
                raise TypeError(
                    f"{hook.__name__} is async: these hooks run on a sync connection "
                    "(for an async pool, use payhooks.fastapi.AsyncHooks)"
                )
            for kind in kinds:
                self._by_kind.setdefault(kind, []).append(hook)
            return hook

        return register

    def __call__(self, conn: Connection, event: Event) -> Applied:
        hooks = self._by_kind.get(event.kind, [])
        if not hooks:
            return Applied(outcome=Outcome.IGNORED)
        result = Applied(outcome=Outcome.PROCESSED)
        for hook in hooks:
            result = hook(conn, event) or result
        return result
