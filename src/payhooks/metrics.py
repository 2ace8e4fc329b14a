"""Prometheus metrics, one registry per app (no module-level globals).

Counters and the latency histogram are kept by the process that answers webhooks; the
outbox backlog, dead letters and purge progress are read from the database at scrape time,
so they are right whichever worker process did the work.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import psycopg_pool
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from payhooks import db
from payhooks.errors import DatabaseUnavailable

log = logging.getLogger("payhooks.metrics")


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
        self.latency = Histogram(
            "payhooks_ingest_seconds",
            "Time to answer a webhook delivery",
            ["provider"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=self.registry,
        )
        self._answered = 0
        self._duplicates = 0
        ratio = Gauge(
            "payhooks_duplicate_ratio",
            "Share of answered deliveries that were duplicates, since start",
            registry=self.registry,
        )
        ratio.set_function(lambda: self._duplicates / self._answered if self._answered else 0.0)

    def answered(self, provider: str, outcome: str, seconds: float) -> None:
        self.deliveries.labels(provider, outcome).inc()
        self.latency.labels(provider).observe(seconds)
        self._answered += 1
        self._duplicates += outcome == "duplicate"

    def watch(self, pool: psycopg_pool.ConnectionPool) -> None:
        self.registry.register(DatabaseGauges(pool))


_OUTBOX = """
SELECT count(*) FILTER (WHERE sent_at IS NULL AND failed_at IS NULL),
       coalesce(extract(epoch FROM now() - min(created_at)
                FILTER (WHERE sent_at IS NULL AND failed_at IS NULL)), 0),
       count(*) FILTER (WHERE failed_at IS NOT NULL)
FROM outbox
"""
_PURGE = """
SELECT rows_expected, rows_done, extract(epoch FROM finished_at)
FROM maintenance_runs WHERE task = 'purge'
"""


class DatabaseGauges(Collector):
    """Outbox backlog and age, dead letters, purge progress: read when scraped."""

    def __init__(self, pool: psycopg_pool.ConnectionPool) -> None:
        self.pool = pool

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            with db.connection(self.pool) as conn:
                backlog, oldest, dead = conn.execute(_OUTBOX).fetchone() or (0, 0, 0)
                purge = conn.execute(_PURGE).fetchone() or (0, 0, None)
        except DatabaseUnavailable:
            log.warning("metrics_database_unavailable")
            return
        yield _gauge("payhooks_outbox_backlog", "Outbox messages waiting to be sent", backlog)
        yield _gauge("payhooks_outbox_oldest_seconds", "Age of the oldest waiting message", oldest)
        yield _gauge(
            "payhooks_outbox_dead_letters",
            "Messages given up on, listed by `payhooks outbox --failed`",
            dead,
        )
        yield _gauge(
            "payhooks_purge_rows_expected", "Rows the last purge set out to delete", purge[0]
        )
        yield _gauge("payhooks_purge_rows_done", "Rows the last purge has deleted so far", purge[1])
        yield _gauge(
            "payhooks_purge_finished_timestamp_seconds",
            "When the last purge finished (0 while one runs)",
            purge[2] or 0,
        )


def _gauge(name: str, documentation: str, value: object) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=float(value))  # type: ignore[arg-type]
