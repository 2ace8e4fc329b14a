"""A registry of small handlers by event kind, so a merchant writes functions, not a dispatcher.

::

    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        conn.execute("UPDATE orders SET paid = true WHERE ref = %s", (event.merchant_ref,))

``hooks`` is then the handler ``ingest`` takes: every function registered for the event's kind
runs, in registration order, inside the claim's transaction. A function returns ``None``
(processed) or an ``Applied`` saying otherwise (ignored, parked, with an order id); the last
``Applied`` returned stands, and one that parks ends the run (the later functions run when the
delivery is replayed). An event no function is registered for is answered ``ignored``.

Functions written for rows of another shape than tuples (a pool made with
``row_factory=dict_row``) say so once, ``Hooks(row_factory=dict_row)``: every door that runs
them (the route on the merchant's pool, and ``payhooks confirm``, ``replay`` and ``reconcile
--hooks`` on connections payhooks opens) then hands them such rows.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import BaseRowFactory

from payhooks.events import Event, EventKind
from payhooks.intake.ingest import Applied, Handler, Outcome
from payhooks.plumbing.db import Connection, Done, advance
from payhooks.plumbing.errors import HandlerCommitted

Hook = Callable[[Connection, Event], Applied | None]
H = TypeVar("H", bound=Callable[..., Any])
RowFactory = BaseRowFactory[Any]
"""How a connection makes its rows: psycopg's ``dict_row``, ``namedtuple_row``, ... ."""


class Registry(Generic[H]):
    """Functions by event kind, in registration order: what ``Hooks`` and its async twin in
    ``payhooks.fastapi`` share. ``is_async`` is what a registered function must be: called
    the wrong way, it would never run, and the delivery be recorded all the same.

    ``row_factory`` is the rows the functions are written for (``dict_row`` for
    ``row["ref"]``), made by the connection they are handed for as long as they run, whichever
    door runs them: a command's connection of its own makes tuples, whatever the app's pool
    makes. ``None`` (the default) leaves the connection's own. Under Flask's blueprint and
    Django the connection is the ORM's, whose own queries read tuples: leave it unset there."""

    is_async = False

    def __init__(self, *, row_factory: RowFactory | None = None) -> None:
        self._by_kind: dict[EventKind, list[H]] = {}
        self.row_factory = row_factory

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
        """The handlers registered for ``kind``, in the order they were added."""
        return self._by_kind.get(kind, [])

    def turns(self, kind: EventKind) -> Generator[H, Applied | None, Applied]:
        """The handlers for ``kind`` in turn, each sent back what it returned, and the
        delivery's answer at the end: the rules of a run, kept once for ``Hooks`` and its async
        twin, which only call or await each handler. None registered: ``ignored``; else the
        last ``Applied`` stands (``processed`` when none returns one). A park ends the turn: a
        later handler's answer would take the delivery off the parked list with nothing left
        to replay it, and its writes would be made again by the replay, which runs every
        handler from the first."""
        hooks = self.registered(kind)
        if not hooks:
            return Applied(outcome=Outcome.IGNORED)
        result = Applied(outcome=Outcome.PROCESSED)
        for hook in hooks:
            result = (yield hook) or result
            if result.outcome is Outcome.PARKED:
                break
        return result

    def kinds(self) -> frozenset[EventKind]:
        """The kinds some handler is registered for: none, and every delivery run through the
        registry is recorded ``ignored``, what a door refuses (``payhooks.cli.common``)."""
        return frozenset(self._by_kind)

    def _mismatch(self, name: str) -> str:
        return (
            f"{name} is async: these hooks run on a sync connection "
            "(for an async pool, use payhooks.fastapi.AsyncHooks)"
        )


class Hooks(Registry[Hook]):
    """Handlers by event kind, run on the claim's connection inside its transaction, by the
    rules of ``Registry.turns``."""

    def __call__(self, conn: Connection, event: Event) -> Applied:
        turns = self.turns(event.kind)
        answer: Applied | None = None
        while not isinstance(hook := advance(turns, answer), Done):
            with rows_made(conn, self.row_factory):
                answer = hook(conn, event)
        return hook.value


