"""Payment webhooks in a Flask app, over the merchant's SQLAlchemy engine (docs/flask.md)::

    webhooks = payhooks.flask.blueprint(adapters=[razorpay], hooks=hooks, engine=engine)
    app.register_blueprint(webhooks)   # POST /webhooks/razorpay

A delivery is verified before it may take a connection. Then the claim, every hook and the
merchant's SQLAlchemy session (``session_for(conn)``) share one connection of the engine's
pool and one transaction, and the gateway is answered, by the shared step
(``payhooks.intake.endpoint``), only once PostgreSQL confirms the commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import psycopg
import sqlalchemy
import sqlalchemy.event
import sqlalchemy.exc
from flask import Blueprint, Flask, Response, g, jsonify, request, request_started
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker
from werkzeug.exceptions import RequestEntityTooLarge

from payhooks.events import Event, Received
from payhooks.gateways import Adapter
from payhooks.intake.endpoint import Endpoint, Note, Reply, unfolded
from payhooks.intake.hooks import ENDINGS, guarded, noting
from payhooks.intake.ingest import (
    Applied,
    Handler,
    Pending,
    Receipt,
    ingest_received_in_transaction,
)
from payhooks.operations import health, reads, timeline
from payhooks.operations.deliverylog import (
    DeliveryLog,
    OwnConnection,
    closed_at_exit,
    own_connection,
)
from payhooks.plumbing.db import Connection, conflict
from payhooks.plumbing.errors import (
    DatabaseUnavailable,
    HandlerCommitted,
    LengthRequired,
    PayhooksError,
    PayloadTooLarge,
)

log = logging.getLogger("payhooks.flask")

ENDPOINT = "webhook"
_EARLY = "_payhooks_body"  # on flask.g: the body as read when the request started
_FIRST = "_payhooks_reads_first"  # on a view: what bounds the body read before it, if read

View = TypeVar("View", bound=Callable[..., Any])
Bounding = Callable[[Mapping[str, Any]], tuple[int, str] | None]
"""A marked view's bound, and the gateway named in its refusal, for its view arguments."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Store:
    """Where deliveries are claimed: the merchant's engine, and how they make sessions."""

    engine: sqlalchemy.Engine
    sessions: sessionmaker[Session]


def blueprint(
    *,
    adapters: Iterable[Adapter],
    hooks: Handler,
    engine: sqlalchemy.Engine | None = None,
    session_factory: sessionmaker[Session] | None = None,
    name: str = "payhooks",
    url_prefix: str = "/webhooks",
    delivery_log: bool | str = True,
) -> Blueprint:
    """``POST {url_prefix}/<gateway>`` for each adapter (``/webhooks/razorpay``, ...).

    Pass the engine, or a ``sessionmaker`` bound to one; it must use psycopg (3):
    ``postgresql+psycopg://``. ``hooks`` is a ``payhooks.Hooks`` (or any handler). Each
    request is noted in ``payhooks_deliveries`` (``delivery_log``: on a connection of its own
    made as the engine makes them, or to the conninfo given; ``False``: not at all)."""
    store = store_of(engine, session_factory)
    served = {adapter.provider.value: adapter for adapter in adapters}
    endpoint = Endpoint(served, log, _noted(store.engine, delivery_log))
    bp = Blueprint(name, __name__, url_prefix=url_prefix)
    view = _reading_first(_view(endpoint, store, hooks), _bound_by_gateway(endpoint))
    bp.add_url_rule("/<provider>", ENDPOINT, view, methods=["POST"])
    bp.register_error_handler(RequestEntityTooLarge, _refused_past_bound(endpoint))
    return bp


