"""Side effects that leave the database, enqueued in the caller's transaction.

A webhook never waits on SMTP: it writes a row here, in the same transaction as the order
it concerns, and the worker performs it after commit. ``dedupe_key`` makes enqueueing
idempotent, so one order can never queue two confirmation emails.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

from payhooks.db import Connection


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
