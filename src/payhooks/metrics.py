"""Prometheus metrics, one registry per app (no module-level globals)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


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