def reads_body_first(adapter: Adapter) -> Callable[[View], View]:
    """Mark a view of your own that hands a gateway's post to payhooks (PayU's ``surl`` and
    ``furl`` page, calling ``payhooks.ingest``): its body is read and kept when Flask starts
    the request, as the blueprint's own is, before any ``before_request`` function, so
    ``request.get_data()`` in the view is the exact bytes signed even after an app-wide hook
    parsed ``request.form``. A body past the adapter's bound is never read whole: Werkzeug
    answers 413 to whatever reads it next (a hook, ``request.get_data()``), or, for one a
    byte past the bound (all that is read), ``payhooks.ingest`` raises ``PayloadTooLarge``::

        @app.post("/payu/return")
        @payhooks.flask.reads_body_first(payu)
        def payu_return(): ...
    """
    bound = (adapter.max_body_bytes, adapter.provider.value)

    def mark(view: View) -> View:
        return _reading_first(view, lambda _: bound)

    return mark


def health_blueprint(
    *,
    engine: sqlalchemy.Engine,
    allow: Callable[[], bool],
    name: str = "payhooks_health",
    url_prefix: str = "/payhooks",
) -> Blueprint:
    """``GET {url_prefix}/health``: ``payhooks.operations.health.summary`` as JSON (last 2xx,
    answers by status in the last hour, signature failures, the forged-signature banner); 403 unless
    ``allow()`` (your operators' auth, reading ``flask.request`` or ``flask_login``)."""

    def summary() -> reads.Read:
        now = datetime.now(UTC)
        return lambda conn: health.summary(conn, now).as_json()

    return _reading_blueprint(engine, allow, name, url_prefix, "health", summary)


def timeline_blueprint(
    *,
    engine: sqlalchemy.Engine,
    allow: Callable[[], bool],
    name: str = "payhooks_timeline",
    url_prefix: str = "/payhooks",
) -> Blueprint:
    """``GET {url_prefix}/timeline?q=...``: ``payhooks.operations.timeline.answer`` as JSON, each
    gateway order what an operator typed names (a gateway order id, the reference given to
    ``expect``, a payment id, a delivery key, a UTR/RRN) with its story; 403 unless
    ``allow()``: it shows payments."""

    def told() -> reads.Read:
        return partial(timeline.answer, text=request.args.get("q", ""))

    return _reading_blueprint(engine, allow, name, url_prefix, "timeline", told)


def _reading_blueprint(
    engine: sqlalchemy.Engine,
    allow: Callable[[], bool],
    name: str,
    url_prefix: str,
    rule: str,
    reading: Callable[[], reads.Read],
) -> Blueprint:
    """A JSON ``GET /{rule}`` answered by a read on a connection of its own."""
    side = connection_of_engine(engine)
    bp = Blueprint(name, __name__, url_prefix=url_prefix)

    def answer() -> tuple[Response, int]:
        if not allow():
            return jsonify({"error": "forbidden"}), 403
        given = reads.answered(side, reading())
        return jsonify(given.body), given.status

    bp.add_url_rule(f"/{rule}", rule, answer, methods=["GET"])
    return bp


def _noted(engine: sqlalchemy.Engine, delivery_log: bool | str) -> Note | None:
    """A WSGI app is told nothing when it stops: the log is closed, its last lines written,
    when the worker's interpreter exits."""
    if delivery_log is False:
        return None
    if isinstance(delivery_log, str):
        side = own_connection(delivery_log)
    else:
        side = connection_of_engine(engine)
    return closed_at_exit(DeliveryLog(side)).note


def connection_of_engine(engine: sqlalchemy.Engine) -> OwnConnection:
    """A connection of its own, made as ``engine`` makes them (its URL, ``connect_args``,
    hooks) by a pool of the same making (``Pool.recreate``), never taken from the engine's
    own: the merchant's pool keeps every connection it had, and a new one is never one of its
    idle connections the database ended meanwhile (a restart, a failover), which would fail
    the next read too."""
    own = engine.pool.recreate()

    def connect() -> Connection:
        with _database_edge():
            pooled = own.connect()
        conn = pooled.driver_connection
        pooled.detach()
        if not isinstance(conn, psycopg.Connection):
            raise TypeError(f"payhooks needs a psycopg connection, not {type(conn).__name__}")
        conn.autocommit = True
        return conn

    return OwnConnection(connect)


