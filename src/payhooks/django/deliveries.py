"""A delivery claimed in a transaction Django owns, and answered only after its commit.

The claim and the handlers run inside ``transaction.atomic()`` on the raw psycopg connection
under Django's own, so ORM writes in a handler share the claim's transaction; the answer is
asked of ``Pending.receipt()`` after the block, which refuses unless the commit happened
(docs/design.md, "Joining the caller's transaction"). Nothing here opens a connection of its
own: one delivery holds exactly the one connection Django gives the thread.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import psycopg
from django import db
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, transaction
from psycopg.pq import TransactionStatus

from payhooks.django.conf import Config
from payhooks.events import Event, Received
from payhooks.intake.hooks import guarded as core_guarded
from payhooks.intake.hooks import noting, shadowing
from payhooks.intake.ingest import (
    Applied,
    Handler,
    Pending,
    Receipt,
    ingest_received_in_transaction,
)
from payhooks.intake.stored import received_again
from payhooks.operations.replays import Apply
from payhooks.plumbing.db import Connection, conflict, translated
from payhooks.plumbing.errors import DatabaseUnavailable, HandlerCommitted

log = logging.getLogger("payhooks.django")

# Transaction-local: it ends with the claim's transaction and never outlives it on a
# connection Django keeps for the next request.
_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, true)"

V = TypeVar("V")


def receive(config: Config, received: Received) -> Receipt:
    """Claim and apply one live delivery, verified; the receipt exists only once committed."""
    handler = guarded(config.handler_function(), config.database)
    return settle(config, lambda conn: ingest_received_in_transaction(conn, received, handler))


def replay(
    config: Config, *, provider: str, event_id: str, body: bytes, headers: Mapping[str, str]
) -> Receipt:
    """A stored delivery through the same path again, under the key it was stored with."""
    again = received_again(
        config.served(), provider=provider, event_id=event_id, body=body, headers=dict(headers)
    )
    return applying(config)(raw_connection(config.database), again)


def applying(config: Config) -> Apply:
    """A delivery read again (a replay, a reconciled payment) claimed and applied as a live
    one is: through the project's handler, in a transaction Django owns."""
    handler = guarded(config.handler_function(), config.database)

    def apply(conn: Connection, received: Received) -> Receipt:
        return settle(config, lambda conn: ingest_received_in_transaction(conn, received, handler))

    return apply


def guarded(handler: Handler, database: str) -> Handler:
    """The core's guard, plus Django's own refusal of ``transaction.commit()``,
    ``rollback()`` or ``set_autocommit()`` inside the view's atomic block: a handler that
    ends the claim's transaction is refused with ``HandlerCommitted`` (500, nothing kept),
    also when it catches Django's refusal and carries on (each call noted on ``database``'s
    connection as it is made, ``payhooks.intake.hooks.noting``)."""
    checked = core_guarded(handler)

    def run(conn: Connection, event: Event) -> Applied:
        called: list[str] = []
        try:
            with (
                noting(transaction.get_connection(database), _DJANGO_ENDINGS, called),
                elsewhere_said(database, conn, event),
            ):
                applied = checked(conn, event)
        except transaction.TransactionManagementError as exc:
            if _FORBIDDEN_IN_ATOMIC in str(exc):
                raise HandlerCommitted("Django's transaction.commit() or rollback()") from exc
            raise
        if called:
            raise HandlerCommitted(f"Django's transaction.{called[0]}")
        return applied

    return run


@contextlib.contextmanager
def elsewhere_said(database: str, conn: Connection, event: Event) -> Iterator[None]:
    """Logged: what a handler asks of Django's ``transaction`` on another database than the
    claim's, ``database``, where the guide's promises do not hold. ``on_commit()`` where that
    database is in no atomic block runs at once, before the claim commits, and again at each
    retry of a delivery that fails (``handler_on_commit_elsewhere``); an ``atomic()`` there is no
    savepoint in the claim's transaction, said when that transaction met an error
    (``handler_savepoint_elsewhere``). Both are ``transaction``'s calls left without
    ``using=`` (``payhooks.django.alias()``) by a project whose payhooks database is not
    ``default``. Each is seen as it is asked, on the other database's connection
    (``_watched``): whether an atomic block was open there then, not inferred afterwards."""
    seen: dict[str, set[str]] = {}
    try:
        with contextlib.ExitStack() as watching:
            for alias in connections:
                other = connections[alias]
                if alias != database and not other.in_atomic_block:
                    seen[alias] = set()
                    watching.enter_context(_watched(other, seen[alias]))
            yield
    finally:
        _say_elsewhere(database, seen, conn, event)


ON_COMMIT_AT_ONCE = "on_commit"
ATOMIC_OPENED = "atomic"


