"""The outbox worker: performs, after commit, the side effects ingest queued.

Each message is taken under a row lock that other workers skip (``FOR UPDATE SKIP LOCKED``),
sent, and marked sent in the same transaction. The one unavoidable at-least-once window: the
SMTP server accepts the message and the worker dies before its commit; the row is then sent
again, with the same Message-ID, so the receiving side can drop the repeat.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

import psycopg_pool

from payhooks import db
from payhooks.errors import DatabaseUnavailable, PayhooksError
from payhooks.events import Provider, Received
from payhooks.ingest import Outcome, ingest_received, restored
from payhooks.service import database, outbox, retention
from payhooks.service.config import Settings
from payhooks.service.mail import Mailer, MailerUnavailable, MessageRejected, SmtpTarget, compose
from payhooks.service.shop.payments import apply_event

log = logging.getLogger("payhooks.service.worker")

DAY_SECONDS = 24 * 3600.0


@dataclass(slots=True, kw_only=True)
class WorkerOptions:
    batch: int = 100
    poll_seconds: float = 1.0
    policy: outbox.RetryPolicy = field(default_factory=outbox.RetryPolicy)
    purge_every_seconds: float | None = DAY_SECONDS
    parked_every_seconds: float | None = 60.0
    smtp_backoff_cap_seconds: float = 30.0


class Worker:
    def __init__(
        self,
        pool: psycopg_pool.ConnectionPool,
        settings: Settings,
        options: WorkerOptions | None = None,
        *,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if not settings.smtp_url:
            raise MailerUnavailable("PAYHOOKS_SMTP_URL is not set: the worker has nowhere to send")
        self.pool = pool
        self.settings = settings
        self.options = options or WorkerOptions()
        self.target = SmtpTarget.from_url(settings.smtp_url)
        self.jitter = jitter
        self.stopping = threading.Event()
        self._failures = 0
        self._last_purge: float | None = None
        self._last_parked: float | None = None
        self._references_filled = False
        self.adapters = settings.adapters()

    def run(self) -> None:
        """Until ``stop()``: drain what is due, retry parked deliveries every minute, purge
        once a day, sleep when idle. The database or SMTP being away, or any step failing,
        is waited out with backoff, never a reason to exit."""
        while not self.stopping.is_set():
            handled = self._guarded(self.drain)
            self._guarded(self.maybe_retry_parked)
            self._guarded(self.maybe_purge)
            if handled == 0:
                self.stopping.wait(self._idle_seconds())

    def _guarded(self, step: Callable[[], int]) -> int:
        """``step()``, or 0 when it failed: logged, counted toward the backoff, never raised."""
        try:
            return step()
        except DatabaseUnavailable as exc:
            self._failures += 1
            log.warning("worker_database_unavailable", extra={"error": str(exc)})
        except Exception:
            self._failures += 1
            log.exception("worker_step_failed", extra={"step": step.__name__})
        return 0

    def stop(self) -> None:
        self.stopping.set()

    def drain(self) -> int:
        """Perform up to one batch of due messages over one SMTP session; returns how many."""
        handled = 0
        with Mailer(self.target) as mailer:
            while handled < self.options.batch and not self.stopping.is_set():
                try:
                    if not self.perform_one(mailer):
                        break
                except MailerUnavailable as exc:
                    self._failures += 1
                    log.warning("smtp_unavailable", extra={"error": str(exc)})
                    break
                self._failures = 0
                handled += 1
        return handled

    def perform_one(self, mailer: Mailer) -> bool:
        """Send the next due message; False when none is due. SMTP down: leaves it queued."""
        with database.connection(self.pool) as conn, conn.transaction():
            message = outbox.next_due(conn)
            if message is None:
                return False
            self._perform(conn, mailer, message)
        return True

    def _perform(self, conn: db.Connection, mailer: Mailer, message: outbox.Pending) -> None:
        fields = {"outbox_id": message.id, "dedupe_key": message.dedupe_key}
        recipient = message.recipient or self.settings.alert_email
        if recipient is None:
            outbox.dead_letter(conn, message, "PAYHOOKS_ALERT_EMAIL is not set")
            log.error("outbox_dead_letter", extra={**fields, "error": "no alert address"})
            return
        try:
            email = self._compose(message, recipient)
        except Exception as exc:  # whatever this one row holds, it is this row's problem
            self._dead_letter(conn, message, f"cannot build the email: {_describe(exc)}", fields)
            return
        try:
            mailer.send(email)
        except MessageRejected as exc:
            self._rejected(conn, message, exc, fields)
            return
        outbox.mark_sent(conn, message)
        log.info("outbox_sent", extra=fields)

    def _compose(self, message: outbox.Pending, recipient: str) -> EmailMessage:
        return compose(
            sender=self.settings.mail_from,
            recipient=recipient,
            subject=message.subject,
            body=message.body,
            dedupe_key=message.dedupe_key,
        )

    def _dead_letter(
        self, conn: db.Connection, message: outbox.Pending, reason: str, fields: dict[str, object]
    ) -> None:
        outbox.dead_letter(conn, message, reason)
        log.error("outbox_dead_letter", extra={**fields, "error": reason})

    def _rejected(
        self,
        conn: db.Connection,
        message: outbox.Pending,
        exc: MessageRejected,
        fields: dict[str, object],
    ) -> None:
        policy = self.options.policy
        if exc.permanent or message.attempts + 1 >= policy.max_attempts:
            self._dead_letter(conn, message, str(exc), fields)
            return
        delay = policy.delay(message.attempts + 1, self.jitter())
        outbox.retry_later(conn, message, str(exc), delay)
        log.warning("outbox_retry", extra={**fields, "error": str(exc), "delay_s": round(delay, 1)})

    def _idle_seconds(self) -> float:
        if self._failures == 0:
            return self.options.poll_seconds
        step = min(self.options.smtp_backoff_cap_seconds, 2.0 ** min(self._failures, 10))
        return step * (0.5 + self.jitter() / 2)

    def maybe_purge(self) -> int:
        """Purge once a day (a purge already running elsewhere is left to finish); returns
        how many records went."""
        every = self.options.purge_every_seconds
        now = time.monotonic()
        if every is None or (self._last_purge is not None and now - self._last_purge < every):
            return 0
        self._last_purge = now  # one that fails is tried again when the next is due
        days = self.settings.retention_days
        if days < retention.MIN_RETENTION_DAYS:
            log.error("purge_refused", extra={"retention_days": days})
            return 0
        with database.connection(self.pool) as conn:
            result = retention.purge_exclusively(conn, days, stop=self.stopping.is_set)
        if result is None:
            return 0
        log.info("purge_done", extra={"deleted": result.deleted, "days": days})
        return result.deleted

    def maybe_retry_parked(self) -> int:
        """Apply every parked delivery whose checkout (or, for a refund, whose payment) now
        exists, without waiting for the gateway, which was answered 200 and will not send it
        again. Same ingest path, same keys; returns how many were applied."""
        every = self.options.parked_every_seconds
        now = time.monotonic()
        if every is None or (self._last_parked is not None and now - self._last_parked < every):
            return 0
        self._last_parked = now
        if not self._references_filled:
            self._references_filled = self._fill_references()
        return self._retry_matching()

    def _retry_matching(self) -> int:
        applied, after = 0, START
        while not self.stopping.is_set():
            with database.connection(self.pool) as conn:
                page = matching_parked(conn, after, limit=self.options.batch)
            applied += sum(self._retry(row) for row in page)
            if len(page) < self.options.batch:
                break
            after = page[-1].position
        return applied

    def _fill_references(self) -> bool:
        """Deliveries parked before schema version 5 have no ``merchant_ref``: parse each
        once (per worker process) and fill it in, so the indexed match finds them. Those
        whose event names no reference stay NULL; their payment id still matches."""
        after = START
        while not self.stopping.is_set():
            with database.connection(self.pool) as conn:
                page = parked_without_reference(conn, after, limit=self.options.batch)
                for row in page:
                    received = self._parsed(row)
                    if received is not None and received.event.merchant_ref is not None:
                        record_reference(conn, row, received.event.merchant_ref)
            if len(page) < self.options.batch:
                return True
            after = page[-1].position
        return False

    def _parsed(self, row: ParkedDelivery) -> Received | None:
        """The stored delivery as an event under the key it was stored with (a later version
        of an adapter may derive keys differently); None when it cannot be read now."""
        try:
            adapter = self.adapters.get(Provider(row.provider))
            if adapter is None:
                return None
            return restored(adapter, event_id=row.event_id, body=row.body, headers=row.headers)
        except (PayhooksError, ValueError) as exc:  # one odd row must not stop the others
            log.warning("parked_retry_failed", extra={"event_id": row.event_id, "error": str(exc)})
            return None

    def _retry(self, row: ParkedDelivery) -> bool:
        received = self._parsed(row)
        if received is None:
            return False
        try:
            with database.connection(self.pool, row.event_id) as conn:
                receipt = ingest_received(conn, received, apply_event)
        except DatabaseUnavailable:
            raise
        except PayhooksError as exc:
            log.warning("parked_retry_failed", extra={"event_id": row.event_id, "error": str(exc)})
            return False
        if receipt.outcome is not Outcome.PROCESSED:
            return False
        log.info(
            "parked_applied",
            extra={
                "provider": row.provider,
                "event_id": row.event_id,
                "order_id": receipt.order_id,
            },
        )
        return True


# Parked deliveries, a page at a time in arrival order (keyset, never OFFSET).


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkedDelivery:
    provider: str
    event_id: str
    processed_at: datetime
    body: bytes
    headers: dict[str, str]

    @property
    def position(self) -> Position:
        return (self.processed_at, self.provider, self.event_id)


Position = tuple[datetime, str, str]
START: Position = (datetime.min.replace(tzinfo=UTC), "", "")

# Only rows that can now be applied are read: a reference that now has a checkout (index
# processed_webhooks_parked_ref, then the checkouts key), or a payment now recorded (index
# processed_webhooks_payment, then the payments key). Parked rows that match nothing, however
# many, are only probed in the indexes, never loaded.
_MATCHING_PARKED = """
SELECT p.provider, p.event_id, p.processed_at, p.body, p.headers
FROM processed_webhooks p
WHERE p.outcome = 'parked'
  AND (p.processed_at, p.provider, p.event_id) > (%s, %s, %s)
  AND (EXISTS (SELECT 1 FROM checkouts c
               WHERE c.provider = p.provider AND c.gateway_order_id = p.merchant_ref)
       OR EXISTS (SELECT 1 FROM payments y
                  WHERE y.provider = p.provider AND y.payment_id = p.payment_id))
ORDER BY p.processed_at, p.provider, p.event_id
LIMIT %s
"""
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


def matching_parked(conn: db.Connection, after: Position, *, limit: int) -> list[ParkedDelivery]:
    """Up to ``limit`` parked deliveries after ``after`` that would now apply."""
    return [_parked(row) for row in conn.execute(_MATCHING_PARKED, (*after, limit))]


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
        headers=dict(headers),
    )


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