def store_of(
    engine: sqlalchemy.Engine | None, session_factory: sessionmaker[Session] | None
) -> Store:
    """Where deliveries are claimed: the engine, or the session factory's bound engine,
    which must run on psycopg (one of the two, never both)."""
    if (engine is None) == (session_factory is None):
        raise ValueError("pass engine= or session_factory=, one of them")
    sessions = session_factory or sessionmaker()
    bound = engine or sessions.kw.get("bind")
    if not isinstance(bound, sqlalchemy.Engine):
        raise ValueError("session_factory must be bound to an Engine: sessionmaker(bind=engine)")
    if bound.dialect.driver != "psycopg":
        raise ValueError(
            f"payhooks runs on psycopg (3): postgresql+psycopg://, not {bound.dialect.driver}"
        )
    return Store(engine=bound, sessions=sessions)


# --- the request ----------------------------------------------------------------------------


def _view(endpoint: Endpoint, store: Store, handler: Handler) -> Callable[..., Response]:
    def claim(received: Received) -> Receipt:
        return deliver(store, received, handler)

    def webhook(provider: str) -> Response:
        try:
            body = _body(endpoint, provider)
        except PayhooksError as exc:
            return _response(endpoint.unread(provider, exc))
        pairs = unfolded(request.headers.items(), endpoint.adapter(provider))
        return _response(endpoint.deliver(provider, body, pairs, claim))

    return webhook


def _response(reply: Reply) -> Response:
    response = jsonify(reply.body)
    response.status_code = reply.status
    return response


def _reading_first(view: View, bounding: Bounding) -> View:
    """``view`` marked to have its body read when Flask starts the request, within the bound
    ``bounding`` gives for the request's view arguments (None: not read early).

    Werkzeug parses ``request.form`` from the input stream and leaves ``get_data()`` empty
    afterwards, unless the bytes were cached first; PayU posts forms, and an app-wide hook
    reading ``request.form`` (a CSRF or spam check) would otherwise leave nothing to verify.
    ``request_started`` is sent before every ``before_request`` function, app or blueprint.
    One receiver serves every marked view of every app (connecting it again changes nothing);
    a view keeps its mark under the names it is registered by, and through decorators that
    copy its ``__dict__`` (``functools.wraps``)."""
    setattr(view, _FIRST, bounding)
    request_started.connect(_read_first, weak=False)
    return view


def _read_first(app: Flask, **_: object) -> None:
    view = app.view_functions.get(request.endpoint) if request.endpoint else None
    bounding: Bounding | None = getattr(view, _FIRST, None)
    found = None if bounding is None else bounding(request.view_args or {})
    if found is None:
        return
    limit, gateway = found
    try:
        setattr(g, _EARLY, read_body(limit, gateway))
    except (PayloadTooLarge, LengthRequired) as exc:
        setattr(g, _EARLY, exc)


def _bound_by_gateway(endpoint: Endpoint) -> Bounding:
    """The blueprint's view reads within the bound of the gateway its URL names, if served."""

    def bound(view_args: Mapping[str, Any]) -> tuple[int, str] | None:
        provider = str(view_args.get("provider", ""))
        return (endpoint.bound(provider), provider) if provider in endpoint.adapters else None

    return bound


def _refused_past_bound(endpoint: Endpoint) -> Callable[[RequestEntityTooLarge], Any]:
    """A body past the bound is left unread; an app-wide hook parsing ``request.form`` then
    meets Werkzeug's 413 before the view can answer. payhooks' refusal is answered and noted
    as the view would have (JSON ``payload_too_large``, a line in the delivery log), not as
    Werkzeug's HTML page, which nothing notes. Any other 413 on the route (a form the app's
    own limits refuse, ``MAX_FORM_MEMORY_SIZE``, in a body payhooks did read) is Werkzeug's."""

    def refused(exc: RequestEntityTooLarge) -> Any:
        early = g.pop(_EARLY, None)
        if not isinstance(early, PayloadTooLarge):
            return exc
        return _response(endpoint.unread(early.provider, early))

    return refused


