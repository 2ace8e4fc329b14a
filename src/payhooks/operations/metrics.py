"""Prometheus metrics from the core's tables, for a merchant's own app (the ``metrics`` extra).

::

    from payhooks.operations.metrics import asgi_app, wsgi_app
    app.mount("/metrics", asgi_app(DATABASE_URL))                      # FastAPI, Starlette
    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/metrics": wsgi_app(DATABASE_URL)})  # Flask

Django: ``path("metrics", payhooks.django.metrics.view)`` in your urls.

What they say is read from the database, so it is right whichever process did the work: the
parked deliveries waiting for a person or a replay, the payments parked for their amount, when
the last delivery was recorded, what reconciliation did per gateway, and the disputes still
open per gateway with their amounts, those waiting for an answer and those past their
deadline. A scrape needs no
authentication, so what it costs is bounded: one read per ``ttl_seconds`` however many ask, on
a connection of its own with a one-second statement timeout, every label from a closed set.
Put it behind your proxy's access rules as you would any metrics endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from payhooks.events import Provider
from payhooks.operations.outbox import Backlog, backlogs
from payhooks.plumbing.db import Connection, libpq_url, query

log = logging.getLogger("payhooks.metrics")

TTL_SECONDS = 5.0
STATEMENT_TIMEOUT_MS = 1000
CONNECT_TIMEOUT_SECONDS = 2

Totals = tuple[tuple[str, int, int, int, int, int], ...]
"""Per gateway: checkouts examined, payments recovered, API errors, expiries reported, and 1
while it refuses the API credentials."""


Disputed = tuple[tuple[str, int, int, int, int], ...]
"""Per gateway: disputes open, their amounts in paise, those waiting for the merchant's answer,
and those of them past their deadline."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """What the metrics read from the core's tables at one moment."""

    parked: int
    amount_mismatches: int
    last_delivery_timestamp: float
    reconcile: Totals = ()
    relay: tuple[Backlog, ...] = ()
    """Each relay channel's unpublished payment events."""
    disputes: Disputed = ()


# Each count walks a partial index (processed_webhooks_parked), never the settled records.
_CORE = """
SELECT (SELECT count(*) FROM processed_webhooks WHERE outcome = 'parked'),
       (SELECT count(*) FROM payhooks_amount_mismatches m JOIN processed_webhooks w
            ON w.provider = m.provider AND w.event_id = m.event_id AND w.outcome = 'parked'
        WHERE m.resolved_at IS NULL),
       (SELECT coalesce(extract(epoch FROM max(processed_at)), 0) FROM processed_webhooks)
"""
RECONCILE_TOTALS = """
SELECT provider, examined, recovered, api_errors, expired, (refused_since IS NOT NULL)::int
FROM payhooks_reconcile_totals ORDER BY provider
"""


# Through payhooks_disputes_open: the open ones only, however many were ever decided.
DISPUTES_OPEN = """
SELECT provider, count(*), coalesce(sum(amount_paise), 0),
       count(*) FILTER (WHERE status IN ('opened', 'action_required')),
       count(*) FILTER (WHERE status IN ('opened', 'action_required') AND respond_by < now())
FROM payhooks_disputes WHERE closed_at IS NULL
GROUP BY provider ORDER BY provider
"""


def read(conn: Connection) -> Snapshot:
    """Reads a snapshot: each count walks a partial index, never the settled records."""
    parked, mismatches, last = query(conn, _CORE).fetchone() or (0, 0, 0)
    return Snapshot(
        parked=int(parked),
        amount_mismatches=int(mismatches),
        last_delivery_timestamp=float(last),
        reconcile=read_totals(conn),
        relay=tuple(backlogs(conn)),
        disputes=read_disputes(conn),
    )


def read_disputes(conn: Connection) -> Disputed:
    """The open disputes per gateway (``payhooks_disputes_*`` gauges)."""
    known = {p.value for p in Provider}
    return tuple(
        (str(p), int(n), int(paise), int(waiting), int(overdue))
        for p, n, paise, waiting, overdue in query(conn, DISPUTES_OPEN)
        if p in known
    )