@contextlib.contextmanager
def rows_made(conn: Any, row_factory: RowFactory | None) -> Iterator[None]:
    """``conn`` (sync or async) making its rows with ``row_factory`` for the block, then as it
    did: the connection may be one the merchant's pool lent. payhooks' own statements are not
    touched (they read on tuple cursors of their own, ``payhooks.plumbing.db.query``)."""
    if row_factory is None:
        yield
        return
    made = conn.row_factory
    conn.row_factory = row_factory
    try:
        yield
    finally:
        conn.row_factory = made


def guarded(handler: Handler) -> Handler:
    """``handler``, refused with ``HandlerCommitted`` when it commits or rolls back the claim's
    transaction: what every integration runs, so all answer alike (500, nothing kept)."""

    def run(conn: Connection, event: Event) -> Applied:
        with commit_refused(conn) as called:
            applied = handler(conn, event)
        still_open(conn.info.transaction_status, called)
        return applied

    return run


ENDINGS = ("commit", "rollback")
"""The connection's calls that would end the claim's transaction, which psycopg refuses."""


@contextlib.contextmanager
def commit_refused(conn: object) -> Iterator[list[str]]:
    """psycopg refuses ``commit()`` and ``rollback()`` inside the claim's ``transaction()``
    block with a bare ``ProgrammingError`` (its subclasses are SQL errors): named here, also
    when a layer above wraps it (SQLAlchemy's ``session.connection().commit()`` raises its own
    error, the driver's as ``orig``). A handler that catches the refusal and carries on is
    refused all the same: each call is noted as it is made (``noting``), in the list yielded,
    for ``still_open`` to refuse once the handler returns."""
    called: list[str] = []
    with noting(conn, ENDINGS, called):
        try:
            yield called
        except Exception as exc:
            call = refused_call(exc)
            if call is None:
                raise
            raise HandlerCommitted(call) from exc


@contextlib.contextmanager
def noting(target: object, names: Iterable[str], called: list[str]) -> Iterator[None]:
    """Each of ``target``'s methods ``names`` noted in ``called`` (``commit()``) when it is
    called, for the block's time, and made as it was (``shadowing``): the caller sees what it
    always saw (psycopg's refusal) and keeps the object it was given, no wrapper in its place."""
    noted = {name: _noted(getattr(target, name), f"{name}()", called) for name in names}
    with shadowing(target, **noted):
        yield


@contextlib.contextmanager
def shadowing(target: object, **methods: Callable[..., Any]) -> Iterator[None]:
    """``target``'s methods replaced by ``methods`` for the block's time, as attributes of this
    very object, which shadow its class's; each put back as it was after, whatever the block
    raised. An object that takes no attribute of its own (``__slots__``) is left as it is."""
    own = getattr(target, "__dict__", None)
    if own is None:
        yield
        return
    kept = {name: own[name] for name in methods if name in own}
    for name, method in methods.items():
        setattr(target, name, method)
    try:
        yield
    finally:
        for name in methods:
            if name in kept:
                setattr(target, name, kept[name])
            else:
                delattr(target, name)


def _noted(call: Callable[..., Any], name: str, called: list[str]) -> Callable[..., Any]:
    def noted(*args: Any, **kwargs: Any) -> Any:
        called.append(name)
        return call(*args, **kwargs)

    return noted


def refused_call(exc: BaseException) -> str | None:
    """``commit()`` or ``rollback()`` when ``exc`` is psycopg refusing one, else None."""
    for error in (exc, getattr(exc, "orig", None)):
        if type(error) is psycopg.ProgrammingError and "forbidden within a Transaction" in str(
            error
        ):
            return str(error).split(" ", 2)[1]
    return None


def still_open(status: TransactionStatus, called: Sequence[str] = ()) -> None:
    """A ``COMMIT`` or ``ROLLBACK`` sent as SQL gets past psycopg: seen here, after the fact
    (what it committed stays committed), and answered as loudly as the calls above. When the
    handler wrote after it, a new transaction is open and the claim's savepoint is gone: the
    claim sees that when it releases the savepoint (``payhooks.intake.ingest``). A call psycopg
    refused and the handler caught (``called``) is refused here, the transaction still open:
    nothing it wrote is kept."""
    if status is TransactionStatus.IDLE:
        raise HandlerCommitted.as_sql()
    if called:
        raise HandlerCommitted(called[0])
