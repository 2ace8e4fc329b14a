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
from typing import Any, Generic, TypeVar

from payhooks.db import Connection
from payhooks.events import Event, EventKind
from payhooks.ingest import Applied, Outcome

Hook = Callable[[Connection, Event], Applied | None]
H = TypeVar("H", bound=Callable[..., Any])


class Registry(Generic[H]):
    """Functions by event kind, in registration order: what ``Hooks`` and its async twin in
    ``payhooks.fastapi`` share. ``is_async`` is what a registered function must be: called
    the wrong way, it would never run, and the delivery be recorded all the same."""

    is_async = False

    def __init__(self) -> None:
        self._by_kind: dict[EventKind, list[H]] = {}

    def on(self, *kinds: EventKind) -> Callable[[H], H]:
        """Register the decorated function for each of ``kinds``."""
        if not kinds:
            raise ValueError("name at least one EventKind")

        def register(hook: H) -> H:
            if inspect.iscoroutinefunction(hook) is not self.is_async:
                raise TypeError(self._mismatch(getattr(hook, "__name__", repr(hook))))
            for kind in kinds:
                self._by_kind.setdefault(kind, []).append(hook)
            return hook

        return register

    def registered(self, kind: EventKind) -> list[H]:
        return self._by_kind.get(kind, [])

    def _mismatch(self, name: str) -> str:
        return (
            f"{name} is async: these hooks run on a sync connection "
            "(for an async pool, use payhooks.fastapi.AsyncHooks)"
        )


class Hooks(Registry[Hook]):
    def __call__(self, conn: Connection, event: Event) -> Applied:
        hooks = self.registered(event.kind)
        if not hooks:
            return Applied(outcome=Outcome.IGNORED)
        result = Applied(outcome=Outcome.PROCESSED)
        for hook in hooks:
            result = hook(conn, event) or result
        return result