def read_totals(conn: Connection) -> Totals:
    """Reconciliation's totals per gateway, as ``payhooks_reconcile_*`` counters."""
    known = {p.value for p in Provider}
    return tuple(
        (str(p), int(a), int(b), int(c), int(d), int(e))
        for p, a, b, c, d, e in query(conn, RECONCILE_TOTALS)
        if p in known
    )


def reading(database_url: str) -> Callable[[], Snapshot]:
    """``read`` on a fresh connection of its own, bounded in time. ``database_url`` may be
    SQLAlchemy's ``postgresql+psycopg://`` (a Flask app's)."""
    database_url = libpq_url(database_url)

    def read_now() -> Snapshot:
        with psycopg.connect(
            database_url,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
            application_name="payhooks-metrics",
        ) as conn:
            return read(conn)

    return read_now


class CoreMetrics(Collector):
    """The latest snapshot, read again when older than ``ttl_seconds``; nothing at all while
    the database cannot be read (an absent series, not a zero that would look healthy).

    ``read_now`` may answer None for "nothing to show": the reference service registers this
    collector over the snapshot its own probes read (``ttl_seconds=0``), so it exposes the very
    series a merchant's app does, and adds its own beside them."""

    def __init__(
        self,
        read_now: Callable[[], Snapshot | None],
        *,
        ttl_seconds: float = TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read_now
        self._ttl = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._latest: tuple[float, Snapshot | None] | None = None

    def snapshot(self) -> Snapshot | None:
        """The latest snapshot, read again once it is older than the TTL; None
        while the database cannot be read (no series rather than zeros)."""
        with self._lock:
            now = self._clock()
            if self._latest is None or now - self._latest[0] >= self._ttl:
                try:
                    self._latest = (now, self._read())
                except Exception:  # the database away or slow: say nothing rather than zeros
                    log.warning("metrics_read_failed", exc_info=True)
                    self._latest = (now, None)
            return self._latest[1]

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The series, for Prometheus' registry; ``payhooks_database_readable`` always, so a
        rule can tell a series absent for an outage from one that cleared."""
        found = self.snapshot()
        yield GaugeMetricFamily(
            "payhooks_database_readable",
            "1 when the series read from the database are shown; 0 while it cannot be read "
            "(they are absent, not zero)",
            value=0.0 if found is None else 1.0,
        )
        if found is None:
            return
        yield GaugeMetricFamily(
            "payhooks_parked_deliveries",
            "Deliveries parked: matched nothing yet, or paid another amount than expected",
            value=found.parked,
        )
        yield GaugeMetricFamily(
            "payhooks_amount_mismatches",
            "Parked payments of another amount or currency than expected, waiting for a person",
            value=found.amount_mismatches,
        )
        yield GaugeMetricFamily(
            "payhooks_last_delivery_timestamp_seconds",
            "When the last delivery was recorded (0: none yet)",
            value=found.last_delivery_timestamp,
        )
        yield from reconcile_counters(found.reconcile)
        yield from relay_gauges(found.relay)
        yield from dispute_gauges(found.disputes)


def relay_gauges(found: tuple[Backlog, ...]) -> Iterator[GaugeMetricFamily]:
    """Per broker channel: the payment events waiting to be published, and the oldest one's
    age (0 when none waits); the ``relay_backlog`` alert fires on the age."""
    waiting = GaugeMetricFamily(
        "payhooks_relay_backlog",
        "Payment events queued for a broker and not yet published by its relay",
        labels=["channel"],
    )
    oldest = GaugeMetricFamily(
        "payhooks_relay_oldest_seconds",
        "How long the oldest unpublished payment event of the channel has waited",
        labels=["channel"],
    )
    for backlog in found:
        waiting.add_metric([backlog.channel], float(backlog.waiting))
        oldest.add_metric([backlog.channel], backlog.oldest_seconds)
    yield waiting
    yield oldest


_DISPUTE_GAUGES = (
    ("payhooks_disputes_open", "Disputes not yet won, lost or closed"),
    ("payhooks_disputes_open_paise", "What the disputes not yet decided are for, in paise"),
    (
        "payhooks_disputes_awaiting_response",
        "Open disputes waiting for the merchant's answer (accept or contest at the gateway)",
    ),
    (
        "payhooks_disputes_overdue",
        "Open disputes waiting for the merchant's answer past their deadline to respond",
    ),
)


def dispute_gauges(disputed: Disputed) -> Iterator[GaugeMetricFamily]:
    """Every known gateway, zero while it has no open dispute: a closed label set."""
    found = {row[0]: row[1:] for row in disputed}
    for index, (name, documentation) in enumerate(_DISPUTE_GAUGES):
        family = GaugeMetricFamily(name, documentation, labels=["gateway"])
        for provider in Provider:
            family.add_metric([provider.value], float(found.get(provider.value, (0,) * 4)[index]))
        yield family


_RECONCILE_COUNTERS = (
    ("payhooks_reconcile_checkouts_examined", "Checkouts reconciliation asked a gateway about"),
    (
        "payhooks_reconcile_payments_recovered",
        "Payments found only by reconciliation: no webhook for them ever arrived",
    ),
    ("payhooks_reconcile_api_errors", "Gateway status API calls that failed (429, 5xx, timeout)"),
    ("payhooks_reconcile_expired", "Checkouts the gateway reported expired (reported only)"),
)


def reconcile_counters(totals: Totals) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
    """Every known gateway, zero until it has a row: a closed label set, present from the start."""
    found = {row[0]: row[1:] for row in totals}
    for index, (name, documentation) in enumerate(_RECONCILE_COUNTERS):
        family = CounterMetricFamily(name, documentation, labels=["gateway"])
        for provider in Provider:
            family.add_metric(
                [provider.value], float(found.get(provider.value, (0, 0, 0, 0, 0))[index])
            )
        yield family
    refused = GaugeMetricFamily(
        "payhooks_reconcile_credentials_refused",
        "1 while the gateway refuses reconciliation's API credentials (401, 403, PayU's "
        "Invalid Hash)",
        labels=["gateway"],
    )
    for provider in Provider:
        refused.add_metric([provider.value], float(found.get(provider.value, (0,) * 5)[4]))
    yield refused


def registry(
    read_now: Callable[[], Snapshot], ttl_seconds: float = TTL_SECONDS
) -> CollectorRegistry:
    """A registry of its own holding the core's metrics (no process-wide globals)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(CoreMetrics(read_now, ttl_seconds=ttl_seconds))
    return found


def asgi_app(database_url: str) -> Callable[..., Awaitable[None]]:
    """An ASGI app answering Prometheus' scrape, to mount at ``/metrics``. The database is read
    on a thread, one scrape at a time, while the others wait on the event loop: a slow or
    absent database never stalls the app's loop (webhooks answered on it go on)."""
    found = registry(reading(database_url))
    one_at_a_time: list[asyncio.Lock] = []

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if not one_at_a_time:
            one_at_a_time.append(asyncio.Lock())
        async with one_at_a_time[0]:
            body = await asyncio.get_running_loop().run_in_executor(None, generate_latest, found)
        headers = [(b"content-type", CONTENT_TYPE_LATEST.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def wsgi_app(database_url: str) -> Callable[..., object]:
    """A WSGI app answering Prometheus' scrape (Flask: under ``DispatcherMiddleware``)."""
    return make_wsgi_app(registry(reading(database_url)))


__all__ = [
    "CoreMetrics",
    "Snapshot",
    "asgi_app",
    "dispute_gauges",
    "read",
    "read_disputes",
    "reading",
    "reconcile_counters",
    "registry",
    "relay_gauges",
    "wsgi_app",
]
