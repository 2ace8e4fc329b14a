"""Prometheus metrics and the probes' view of the database, one of each per app.

Counters and the latency histogram are kept by the process that answers webhooks; the
outbox backlog, dead letters and purge progress are read from the database, so they are right
whichever worker process did the work. Beside them it registers the core's collector
(``payhooks.operations.metrics.CoreMetrics``, what a merchant's app mounts) over the same
read, so the service exposes every series a merchant's app does, defined once. Scrapes and
readiness probes are unauthenticated, so what they cost is bounded: every label comes from a
closed set, and the database is read through one connection of their own, once per period
however many ask.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import anyio
import anyio.to_thread
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from payhooks.events import Provider
from payhooks.intake.answers import STATUS_OF_ERROR
from payhooks.intake.ingest import Outcome
from payhooks.operations.deliverylog import OwnConnection
from payhooks.operations.metrics import CoreMetrics, Snapshot
from payhooks.operations.metrics import read as read_core
from payhooks.plumbing import db
from payhooks.plumbing.errors import DatabaseUnavailable
from payhooks.service import database
from payhooks.service.config import Settings

log = logging.getLogger("payhooks.service.metrics")

T = TypeVar("T")

UNKNOWN_PROVIDER = "unknown"
OTHER_OUTCOME = "other"
PROVIDER_LABELS = frozenset({*(p.value for p in Provider), UNKNOWN_PROVIDER})
OUTCOME_LABELS = frozenset(
    {
        *(o.value for o in Outcome),
        *(code for _, _, code in STATUS_OF_ERROR),
        "internal_error",
        OTHER_OUTCOME,
    }
)

GAUGES_TTL_SECONDS = 5.0  # a scrape interval is 15 s or more; staler than that is not useful
READY_TTL_SECONDS = 1.0
PROBE_CONNECT_TIMEOUT_SECONDS = 2
PROBE_STATEMENT_TIMEOUT_MS = 1000


def provider_label(name: str) -> str:
    """The path segment a client chose, as a label: a known provider, else ``unknown``."""
    return name if name in PROVIDER_LABELS else UNKNOWN_PROVIDER


def outcome_label(name: str) -> str:
    return name if name in OUTCOME_LABELS else OTHER_OUTCOME


_Series = tuple[Callable[[], None], Callable[[float], None]]
"""An answer's count and its latency's observation."""


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.deliveries = Counter(
            "payhooks_deliveries",
            "Webhook deliveries by provider and outcome",
            ["provider", "outcome"],
            registry=self.registry,
        )
        self.mismatches = Counter(
            "payhooks_payload_mismatches",
            "Same delivery key arrived with a different body",
            ["provider"],
            registry=self.registry,
        )
        self.conflict_retries = Counter(
            "payhooks_conflict_retries",
            "Times a delivery's transaction was run again after a serialization failure or "
            "deadlock (SQLSTATE 40001, 40P01)",
            ["provider"],
            registry=self.registry,
        )
        self.log_dropped = Counter(
            "payhooks_delivery_log_dropped",
            "Delivery log lines dropped while the database was away, or once the service was "
            "stopping (the console misses them)",
            registry=self.registry,
        ).inc
        self.log_unwritable = Counter(
            "payhooks_delivery_log_unwritable",
            "Delivery log lines the database refused to store (text it cannot hold), each "
            "dropped alone while the lines around it were written (the console misses them)",
            registry=self.registry,
        ).inc
        self.latency = Histogram(
            "payhooks_ingest_seconds",
            "Time to answer a webhook delivery",
            ["provider"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=self.registry,
        )
        self.database = DatabaseGauges()
        self.registry.register(self.database)
        # The core's series, as a merchant's app exposes them, over the same read.
        self.core = CoreMetrics(self.database.core, ttl_seconds=0)
        self.registry.register(self.core)
        self._series: dict[tuple[str, str], _Series] = {}
        self._answered = 0
        self._duplicates = 0
        self._lock = threading.Lock()
        ratio = Gauge(
            "payhooks_duplicate_ratio",
            "Share of answered deliveries that were duplicates, since start",
            registry=self.registry,
        )
        ratio.set_function(self._duplicate_ratio)

    def answered(self, provider: str, outcome: str, seconds: float) -> None:
        labels = provider_label(provider), outcome_label(outcome)
        count, observe = self._series.get(labels) or self._series_of(labels)
        count()
        observe(seconds)
        with self._lock:
            self._answered += 1
            self._duplicates += outcome == Outcome.DUPLICATE

    def _series_of(self, labels: tuple[str, str]) -> _Series:
        """The labelled series an answer moves, looked up once per gateway and answer (a
        lookup under a lock each time otherwise): every request passes here. Keyed by labels,
        never by the name a client chose, so it holds a few dozen at most."""
        series = self.deliveries.labels(*labels).inc, self.latency.labels(labels[0]).observe
        self._series[labels] = series
        return series

    def mismatch(self, provider: str) -> None:
        self.mismatches.labels(provider_label(provider)).inc()

    def retried(self, provider: str, times: int) -> None:
        self.conflict_retries.labels(provider_label(provider)).inc(times)

    def _duplicate_ratio(self) -> float:
        with self._lock:
            return self._duplicates / self._answered if self._answered else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Gauges:
    """The database's share of /metrics, as of one read: the service's own gauges, and the
    core's snapshot (what ``payhooks.operations.metrics`` shows a merchant's app)."""

    outbox_backlog: int
    outbox_oldest_seconds: float
    outbox_dead_letters: int
    purge_rows_expected: int
    purge_rows_done: int
    purge_finished_timestamp: float
    core: Snapshot


# Each count walks one partial index (payhooks_outbox_due, payhooks_outbox_failed), never the
# sent rows, which grow with history until the purge removes them. The backlog is the whole
# queue's (emails, alerts and chat notices; payment events for a broker are the relay's,
# payhooks_relay_backlog); the dead letters are the messages a person may queue again (an
# alert's notices given up are not).
OUTBOX_GAUGES = """
SELECT (SELECT count(*) FROM payhooks_outbox
        WHERE sent_at IS NULL AND failed_at IS NULL AND kind <> 'event'),
       (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)
        FROM payhooks_outbox WHERE sent_at IS NULL AND failed_at IS NULL AND kind <> 'event'),
       (SELECT count(*) FROM payhooks_outbox WHERE failed_at IS NOT NULL AND alert_key IS NULL)
