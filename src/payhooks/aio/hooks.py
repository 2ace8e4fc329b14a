"""``AsyncHooks``: the core's ``Hooks`` for an async pool, so handlers can ``await`` their
writes on the claim's connection.

::

    hooks = AsyncHooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def mark_paid(conn, event):
        await conn.execute("UPDATE orders SET paid = true WHERE ref = %s", (event.merchant_ref,))

Every function registered for the event's kind runs, in registration order, inside the
claim's transaction; ``None`` means processed, an ``Applied`` says otherwise (one that parks
ends the run), and an event no function is registered for is answered ``ignored`` (the same
rules as ``payhooks.Hooks``). ``AsyncHooks(row_factory=dict_row)``: the functions are written
for dict rows, and every door hands them such rows (``payhooks.Hooks``' ``row_factory``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from payhooks.events import Event
from payhooks.intake.hooks import Registry, commit_refused, rows_made, still_open
from payhooks.intake.ingest import Applied
from payhooks.plumbing import db
from payhooks.plumbing.db import Done, advance

AsyncConnection = db.AsyncConnection
AsyncHook = Callable[[AsyncConnection, Event], Awaitable[Applied | None]]
AsyncHandler = Callable[[AsyncConnection, Event], Awaitable[Applied]]


class AsyncHooks(Registry[AsyncHook]):
    """``payhooks.Hooks`` for an async connection: each handler an ``async def``."""

    is_async = True

    def _mismatch(self, name: str) -> str:
        return (
            f"{name} is not an async def: AsyncHooks runs on an async pool "
            "(a plain def belongs on payhooks.Hooks)"
        )

    async def __call__(self, conn: AsyncConnection, event: Event) -> Applied:
        turns = self.turns(event.kind)
        answer: Applied | None = None
        while not isinstance(hook := advance(turns, answer), Done):
            with rows_made(conn, self.row_factory):
                answer = await hook(conn, event)
        return hook.value


def guarded(handler: AsyncHandler) -> AsyncHandler:
    """``payhooks.intake.hooks.guarded`` for async handlers: a commit or rollback of the claim's
    transaction is refused with ``HandlerCommitted``."""

    async def run(conn: AsyncConnection, event: Event) -> Applied:
        with commit_refused(conn) as called:
            applied = await handler(conn, event)
        still_open(conn.info.transaction_status, called)
        return applied

    return run