def _body(endpoint: Endpoint, provider: str) -> bytes:
    early: bytes | PayloadTooLarge | LengthRequired | None = g.pop(_EARLY, None)
    if isinstance(early, PayloadTooLarge | LengthRequired):
        raise early
    return read_body(endpoint.bound(provider), provider) if early is None else early


def read_body(limit: int, gateway: str) -> bytes:
    """The exact bytes, kept for whoever parses ``request.form`` next; refused past the
    gateway's bound (declared or streamed) without reading further.

    Werkzeug stops a body with no declared length (chunked) at ``max_content_length``
    without a word: the limit is one byte past the bound, so a body cut there is told from
    one that ends there. Under a server that does not end chunked input
    (``wsgi.input_terminated``), Werkzeug reads nothing: refused 411, not verified."""
    if request.content_length is None and not request.environ.get("wsgi.input_terminated"):
        raise LengthRequired(
            gateway,
            "no Content-Length, and the WSGI server does not end chunked input "
            "(wsgi.input_terminated)",
        )
    request.max_content_length = limit + 1
    try:
        body = request.get_data(cache=True)
    except RequestEntityTooLarge as exc:
        raise PayloadTooLarge(gateway, f"body exceeds {limit} bytes") from exc
    if len(body) > limit:
        raise PayloadTooLarge(gateway, f"body exceeds {limit} bytes")
    if not body and (request.content_length or 0) > 0:
        raise RuntimeError(
            "the request body was consumed before payhooks could read it "
            "(a WSGI middleware or request_started receiver reading request.form?)"
        )
    return body


# --- the transaction ------------------------------------------------------------------------

_CURRENT: ContextVar[tuple[Connection, Session] | None] = ContextVar(
    "payhooks_flask_session", default=None
)


def session_for(conn: Connection) -> Session:
    """The merchant's SQLAlchemy session on ``conn``, the connection a hook was given: one
    transaction, so ORM writes commit with the claim or not at all. Flushed after the hooks,
    inside the claim's savepoint; a hook must not commit or roll it back."""
    current = _CURRENT.get()
    if current is None or current[0] is not conn:
        raise RuntimeError(
            "session_for() takes the connection a payhooks hook was given by the blueprint: "
            "hooks run by payhooks replay or reconcile get a bare psycopg connection, so "
            "write them in SQL on conn (docs/flask.md, 'Hooks that run outside a request')"
        )
    return current[1]


def deliver(store: Store, received: Received, handler: Handler) -> Receipt:
    """Claim and apply in one transaction of the engine's, commit, then answer: on the same
    connection, still checked out, so no one else's work can be mistaken for ours."""
    with _checked_out(store.engine) as sa_conn:
        transaction = sa_conn.begin()
        try:
            with _database_edge():
                pending = _claim(store, sa_conn, received, handler)
        except BaseException:
            _rolled_back(sa_conn, transaction)
            raise
        with _database_edge():
            transaction.commit()
        return pending.receipt()


def _rolled_back(sa_conn: sqlalchemy.Connection, transaction: sqlalchemy.RootTransaction) -> None:
    """A hook's refused ``session.connection().rollback()`` leaves SQLAlchemy's transaction
    deassociated while the driver's is still open: that one is rolled back directly.

    On a connection lost (the database restarted or failed over) the server has already
    rolled the transaction back, and the rollback's own failure must not stand in for the
    error that ended the delivery (a 503 answered 500): it is let go, and SQLAlchemy, told
    of the loss, drops the pool's other connections opened before it."""
    driver = driver_connection(sa_conn)
    try:
        if transaction.is_active:
            transaction.rollback()
        else:
            driver.rollback()
    except (sqlalchemy.exc.DBAPIError, psycopg.OperationalError):
        if not driver.broken:
            raise


def _claim(
    store: Store, sa_conn: sqlalchemy.Connection, received: Received, handler: Handler
) -> Pending:
    conn = driver_connection(sa_conn)
    # rollback_only: a hook's session.commit() cannot end the claim's transaction early.
    with store.sessions(bind=sa_conn, join_transaction_mode="rollback_only") as session:
        token = _CURRENT.set((conn, session))
        try:
            checked = guarded(_flushing(handler, session))
            return ingest_received_in_transaction(conn, received, checked)
        finally:
            _CURRENT.reset(token)