"""
PURGE_PROGRESS = """
SELECT rows_expected, rows_done, extract(epoch FROM finished_at)
FROM maintenance_runs WHERE task = 'purge'
"""


def read_gauges(conn: db.Connection) -> Gauges:
    backlog, oldest, dead = conn.execute(OUTBOX_GAUGES).fetchone() or (0, 0, 0)
    core = read_core(conn)
    expected, done, finished = conn.execute(PURGE_PROGRESS).fetchone() or (0, 0, None)
    return Gauges(
        outbox_backlog=int(backlog),
        outbox_oldest_seconds=float(oldest),
        outbox_dead_letters=int(dead),
        purge_rows_expected=int(expected or 0),
        purge_rows_done=int(done or 0),
        purge_finished_timestamp=float(finished or 0),
        core=core,
    )


RECONCILE_REFUSED = """
SELECT provider, refused_reason FROM payhooks_reconcile_totals
WHERE refused_since IS NOT NULL ORDER BY provider
"""


def ping(conn: db.Connection) -> dict[str, str]:
    """The database answers; and the gateways refusing reconciliation's credentials, with
    their words (for /readyz: at most three rows)."""
    return {str(p): str(reason) for p, reason in conn.execute(RECONCILE_REFUSED)}


_DESCRIPTIONS = (
    ("payhooks_outbox_backlog", "Outbox messages waiting to be sent", "outbox_backlog"),
    (
        "payhooks_outbox_oldest_seconds",
        "Age of the oldest waiting message",
        "outbox_oldest_seconds",
    ),
    (
        "payhooks_outbox_dead_letters",
        "Messages given up on, listed by `payhooks outbox --failed`",
        "outbox_dead_letters",
    ),
    (
        "payhooks_purge_rows_expected",
        "Rows the last purge set out to delete",
        "purge_rows_expected",
    ),
    ("payhooks_purge_rows_done", "Rows the last purge has deleted so far", "purge_rows_done"),
    (
        "payhooks_purge_finished_timestamp_seconds",
        "When the last purge finished (0 while one runs)",
        "purge_finished_timestamp",
    ),
)


class DatabaseGauges(Collector):
    """Shows the latest read's own gauges; nothing while the database could not be read."""

    def __init__(self) -> None:
        self.latest: Gauges | None = None

    def core(self) -> Snapshot | None:
        """The latest read's core snapshot, for the core's collector."""
        latest = self.latest
        return None if latest is None else latest.core

    def collect(self) -> Iterator[GaugeMetricFamily]:
        latest = self.latest
        if latest is None:
            return
        for name, documentation, field in _DESCRIPTIONS:
            yield GaugeMetricFamily(name, documentation, value=float(getattr(latest, field)))


