"""A reconciliation pass in a merchant's own app: its database, its handler, its scheduler.

::

    from payhooks.reconcile import run
    tally = run("postgresql://shop@db/shop", hooks)        # cron, a timer, a task queue
    print(tally.summary())

The credentials are read from the environment, under the names the reference service uses
(``PAYHOOKS_RAZORPAY_KEY_ID`` and ``PAYHOOKS_RAZORPAY_KEY_SECRET``, ...: docs/operations.md);
a gateway with neither is not asked, one with only one of them is refused. What the pass finds
is claimed and handed to ``handler`` exactly as a webhook would be (``ingest_received``), under
a key no webhook can take, so it reaches the handler once whichever comes first. The rules are
the reference service's: only checkouts older than ``after_s`` and younger than ``window_s``,
at most ``limit`` per gateway, 429s and outages pause that gateway, nothing is ever cancelled
on silence (``payhooks.reconcile.passes``). The reach is read from the same environment as
the CLI and Django read it (``PAYHOOKS_RECONCILE_AFTER_S``, ``_WINDOW_S``, ``_TIMEOUT_MS``:
``reach_from``); an argument outranks the environment.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import TypedDict, Unpack

import psycopg

from payhooks.events import Provider, Received
from payhooks.gateways import ApiCredentials, credentials
from payhooks.gateways._status import StatusClient, client, http_client
from payhooks.intake.hooks import guarded
from payhooks.intake.ingest import Handler, Receipt, ingest_received
from payhooks.plumbing.db import Connection, libpq_url, translated
from payhooks.reconcile.passes import (
    Connect,
    Deliver,
    Followup,
    Notifier,
    Options,
    Reconciler,
    Tally,
    followed,
)

AFTER_S = 900
WINDOW_S = 7 * 24 * 3600
TIMEOUT_S = 10.0
_MOST = 2_147_483_647  # what the service's settings allow (PostgreSQL's integers)
_CLIPPED = 40


def delivering(connect: Connect, handler: Handler) -> Deliver:
    """What a pass finds, claimed and applied through ``handler`` on a connection of its own
    (guarded as every integration's is: a handler that commits is refused)."""
    safe = guarded(handler)

    def deliver(received: Received, *, then: Followup) -> Receipt:
        with connect() as conn:
            return ingest_received(conn, received, followed(safe, then))

    return deliver


def connecting(database_url: str) -> Connect:
    """A fresh autocommit connection each time: a pass makes a few dozen at most, and holds
    none while it waits on a gateway. ``database_url`` may be SQLAlchemy's form. It prepares
    no statement on the server: behind a transaction pooler the next transaction may meet
    another server session, where it would not exist (a fresh connection gains little by it)."""
    database_url = libpq_url(database_url)

    @contextlib.contextmanager
    def connect() -> Iterator[Connection]:
        with translated():  # no connection to be had: the whole pass's (DatabaseAway)
            conn = psycopg.connect(database_url, autocommit=True, prepare_threshold=None)
        with conn:
            yield conn

    return connect


class PassOptions(TypedDict, total=False):
    """How far a pass reaches: checkouts older than ``after_s`` (default 900) and younger than
    ``window_s`` (7 days), at most ``limit`` per gateway (100), each call's whole deadline
    ``timeout_s`` (10 s)."""

    after_s: int
    window_s: int
    limit: int
    timeout_s: float


def reach_from(environ: Mapping[str, str]) -> PassOptions:
    """The reach ``PAYHOOKS_RECONCILE_AFTER_S``, ``PAYHOOKS_RECONCILE_WINDOW_S`` and
    ``PAYHOOKS_RECONCILE_TIMEOUT_MS`` set in ``environ`` (those unset are left out), read as
    the CLI reads them, so every door that runs a pass reaches as far. A value that is not a
    whole number from 1 is a ``ValueError`` naming it, never ignored."""
    reach: PassOptions = {}
    if (after := _whole(environ, "PAYHOOKS_RECONCILE_AFTER_S")) is not None:
        reach["after_s"] = after
    if (window := _whole(environ, "PAYHOOKS_RECONCILE_WINDOW_S")) is not None:
        reach["window_s"] = window
    if (millis := _whole(environ, "PAYHOOKS_RECONCILE_TIMEOUT_MS")) is not None:
        reach["timeout_s"] = millis / 1000
    return reach


def _whole(environ: Mapping[str, str], name: str) -> int | None:
    raw = (environ.get(name) or "").strip()
    if not raw:
        return None
    digits = raw.lstrip("0") if raw.isascii() and raw.isdecimal() else ""
    if not digits or len(digits) > len(str(_MOST)) or int(digits) > _MOST:
        shown = raw if len(raw) <= _CLIPPED else raw[:_CLIPPED] + "…"
        raise ValueError(f"{name} must be a whole number from 1 to {_MOST}, not {shown!r}")
    return int(digits)


def reconcile_once(
    connect: Connect,
    deliver: Deliver,
    found: Mapping[Provider, ApiCredentials],
    *,
    notify: Notifier | None = None,
    stop: Callable[[], bool] = lambda: False,
    confirm_only: bool = False,
    erring: bool = False,
    **reach: Unpack[PassOptions],
) -> Tally:
    """One pass asking each gateway in ``found`` (``credentials``) about the due checkouts,
    then about the callbacks waiting for its word; with ``confirm_only``, about those alone.
    ``erring`` (a door's one pass): what waits to be asked again after an error is counted."""
    options = Options(
        after_s=reach.get("after_s", AFTER_S),
        window_s=reach.get("window_s", WINDOW_S),
        limit=reach.get("limit", 100),
    )
    with http_client(reach.get("timeout_s", TIMEOUT_S)) as http:
        clients: dict[Provider, StatusClient] = {p: client(c, http) for p, c in found.items()}
        reconciler = Reconciler(
            connect, clients, options, deliver=deliver, notify=notify, stop=stop
        )
        return (
            reconciler.confirm_due(erring=erring) if confirm_only else reconciler.run(erring=erring)
        )


def run(
    database_url: str,
    handler: Handler,
    *,
    environ: Mapping[str, str] | None = None,
    confirm_only: bool = False,
    **reach: Unpack[PassOptions],
) -> Tally:
    """One pass on ``database_url``, through ``handler``, with the credentials and the reach
    in ``environ`` (the process's environment by default: ``reach_from``); ``reach`` as
    ``PassOptions`` outranks the environment's. ``confirm_only``: the callbacks waiting for a
    gateway's word alone (``payhooks confirm``'s pass), no checkout asked about."""
    environ = os.environ if environ is None else environ
    found = credentials(environ)
    connect = connecting(database_url)
    options: PassOptions = {**reach_from(environ), **reach}
    return reconcile_once(
        connect, delivering(connect, handler), found, confirm_only=confirm_only, **options
    )


__all__ = [
    "AFTER_S",
    "TIMEOUT_S",
    "WINDOW_S",
    "PassOptions",
    "connecting",
    "credentials",
    "delivering",
    "followed",
    "reach_from",
    "reconcile_once",
    "run",
]