@contextlib.contextmanager
def _watched(other: Any, seen: set[str]) -> Iterator[None]:
    """``other``'s ``on_commit`` asked while no atomic block is open there, and an atomic
    block opened there (the outermost turns autocommit off: Django's own ``connect()`` turns
    it on, which is no block), noted in ``seen`` for the handler's run, each call then made
    as it was."""
    on_commit, set_autocommit = other.on_commit, other.set_autocommit

    def noted_on_commit(*args: Any, **kwargs: Any) -> Any:
        if not other.in_atomic_block:
            seen.add(ON_COMMIT_AT_ONCE)
        return on_commit(*args, **kwargs)

    def noted_set_autocommit(autocommit: bool, *args: Any, **kwargs: Any) -> Any:
        if not autocommit:
            seen.add(ATOMIC_OPENED)
        return set_autocommit(autocommit, *args, **kwargs)

    with shadowing(other, on_commit=noted_on_commit, set_autocommit=noted_set_autocommit):
        yield


def _say_elsewhere(
    database: str, seen: Mapping[str, set[str]], conn: Connection, event: Event
) -> None:
    fields = {"provider": event.provider.value, "event_id": event.event_id, "database": database}
    failed = conn.info.transaction_status is TransactionStatus.INERROR
    for alias, made in seen.items():
        if ON_COMMIT_AT_ONCE in made:
            log.warning("handler_on_commit_elsewhere", extra={**fields, "on": alias})
        if failed and ATOMIC_OPENED in made:
            log.warning("handler_savepoint_elsewhere", extra={**fields, "on": alias})


_FORBIDDEN_IN_ATOMIC = "forbidden when an 'atomic' block is active"
_DJANGO_ENDINGS = ("commit", "rollback", "set_autocommit")
"""What Django refuses inside an atomic block, on its connection (``transaction.commit()``
calls it), and calls itself only when the outermost block ends, after the handlers."""


def settle(config: Config, claim: Callable[[Connection], Pending]) -> Receipt:
    """``claim`` inside an atomic block of Django's, then the answer after the block.

    The view must be outermost: inside an atomic block of the merchant's (a middleware, a
    decorator) the claim could not be answered until that block commits, after the view
    returned, so every delivery, and every retry, would be answered 503."""
    if transaction.get_connection(config.database).in_atomic_block:
        raise ImproperlyConfigured(
            "the payhooks webhook view runs inside an atomic block: exclude it from your "
            "atomic middleware or decorator (it opens and commits its own)"
        )
    # translated: the raw connection's own errors (a persistent connection the database
    # dropped, found by the first statement) are 503 like Django's, never a 500.
    with unavailable_translated(), translated(), transaction.atomic(using=config.database):
        conn = raw_connection(config.database)
        conn.execute(_LOCK_TIMEOUT, (f"{config.lock_timeout_ms}ms",))
        pending = claim(conn)
    return pending.receipt()


def raw_connection(alias: str) -> Connection:
    """The psycopg connection under Django's, opened if need be: opened afresh when the one
    it holds was lost (a database restart, a failover), which Django itself notices only
    between requests, never in a daemon's passes (``manage.py payhooks_confirm``)."""
    wrapper = connections[alias]
    held = wrapper.connection
    if isinstance(held, psycopg.Connection) and held.closed and not wrapper.in_atomic_block:
        wrapper.close()
    wrapper.ensure_connection()
    raw = wrapper.connection
    if not isinstance(raw, psycopg.Connection):
        raise ImproperlyConfigured(
            f"payhooks needs Django's PostgreSQL backend on psycopg 3 for database {alias!r}"
        )
    return raw


@contextlib.contextmanager
def unavailable_translated() -> Iterator[None]:
    """Django's ``OperationalError`` (connection lost, lock or statement timeout, in a
    handler's ORM call or at the commit) becomes ``DatabaseUnavailable``: 503, so the gateway
    tries again; a serialization failure or deadlock becomes ``SerializationConflict``, which
    the endpoint runs again first. Anything else a handler raises is a bug, and stays a 500."""
    try:
        yield
    except db.OperationalError as exc:
        lost = conflict(exc.__cause__)
        if lost is not None:
            raise lost from exc
        cause = type(exc.__cause__ or exc).__name__
        raise DatabaseUnavailable(f"database unavailable: {cause}") from exc


def non_atomic(view: V) -> V:
    """Exempt ``view`` from ``ATOMIC_REQUESTS`` on every database: the delivery must own its
    transaction, or its answer would precede the commit that makes it true."""
    from django.conf import settings

    for alias in settings.DATABASES:
        view = transaction.non_atomic_requests(using=alias)(view)
    return view