def _flushing(handler: Handler, session: Session) -> Handler:
    """The ORM's pending writes go out inside the claim's savepoint, so they are undone with
    it (a handler that raises, a parked delivery still parked), never flushed after it.

    The session only joins the claim's transaction: a hook's ``session.commit()`` would
    commit nothing (the hook believing its work durable before it is) and its
    ``session.rollback()`` would drop its pending writes while the claim is recorded. Both
    are refused, like a commit on the connection, even when the hook catches the error and
    carries on; so is the connection's own ``commit()`` or ``rollback()`` (``conn``'s, or
    through ``session.connection()``), noted as it is called, before the flush, which fails
    for another reason after SQLAlchemy was refused a commit. Savepoints
    (``session.begin_nested()``) are the hook's own, and allowed."""
    ended: list[str] = []

    def on_commit(committing: Session) -> None:
        if not committing.in_nested_transaction():
            ended.append("session.commit()")
            raise HandlerCommitted("session.commit()")

    def on_rollback(_: Session, previous: SessionTransaction) -> None:
        if previous.parent is None and not previous.nested:
            ended.append("session.rollback()")

    def run(conn: Connection, event: Event) -> Applied:
        sqlalchemy.event.listen(session, "before_commit", on_commit)
        sqlalchemy.event.listen(session, "after_soft_rollback", on_rollback)
        try:
            with _conflicts_named(), noting(conn, ENDINGS, ended):
                applied = handler(conn, event)
        finally:
            sqlalchemy.event.remove(session, "before_commit", on_commit)
            sqlalchemy.event.remove(session, "after_soft_rollback", on_rollback)
        if ended:
            raise HandlerCommitted(ended[0])
        with _conflicts_named():
            session.flush()
        return applied

    return run


@contextmanager
def _conflicts_named() -> Iterator[None]:
    """A flush that fails rolls the session back, which the claim's open transaction refuses:
    the refusal is raised, the serialization failure behind it only its context. Named as
    the conflict it is, so the delivery is run again rather than refused as a handler's
    rollback."""
    try:
        yield
    except Exception as exc:
        found: BaseException | None = exc
        while found is not None:
            lost = conflict(getattr(found, "orig", found))
            if lost is not None:
                raise lost from exc
            found = found.__cause__ or found.__context__
        raise


def driver_connection(sa_conn: sqlalchemy.Connection) -> Connection:
    """The psycopg connection under a SQLAlchemy connection, which the claim runs on."""
    conn = sa_conn.connection.driver_connection
    if not isinstance(conn, psycopg.Connection):
        raise TypeError(f"payhooks needs a psycopg connection, not {type(conn).__name__}")
    return conn


@contextmanager
def _checked_out(engine: sqlalchemy.Engine) -> Iterator[sqlalchemy.Connection]:
    with _database_edge():
        sa_conn = engine.connect()
    with sa_conn:
        yield sa_conn


@contextmanager
def _database_edge() -> Iterator[None]:
    """Taking a connection, a hook's ORM flush and committing are where an absent or busy
    database shows: answered 503 like the core's own, so the gateway retries, rather than as
    a bug; a serialization failure or deadlock becomes ``SerializationConflict``, which the
    endpoint runs again first."""
    try:
        yield
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.TimeoutError) as exc:
        lost = conflict(getattr(exc, "orig", None))
        if lost is not None:
            raise lost from exc
        raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc


def connection_of(session: Session) -> Connection:
    """The psycopg connection under ``session``'s transaction, for core calls that must commit
    with it: ``payhooks.expect(connection_of(db.session), "razorpay", order_id, ...)``."""
    return driver_connection(session.connection())


__all__ = [
    "blueprint",
    "connection_of",
    "health_blueprint",
    "reads_body_first",
    "session_for",
    "timeline_blueprint",
]
