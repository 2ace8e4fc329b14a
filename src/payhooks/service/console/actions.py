"""What an operator can do from the console: replay a parked delivery, queue a dead letter
again. Each is idempotent (a second click finds nothing left to do and says so) and recorded
with the operator's name."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from psycopg.rows import class_row

from payhooks.db import Connection
from payhooks.errors import DatabaseUnavailable, NotFound, PayhooksError, ProviderNotConfigured
from payhooks.events import Provider
from payhooks.ingest import Outcome
from payhooks.providers import Adapter
from payhooks.service import application, outbox

log = logging.getLogger("payhooks.service.console")


class Done(StrEnum):
    """What an action came to; each has its sentence in the pages."""

    APPLIED = "applied"
    STILL_PARKED = "still_parked"
    ALREADY_APPLIED = "already_applied"
    NOT_FOUND = "not_found"
    NOT_CONFIGURED = "not_configured"
    UNREADABLE = "unreadable"
    QUEUED = "queued"
    ALREADY_QUEUED = "already_queued"


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    done: Done
    order_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Parked:
    provider: str
    event_id: str
    event_type: str
    merchant_ref: str | None
    processed_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    id: int
    kind: str
    recipient: str | None
    subject: str
    attempts: int
    last_error: str | None
    failed_at: datetime


_RECORD = """
INSERT INTO console_actions (operator, action, provider, target, result)
VALUES (%s, %s, %s, %s, %s)
"""
_PARKED = """
SELECT provider, event_id, event_type, merchant_ref, processed_at FROM processed_webhooks
WHERE outcome = 'parked' ORDER BY processed_at DESC LIMIT %s
"""
_DEAD = """
SELECT id, kind, recipient, subject, attempts, last_error, failed_at FROM outbox
WHERE failed_at IS NOT NULL ORDER BY failed_at DESC LIMIT %s
"""


def parked(conn: Connection, limit: int = 200) -> list[Parked]:
    with conn.cursor(row_factory=class_row(Parked)) as cur:
        return cur.execute(_PARKED, (limit,)).fetchall()


def dead_letters(conn: Connection, limit: int = 200) -> list[DeadLetter]:
    with conn.cursor(row_factory=class_row(DeadLetter)) as cur:
        return cur.execute(_DEAD, (limit,)).fetchall()


def replay_parked(
    conn: Connection,
    adapters: Mapping[Provider, Adapter],
    *,
    provider: str,
    event_id: str,
    operator: str,
) -> Result:
    """The stored delivery through the same claim and path as the gateway's own retry."""
    result = _replayed(conn, adapters, provider, event_id)
    _record(conn, operator, "replay", provider, event_id, result)
    return result


def _replayed(
    conn: Connection, adapters: Mapping[Provider, Adapter], provider: str, event_id: str
) -> Result:
    try:
        receipt = application.replay(conn, adapters, event_id=event_id, provider=provider)
    except NotFound:
        return Result(done=Done.NOT_FOUND)
    except ProviderNotConfigured:
        return Result(done=Done.NOT_CONFIGURED)
    except DatabaseUnavailable:
        raise  # try again later; nothing about this record
    except PayhooksError as exc:
        log.warning("console_replay_failed", extra={"event_id": event_id, "error": str(exc)})
        return Result(done=Done.UNREADABLE)
    if receipt.outcome is Outcome.PROCESSED:
        return Result(done=Done.APPLIED, order_id=receipt.order_id)
    if receipt.outcome is Outcome.PARKED:
        return Result(done=Done.STILL_PARKED)
    return Result(done=Done.ALREADY_APPLIED, order_id=receipt.order_id)


def retry_dead_letter(conn: Connection, message_id: int, *, operator: str) -> Result:
    revived = outbox.revive(conn, message_id)
    result = Result(done=Done.QUEUED if revived else Done.ALREADY_QUEUED)
    _record(conn, operator, "retry", None, str(message_id), result)
    return result


def _record(
    conn: Connection, operator: str, action: str, provider: str | None, target: str, result: Result
) -> None:
    conn.execute(_RECORD, (operator, action, provider, target, result.done.value))
    log.info(
        f"console_{action}",
        extra={"operator": operator, "target": target, "result": result.done.value},
    )
