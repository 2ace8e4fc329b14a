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
on silence (``payhooks.reconcile.passes``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import TypedDict, Unpack

import psycopg

from payhooks.db import Connection, libpq_url
from payhooks.events import Provider, Received
from payhooks.gateways import ApiCredentials, credentials
from payhooks.gateways._status import StatusClient, client, http_client
from payhooks.hooks import guarded
from payhooks.ingest import Handler, Receipt, ingest_received
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
    none while it waits on a gateway. ``database_url`` may be SQLAlchemy's form."""
    database_url = libpq_url(database_url)

    @contextlib.contextmanager
    def connect() -> Iterator[Connection]:
        with psycopg.connect(database_url, autocommit=True) as conn:
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


def reconcile_once(
    connect: Connect,
    deliver: Deliver,
    found: Mapping[Provider, ApiCredentials],
    *,
    notify: Notifier | None = None,
    stop: Callable[[], bool] = lambda: False,
    confirm_only: bool = False,
    **reach: Unpack[PassOptions],
) -> Tally:
    """One pass asking each gateway in ``found`` (``credentials``) about the due checkouts,
    then about the callbacks waiting for its word; with ``confirm_only``, about those alone."""
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
        return reconciler.confirm_due() if confirm_only else reconciler.run()


def run(
    database_url: str,
    handler: Handler,
    *,
    environ: Mapping[str, str] | None = None,
    **reach: Unpack[PassOptions],
) -> Tally:
    """One pass on ``database_url``, through ``handler``, with the credentials in
    ``environ`` (the process's environment by default); ``reach`` as ``PassOptions``."""
    found = credentials(os.environ if environ is None else environ)
    connect = connecting(database_url)
    return reconcile_once(connect, delivering(connect, handler), found, **reach)


__all__ = [
    "AFTER_S",
    "TIMEOUT_S",
    "WINDOW_S",
    "PassOptions",
    "connecting",
    "credentials",
    "delivering",
    "followed",
    "reconcile_once",
    "run",
]
