"""The worker's maintenance: parked deliveries applied once their checkout exists, payments
parked for their amount told to the merchant, and the daily purge of delivery records past
the retention window."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import psycopg_pool

from payhooks.events import Received
from payhooks.intake import idempotency
from payhooks.intake.ingest import Outcome
from payhooks.operations import retention as policy
from payhooks.plumbing import db
from payhooks.plumbing.errors import (
    DatabaseUnavailable,
    LockTimeout,
    PayhooksError,
    ProviderNotConfigured,
    SerializationConflict,
    TimedOut,
)
from payhooks.service import application, database, mismatches
from payhooks.service.config import Settings

log = logging.getLogger("payhooks.service.worker")


@dataclass(frozen=True, slots=True, kw_only=True)
class Cadence:
    batch: int
    purge_every_seconds: float | None
    parked_every_seconds: float | None


class Maintenance:
    def __init__(
        self,
        pool: psycopg_pool.ConnectionPool,
        settings: Settings,
        cadence: Cadence,
        stopping: threading.Event,
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.cadence = cadence
        self.stopping = stopping
        self.adapters = settings.adapters()
        self._last_purge: float | None = None
        self._last_parked: float | None = None
        self._references_filled = False
        self._unconfigured_warned: set[str] = set()
        """Gateways without a secret already warned about in this pass."""
        self._failed_before: dict[tuple[str, str], int] = {}
        """Parked deliveries the last complete pass failed on, and how many passes in a row."""
        self._timeouts = 0
        """Statement timeouts the parked pass under way has met (``TIMEOUTS_PER_PASS``)."""

    def maybe_purge(self) -> int:
        """Purge once a day (a purge already running elsewhere is left to finish); returns
        how many records went."""
        every = self.cadence.purge_every_seconds
        now = time.monotonic()
        if every is None or (self._last_purge is not None and now - self._last_purge < every):
            return 0
        self._last_purge = now  # one that fails is tried again when the next is due
        days = self.settings.retention_days
        if days < policy.MIN_RETENTION_DAYS:
            log.error("purge_refused", extra={"retention_days": days})
            return 0
        with database.connection(self.pool) as holder, database.connection(self.pool) as conn:
            result = application.purge(conn, days, holder=holder, stop=self.stopping.is_set)
        if result is None:
            return 0
        log.info(
            "purge_done",
            extra={
                "deleted": result.deleted,
                "log_lines": result.log_lines_deleted,
                "days": days,
                "kept": result.refused,
            },
        )
        return result.deleted

    def maybe_retry_parked(self) -> int:
        """Apply every parked delivery whose checkout (or, for a refund, whose payment) now
        exists, without waiting for the gateway, which was answered 200 and will not send it
        again. Same ingest path, same keys; returns how many were applied."""
        every = self.cadence.parked_every_seconds
        now = time.monotonic()
        if every is None or (self._last_parked is not None and now - self._last_parked < every):
            return 0
        self._last_parked = now
        self._unconfigured_warned = set()
        if not self._references_filled:
            self._references_filled = self._fill_references()
        try:
            with database.connection(self.pool) as conn:
                mismatches.alert_new(conn, self.cadence.batch)
        except DatabaseUnavailable:
            raise
        except Exception:  # the mismatches' own step: the parked pass still runs
            log.exception("worker_step_failed", extra={"step": "mismatch_alerts"})
        return self._retry_matching()

    def _retry_matching(self) -> int:
        """One pass over what the checkouts and payments made since the last pass match; the
        pass is recorded only once complete, so an interrupted one is taken up again, and
        only when no delivery it met failed for fewer than ``PARKED_RETRIES`` passes in a
        row, so the next one meets those again."""
        with database.connection(self.pool) as conn:
            started = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
            previous = last_pass(conn)
        since = None if previous is None else previous - MARGIN
        applied, after, slow = 0, START, False
        failed: dict[tuple[str, str], int] = {}
        self._timeouts = 0
        while not self.stopping.is_set():
            with database.connection(self.pool) as conn:
                page = matching_parked(conn, after, limit=self.cadence.batch, since=since)
            for row in page:
                retried = self._retry(row)
                applied += retried is _Retried.APPLIED
                slow = slow or retried is _Retried.SLOW
                if retried is _Retried.FAILED:
                    failed[row.key] = self._failed_again(row)
            if len(page) < self.cadence.batch:
                self._failed_before = failed
                if not slow and all(tries >= PARKED_RETRIES for tries in failed.values()):
                    with database.connection(self.pool) as conn:
                        record_pass(conn, started)
                break
            after = page[-1].position
        return applied

    def _failed_again(self, row: ParkedDelivery) -> int:
        """How many passes in a row have failed on ``row``, this one included; said once when
        the passes stop holding back for it."""
        tries = self._failed_before.get(row.key, 0) + 1
        if tries == PARKED_RETRIES:
            log.warning("parked_retries_exhausted", extra={"provider": row.provider,
                                                           "event_id": row.event_id,
                                                           "tries": tries})  # fmt: skip
        return tries

    def _fill_references(self) -> bool:
        """Deliveries parked before schema version 5 have no ``merchant_ref``: parse each
        once (per worker process) and fill it in, so the indexed match finds them. Those
        whose event names no reference stay NULL; their payment id still matches."""
        after = START
        while not self.stopping.is_set():
            with database.connection(self.pool) as conn:
                page = parked_without_reference(conn, after, limit=self.cadence.batch)
                for row in page:
                    received = self._parsed(row)
                    if received is not None and received.event.merchant_ref is not None:
                        record_reference(conn, row, received.event.merchant_ref)
            if len(page) < self.cadence.batch:
                return True
            after = page[-1].position
        return False

    def _parsed(self, row: ParkedDelivery) -> Received | None:
        """The stored delivery as an event under the key it was stored with (a later version
        of an adapter may derive keys differently); None when it cannot be read now."""
        try:
            return application.read_stored(self.adapters, row)
        except ProviderNotConfigured:
            self._warn_unconfigured(row.provider)
            return None
        except DatabaseUnavailable:
            raise
        except Exception as exc:  # one odd row, whatever it raises, must not stop the others:
            # it stays parked, and the parked alert tells a person
            log.warning("parked_retry_failed", extra={"event_id": row.event_id,
                                                      "error": _reason(exc)})  # fmt: skip
            return None

    def _warn_unconfigured(self, provider: str) -> None:
        """Once a pass per gateway: its parked deliveries wait for its secret to be set."""
        if provider not in self._unconfigured_warned:
            self._unconfigured_warned.add(provider)
            log.warning("parked_provider_not_configured", extra={"provider": provider})

    def _retry(self, row: ParkedDelivery) -> _Retried:
        received = self._parsed(row)
        if received is None:
            return _Retried.FAILED
        try:
            receipt = application.deliver_pooled(self.pool, received)
        except TimedOut as exc:  # slow: this one, unless the database is slow for every one
            self._timeouts += 1
            if self._timeouts >= TIMEOUTS_PER_PASS:
                raise
            log.warning("parked_retry_failed", extra={"event_id": row.event_id,
                                                      "error": _reason(exc)})  # fmt: skip
            return _Retried.SLOW
        except (LockTimeout, SerializationConflict) as exc:  # held by another: this one
            log.warning("parked_retry_failed", extra={"event_id": row.event_id,
                                                      "error": _reason(exc)})  # fmt: skip
            return _Retried.FAILED
        except DatabaseUnavailable:  # the database away: the pass ends, the next takes it up
            raise
        except Exception as exc:  # the handler's, a row the database refuses: this one only
            log.warning("parked_retry_failed", extra={"event_id": row.event_id,
                                                      "error": _reason(exc)})  # fmt: skip
            return _Retried.FAILED
        if receipt.outcome is not Outcome.PROCESSED:
            return _Retried.LEFT
        log.info(
            "parked_applied",
            extra={
                "provider": row.provider,
                "event_id": row.event_id,
                "order_id": receipt.order_id,
            },
        )
        return _Retried.APPLIED


class _Retried(StrEnum):
    """What became of one parked delivery a pass met."""

    APPLIED = "applied"
    LEFT = "left"
    """Answered, and not applied: still parked (a refund beside its payment's mismatch), or
    ignored."""
    FAILED = "failed"
    """The handler raised, the database refused it, or its row did not read: tried again."""
    SLOW = "slow"
    """A statement ran past its timeout: tried again, never counted towards
    ``PARKED_RETRIES`` (a slow database is nobody's delivery's fault)."""


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, PayhooksError) else f"{type(exc).__name__}: {exc}"[:500]


# Parked deliveries, a page at a time in arrival order (keyset, never OFFSET).


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkedDelivery:
    provider: str
    event_id: str
    processed_at: datetime
    body: bytes
    stored_headers: Any
    """The headers column as stored: read (and refused, when it is no object) row by row, so
    one row the reader cannot take never stops the page it is on."""

    @property
    def headers(self) -> dict[str, str]:
        """``UnreadableRecord`` when they are no JSON object."""
        return idempotency.stored_headers(self.stored_headers)

    @property
    def position(self) -> Position:
        return (self.processed_at, self.provider, self.event_id)

    @property
    def key(self) -> tuple[str, str]:
        return (self.provider, self.event_id)


Position = tuple[datetime, str, str]
START: Position = (datetime.min.replace(tzinfo=UTC), "", "")

# Only rows that can now be applied are read, found from the other side: the checkouts (and,
# for refunds, the payments) made since the last pass, each probed in the parked deliveries'
# indexes (processed_webhooks_parked_ref, processed_webhooks_payment). Parked rows that match
# nothing, however many, are never scanned. The window reaches back a margin before the last
# pass began, for a checkout whose transaction committed after that pass looked.
MARGIN = timedelta(minutes=5)
TIMEOUTS_PER_PASS = 3
"""Statement timeouts one parked pass meets before it ends (as for the database away): one
slow delivery is its own, three say the database is slow for all, and the worker backs off."""
PARKED_RETRIES = 10
"""Passes a parked delivery whose apply failed (the handler raised, the database refused it,
its row did not read) is tried at, one after another, holding the pass's watermark back so the
next pass meets it again; then the passes go on without it, and the parked alert tells a
person. Counted per worker process: a worker restarted before then counts from naught again.
A statement timeout is never counted (``TIMEOUTS_PER_PASS``)."""
_MATCHING_PARKED = """
WITH matched AS MATERIALIZED (
    SELECT w.provider, w.event_id FROM checkouts c
    JOIN processed_webhooks w ON w.outcome = 'parked' AND w.provider = c.provider
                             AND w.merchant_ref = c.gateway_order_id
    WHERE c.created_at >= %(since)s
    UNION
    SELECT w.provider, w.event_id FROM payments y
    JOIN processed_webhooks w ON w.outcome = 'parked' AND w.provider = y.provider
                             AND w.payment_id = y.payment_id
    WHERE y.created_at >= %(since)s
)
SELECT p.provider, p.event_id, p.processed_at, p.body, p.headers
FROM matched m JOIN processed_webhooks p USING (provider, event_id)
WHERE p.outcome = 'parked'
  AND (p.processed_at, p.provider, p.event_id) > (%(at)s, %(provider)s, %(id)s)
ORDER BY p.processed_at, p.provider, p.event_id
LIMIT %(limit)s
"""
_WATERMARK = "SELECT started_at FROM maintenance_runs WHERE task = 'parked'"
_PASSED = """
INSERT INTO maintenance_runs (task, started_at, finished_at) VALUES ('parked', %s, now())
ON CONFLICT (task) DO UPDATE SET started_at = excluded.started_at, finished_at = now()
"""
SLOW_QUERY_MS = 60_000  # the first pass of a worker reads every checkout once
_WITHOUT_REFERENCE = """
SELECT provider, event_id, processed_at, body, headers
FROM processed_webhooks
WHERE outcome = 'parked' AND merchant_ref IS NULL
  AND (processed_at, provider, event_id) > (%s, %s, %s)
ORDER BY processed_at, provider, event_id
LIMIT %s
"""
_RECORD_REFERENCE = """
UPDATE processed_webhooks SET merchant_ref = %s
WHERE provider = %s AND event_id = %s AND merchant_ref IS NULL
"""


def matching_parked(
    conn: db.Connection, after: Position, *, limit: int, since: datetime | None = None
) -> list[ParkedDelivery]:
    """Up to ``limit`` parked deliveries after ``after`` that would now apply, among those
    whose checkout or payment was made since ``since`` (all, when None)."""
    at, provider, event_id = after
    params = {
        "since": since or datetime.min.replace(tzinfo=UTC),
        "at": at,
        "provider": provider,
        "id": event_id,
        "limit": limit,
    }
    with conn.transaction():
        conn.execute(f"SET LOCAL statement_timeout = {SLOW_QUERY_MS}")
        return [_parked(row) for row in conn.execute(_MATCHING_PARKED, params)]


def last_pass(conn: db.Connection) -> datetime | None:
    """When the last complete pass over parked deliveries began, by the database's clock."""
    row = conn.execute(_WATERMARK).fetchone()
    return None if row is None else row[0]


def record_pass(conn: db.Connection, started: datetime) -> None:
    conn.execute(_PASSED, (started,))


def parked_without_reference(
    conn: db.Connection, after: Position, *, limit: int
) -> list[ParkedDelivery]:
    return [_parked(row) for row in conn.execute(_WITHOUT_REFERENCE, (*after, limit))]


def record_reference(conn: db.Connection, row: ParkedDelivery, reference: str) -> None:
    conn.execute(_RECORD_REFERENCE, (reference, row.provider, row.event_id))


def _parked(row: tuple[Any, ...]) -> ParkedDelivery:
    provider, event_id, processed_at, body, headers = row
    return ParkedDelivery(
        provider=provider,
        event_id=event_id,
        processed_at=processed_at,
        body=bytes(body),
        stored_headers=headers,
    )
