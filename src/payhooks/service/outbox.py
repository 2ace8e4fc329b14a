"""Side effects that leave the database, enqueued in the caller's transaction.

A webhook never waits on SMTP: it writes a row here, in the same transaction as the order
it concerns, and the worker performs it after commit. ``dedupe_key`` makes enqueueing
idempotent, so one order can never queue two confirmation emails.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

from payhooks.plumbing.db import Connection


class MessageKind(StrEnum):
    EMAIL = "email"
    ALERT = "alert"


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    kind: MessageKind
    dedupe_key: str
    subject: str
    body: str
    recipient: str | None = None
    payload: dict[str, object] = field(default_factory=dict)


_ENQUEUE = """
INSERT INTO outbox (kind, dedupe_key, recipient, subject, body, payload)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (dedupe_key) DO NOTHING
"""


def enqueue(conn: Connection, message: Message) -> None:
    """Queue ``message`` unless one with the same dedupe key exists; alerts go to the
    configured alert address at send time, so their ``recipient`` stays empty."""
    conn.execute(
        _ENQUEUE,
        (
            message.kind,
            message.dedupe_key,
            message.recipient,
            message.subject,
            message.body,
            json.dumps(message.payload),
        ),
    )


def alert(dedupe_key: str, subject: str, body: str, **payload: object) -> Message:
    return Message(
        kind=MessageKind.ALERT, dedupe_key=dedupe_key, subject=subject, body=body, payload=payload
    )


# The worker's side: claim one due row under a row lock that other workers skip, perform it,
# record the result in the same transaction. A worker that dies mid-send releases the lock.


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    id: int
    kind: MessageKind
    dedupe_key: str
    recipient: str | None
    subject: str
    body: str
    attempts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with jitter for a message the SMTP server turned away for now."""

    base_seconds: float = 30.0
    cap_seconds: float = 3600.0
    max_attempts: int = 8

    def delay(self, attempts: int, jitter: float) -> float:
        """``jitter`` in [0, 1) spreads retries between half and the whole of the step."""
        step = min(self.cap_seconds, self.base_seconds * 2.0 ** max(0, attempts - 1))
        return step * (0.5 + jitter / 2)


_NEXT = """
SELECT id, kind, dedupe_key, recipient, subject, body, attempts FROM outbox
WHERE sent_at IS NULL AND failed_at IS NULL AND available_at <= now()
ORDER BY available_at, id
LIMIT 1
FOR UPDATE SKIP LOCKED
"""
_SENT = (
    "UPDATE outbox SET sent_at = now(), attempts = attempts + 1, last_error = NULL WHERE id = %s"
)
_RETRY_LATER = """
UPDATE outbox SET attempts = attempts + 1, last_error = %s,
    available_at = now() + make_interval(secs => %s)
WHERE id = %s
"""
_DEAD = """
UPDATE outbox SET attempts = attempts + 1, last_error = %s, failed_at = now() WHERE id = %s
"""
_FAILED = """
SELECT id, kind, dedupe_key, recipient, subject, attempts, last_error, failed_at FROM outbox
WHERE failed_at IS NOT NULL ORDER BY failed_at
"""
_REVIVE = """
UPDATE outbox SET failed_at = NULL, attempts = 0, available_at = now()
WHERE failed_at IS NOT NULL AND (%s::bigint IS NULL OR id = %s)
"""


def next_due(conn: Connection) -> Pending | None:
    """Lock one due row in the caller's transaction, skipping rows other workers hold."""
    row = conn.execute(_NEXT).fetchone()
    if row is None:
        return None
    id_, kind, key, recipient, subject, body, attempts = row
    return Pending(
        id=id_,
        kind=MessageKind(kind),
        dedupe_key=key,
        recipient=recipient,
        subject=subject,
        body=body,
        attempts=attempts,
    )


def mark_sent(conn: Connection, message: Pending) -> None:
    conn.execute(_SENT, (message.id,))


def retry_later(conn: Connection, message: Pending, error: str, delay_seconds: float) -> None:
    conn.execute(_RETRY_LATER, (error, delay_seconds, message.id))


def dead_letter(conn: Connection, message: Pending, error: str) -> None:
    conn.execute(_DEAD, (error, message.id))


def failed(conn: Connection) -> list[dict[str, object]]:
    cursor = conn.execute(_FAILED)
    names = [c.name for c in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def revive(conn: Connection, message_id: int | None = None) -> int:
    """Put dead-lettered rows (one, or all) back in the queue; returns how many."""
    return conn.execute(_REVIVE, (message_id, message_id)).rowcount


_COUNTS = """
SELECT count(*) FILTER (WHERE sent_at IS NULL AND failed_at IS NULL) AS pending,
       count(*) FILTER (WHERE sent_at IS NOT NULL) AS sent,
       count(*) FILTER (WHERE failed_at IS NOT NULL) AS failed
FROM outbox
"""


def counts(conn: Connection) -> dict[str, int]:
    pending, sent, dead = conn.execute(_COUNTS).fetchone() or (0, 0, 0)
    return {"pending": pending, "sent": sent, "failed": dead}