def side_connection(url: str, settings: Settings) -> OwnConnection:
    """One database connection of its own, opened on first use and again after a failure.

    Scrapes and readiness probes need no authentication, so they must never wait for, or
    take, a connection a webhook needs: however many arrive, they hold this one at most.
    """
    return OwnConnection(
        lambda: database.connect(
            url,
            settings,
            {"statement_timeout": str(PROBE_STATEMENT_TIMEOUT_MS)},
            connect_timeout=PROBE_CONNECT_TIMEOUT_SECONDS,
            application_name="payhooks-probes",
        )
    )


class Shared(Generic[T]):
    """One read at a time, its answer (or failure) shared by everyone who asked meanwhile and
    reused for ``ttl_seconds``: a flood of scrapes costs one read per period.

    Askers wait on the event loop, not in threads, and the read runs in a thread of its own
    (a limiter of one), so waiting scrapes never hold the thread pool webhooks run in.
    """

    def __init__(
        self,
        read: Callable[[], T],
        *,
        ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._ttl = ttl_seconds
        self._clock = clock
        self._lock = anyio.Lock()
        self._limiter = anyio.CapacityLimiter(1)
        self._read_at: float | None = None
        self._value: T | None = None
        self._failure: str | None = None

    async def get(self) -> T:
        async with self._lock:
            if self._read_at is None or self._clock() - self._read_at >= self._ttl:
                await self._refresh()
            if self._failure is not None:
                # A new exception each time: re-raising one object grows its traceback.
                raise DatabaseUnavailable(self._failure)
            return cast(T, self._value)

    async def _refresh(self) -> None:
        try:
            self._value = await anyio.to_thread.run_sync(self._read, limiter=self._limiter)
            self._failure = None
        except DatabaseUnavailable as exc:
            self._failure = str(exc)
        self._read_at = self._clock()


class Probes:
    """What /metrics and /readyz read from the database, through their side connection."""

    def __init__(self, url: str, settings: Settings) -> None:
        self._side = side_connection(url, settings)
        self.gauges = Shared(self._read_gauges, ttl_seconds=GAUGES_TTL_SECONDS)
        self.ready: Shared[dict[str, str]] = Shared(
            lambda: self._side.run(ping), ttl_seconds=READY_TTL_SECONDS
        )

    async def current_gauges(self) -> Gauges | None:
        try:
            return await self.gauges.get()
        except DatabaseUnavailable:
            return None

    def close(self) -> None:
        self._side.close()

    def _read_gauges(self) -> Gauges:
        try:
            return self._side.run(read_gauges)
        except DatabaseUnavailable:
            log.warning("metrics_database_unavailable")  # once per period, not per scrape
            raise
