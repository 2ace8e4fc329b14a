"""What an operator does from the console: replay a parked delivery, settle a payment parked
for its amount outside payhooks. Each is idempotent (a second click finds nothing left to do
and says so) and recorded with the operator's name, shown on the timelines."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, assert_never

from payhooks.events import Event, Provider
from payhooks.gateways import Adapter
from payhooks.intake import expectations, idempotency
from payhooks.intake.ingest import Outcome, Receipt
from payhooks.intake.stored import received_again
from payhooks.plumbing.db import Connection, named_rows, shaped_rows
from payhooks.plumbing.errors import (
    Conflict,
    DatabaseUnavailable,
    HandlerCommitted,
    InvalidRequest,
    LockTimeout,
    NotFound,
    PayhooksError,
    ProviderNotConfigured,
    SerializationConflict,
    TimedOut,
    UnreadableRecord,
)
from payhooks.refunding import refunds

log = logging.getLogger("payhooks.console")

Replay = Callable[[Connection, str, str], Receipt]
"""A stored delivery ``(conn, provider, delivery key)`` through the app's own claim and
handler again, in one of the console's threads: raises ``NotFound``, ``ProviderNotConfigured``
or another payhooks error, or whatever the app's handler raised."""
Run = Callable[..., Awaitable[object]]
AsyncReplay = Callable[[Run, str, str], Awaitable[Receipt]]
"""The same on the app's event loop, for async hooks: ``run(work, *args)`` does a piece of sync
database work (reading the stored delivery) in one of the console's threads."""
PROVIDERS = frozenset(p.value for p in Provider)


class Done(StrEnum):
    """What an action came to; each has its sentence in the pages."""

    APPLIED = "applied"
    STILL_PARKED = "still_parked"
    IGNORED = "ignored"
    CONFIRMING = "confirming"
    ALREADY_APPLIED = "already_applied"
    NOT_FOUND = "not_found"
    NOT_CONFIGURED = "not_configured"
    UNREADABLE = "unreadable"
    HANDLER_FAILED = "handler_failed"
    HANDLER_COMMITTED = "handler_committed"
    SETTLED = "settled"
    NOT_A_MISMATCH = "not_a_mismatch"
    QUEUED = "queued"
    ALREADY_QUEUED = "already_queued"
    NO_SUCH_MESSAGE = "no_such_message"
    REFUND_REQUESTED = "refund_requested"
    REFUND_ALREADY_REQUESTED = "refund_already_requested"
    REFUND_NOT_POSSIBLE = "refund_not_possible"
    REFUND_TOO_LARGE = "refund_too_large"
    REFUND_TAKEN_BACK = "refund_taken_back"
    REFUND_CANCELLED = "refund_cancelled"
    REFUND_ALREADY_CANCELLED = "refund_already_cancelled"
    REFUND_NOT_CANCELLABLE = "refund_not_cancellable"
    NO_SUCH_REFUND = "no_such_refund"
    REFUND_AT_GATEWAY = "refund_at_gateway"
    REASON_REFUSED = "reason_refused"
    NOT_CONFIRMED = "not_confirmed"
    NO_REASON = "no_reason"
    BULK_REPLAYED = "bulk_replayed"
    LINKED = "linked"
    NOT_LINKABLE = "not_linkable"
    NOT_A_PAYMENT = "not_a_payment"
    NO_SUCH_CART = "no_such_cart"
    CART_TAKEN = "cart_taken"
    OTHER_AMOUNT = "other_amount"
    ALL_QUEUED = "all_queued"
    SOME_QUEUED = "some_queued"
    NOTHING_DEAD = "nothing_dead"
    READDRESSED = "readdressed"
    FETCHED = "fetched"
    FETCH_FAILED = "fetch_failed"
    NO_FETCH = "no_fetch"
    BUSY = "busy"
    NOT_REPLAYABLE = "not_replayable"


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    done: Done
    order_id: str | None = None
    why: str | None = None
    """Why it came to that, where its sentence needs it said (``NOT_REPLAYABLE`` and
    ``UNREADABLE``: what the stored delivery does not read for)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Parked:
    provider: str
    event_id: str
    event_type: str
    merchant_ref: str | None
    processed_at: datetime
    expected_paise: int | None
    paid_paise: int | None
    beside_mismatch: bool
    """Of a payment parked for its amount (a refund of it, say): parked beside it."""
    order_ref: str | None = None
    """The order the app's handler named when it parked it (``Applied.order_id``)."""
    payment_id: str | None = None
    amount_paise: int | None = None
    """The amount the delivery reports, as payhooks compares it with a checkout, read from its
    stored body (``None`` when it names none, or its gateway is served no more)."""
    currency: str | None = None
    notes: str = ""
    """Its body's text, where a checkout's id may be named (Razorpay's notes, a receipt)."""
    unread: str | None = None
    """Why its stored delivery was not read (its amount unknown); None when it was."""
    pays: bool = False
    """A payment (``EventKind.pays``): what a cart may be linked to; a refund or a dispute of a
    payment never taken pays none, and is settled."""

    @property
    def for_amount(self) -> bool:
        """Parked because the capture was not the amount expected, not for want of a checkout."""
        return self.expected_paise is not None


_RECORD = """
INSERT INTO payhooks_console_actions (operator, action, provider, target, result)
VALUES (%s, %s, %s, %s, %s)
"""
_PARKED = """
SELECT w.provider, w.event_id, w.event_type, w.merchant_ref, w.processed_at, w.order_ref,
       m.expected_paise, m.paid_paise, w.payment_id, w.body, w.headers,
       m.event_id IS NULL AND w.payment_id IS NOT NULL AND EXISTS (
           SELECT 1 FROM payhooks_amount_mismatches o
           WHERE o.provider = w.provider AND o.payment_id = w.payment_id
             AND o.resolved_at IS NULL) AS beside_mismatch
FROM processed_webhooks w
LEFT JOIN payhooks_amount_mismatches m
       ON m.provider = w.provider AND m.event_id = w.event_id AND m.resolved_at IS NULL
WHERE w.outcome = 'parked' ORDER BY w.processed_at DESC LIMIT %s
"""
_DONE = """
SELECT at, operator, action, target, result FROM payhooks_console_actions
WHERE target = ANY(%s) AND provider = %s ORDER BY at, id
"""
_PARKED_COUNT = "SELECT count(*) FROM processed_webhooks WHERE outcome = 'parked'"


def parked(
    conn: Connection, limit: int = 200, adapters: Mapping[Provider, Adapter] | None = None
) -> list[Parked]:
    """The newest parked deliveries, each with the amount its body states (read with
    ``adapters``, the gateways served)."""
    return [_parked(row, adapters or {}) for row in named_rows(conn, _PARKED, (limit,))]


def _parked(row: dict[str, Any], adapters: Mapping[Provider, Adapter]) -> Parked:
    body, headers = bytes(row.pop("body")), row.pop("headers")
    event, unread = read(adapters, row["provider"], row["event_id"], body, headers)
    return Parked(
        **row,
        amount_paise=None if event is None else event.amount_paise,
        currency=None if event is None else event.currency,
        notes=body.decode("utf-8", errors="replace"),
        unread=unread,
        pays=event is not None and event.kind.pays,
    )


def read(
    adapters: Mapping[Provider, Adapter], provider: str, event_id: str, body: bytes, headers: Any
) -> tuple[Event | None, str | None]:
    """The stored delivery's event, or None and why it does not read (as a replay would read
    it): a row the list cannot read is shown so, never the end of the list (the worker's parked
    pass goes on past the same rows), and an action that would replay it can say so first."""
    try:
        kept = idempotency.stored_headers(headers)
        return received_again(
            adapters, provider=provider, event_id=event_id, body=body, headers=kept
        ).event, None
    except ProviderNotConfigured:
        return None, "its gateway is served no more"
    except UnreadableRecord as exc:
        return None, str(exc)
    except PayhooksError as exc:  # a record that no longer reads
        return None, f"it no longer reads: {exc}"[:200]
    except Exception as exc:  # an adapter meeting stored values it never wrote
        log.exception("console_parked_unread", extra={"provider": provider, "event_id": event_id})
        return None, f"it does not read: {type(exc).__name__}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """What an operator did, and when."""

    at: datetime
    operator: str
    action: str
    target: str
    result: str


def done_to(conn: Connection, provider: str, event_ids: list[str]) -> list[Action]:
    """What operators did to these deliveries of one gateway, oldest first."""
    return shaped_rows(conn, Action, _DONE, (event_ids, provider))


@dataclass(frozen=True, slots=True, kw_only=True)
class Logged:
    """One line of the action log: what an operator did, to what, and what it came to."""

    id: int
    at: datetime
    operator: str
    action: str
    provider: str | None
    target: str
    result: str
    stored: bool = False
    """Whether the target is a delivery still stored: its page is linked only then (an action
    on a key that never was, or a delivery purged since, is not)."""


_LOG = """
SELECT a.id, a.at, a.operator, a.action, a.provider, a.target, a.result,
       EXISTS (SELECT 1 FROM processed_webhooks w
               WHERE w.provider = a.provider AND w.event_id = a.target) AS stored
FROM payhooks_console_actions a
WHERE (%(operator)s::text IS NULL OR a.operator = %(operator)s)
  AND (%(before)s::bigint IS NULL OR (a.at, a.id) < (
        SELECT at, id FROM payhooks_console_actions WHERE id = %(before)s))
ORDER BY a.at DESC, a.id DESC LIMIT %(limit)s
"""
LOG_PAGE = 100


def taken(
    conn: Connection,
    *,
    operator: str | None = None,
    before: int | None = None,
    limit: int = LOG_PAGE,
) -> list[Logged]:
    """The newest actions first, all operators' or one's, older than action ``before``."""
    params = {"operator": operator, "before": before, "limit": limit}
    return shaped_rows(conn, Logged, _LOG, params)


def parked_count(conn: Connection) -> int:
    row = conn.execute(_PARKED_COUNT).fetchone()
    return int(row[0]) if row else 0


def replay_parked(
    conn: Connection, replay: Replay, *, provider: str, event_id: str, operator: str
) -> Result:
    """The stored delivery through the same claim and path as the gateway's own retry."""
    if provider not in PROVIDERS:
        return Result(done=Done.NOT_FOUND)  # nothing recorded for a gateway no one serves
    try:
        result = outcome(replay(conn, provider, event_id))
    except Exception as exc:
        result = failure(exc, event_id)
    record(conn, operator, "replay", provider, event_id, result)
    return result


async def replay_parked_async(
    run: Run, replay: AsyncReplay, *, provider: str, event_id: str, operator: str
) -> Result:
    """``replay_parked`` for async hooks: applied on the app's loop, recorded in a thread."""
    if provider not in PROVIDERS:
        return Result(done=Done.NOT_FOUND)
    try:
        result = outcome(await replay(run, provider, event_id))
    except Exception as exc:
        result = failure(exc, event_id)
    await run(record, operator, "replay", provider, event_id, result)
    return result


def outcome(receipt: Receipt) -> Result:
    """What a replay that ran came to: each outcome its own word (mypy proves a new one is
    given its own)."""
    match receipt.outcome:
        case Outcome.PROCESSED:
            return Result(done=Done.APPLIED, order_id=receipt.order_id)
        case Outcome.PARKED:
            return Result(done=Done.STILL_PARKED)
        case Outcome.IGNORED:
            return Result(done=Done.IGNORED, order_id=receipt.order_id)
        case Outcome.CONFIRMING:
            return Result(done=Done.CONFIRMING)
        case Outcome.DUPLICATE:
            return Result(done=Done.ALREADY_APPLIED, order_id=receipt.order_id)
        case _:
            assert_never(receipt.outcome)


def failure(exc: Exception, event_id: str) -> Result:
    """What a replay that raised came to; the database away is raised on (try again later),
    nothing being known about the record. The database answering that this delivery's rows
    were held past the lock timeout, or its replay ran past the statement timeout or met
    another transaction, is this delivery's trouble: said, and it stays parked."""
    if isinstance(exc, LockTimeout | TimedOut | SerializationConflict):
        log.warning("console_replay_busy", extra={"event_id": event_id, "error": str(exc)})
        return Result(done=Done.BUSY)
    if isinstance(exc, DatabaseUnavailable):
        raise exc
    if isinstance(exc, NotFound):
        return Result(done=Done.NOT_FOUND)
    if isinstance(exc, ProviderNotConfigured):
        return Result(done=Done.NOT_CONFIGURED)
    if isinstance(exc, HandlerCommitted):
        log.warning("console_replay_handler_committed", extra={"event_id": event_id})
        return Result(done=Done.HANDLER_COMMITTED)
    if isinstance(exc, PayhooksError):
        log.warning("console_replay_failed", extra={"event_id": event_id, "error": str(exc)})
        return Result(done=Done.UNREADABLE, why=str(exc))
    log.exception("console_replay_handler_failed", extra={"event_id": event_id})
    return Result(done=Done.HANDLER_FAILED)


def settle(conn: Connection, *, provider: str, event_id: str, note: str, operator: str) -> Result:
    """A parked delivery settled outside payhooks (a payment parked for its amount refunded
    in the gateway's dashboard, the difference collected; one that will never apply, a refund
    or dispute of a payment never taken): ``payhooks resolve`` from the console."""
    if provider not in PROVIDERS:
        return Result(done=Done.NOT_A_MISMATCH)  # nothing recorded for a gateway no one serves
    try:
        with conn.transaction():
            expectations.resolve(conn, Provider(provider), event_id, note)
        result = Result(done=Done.SETTLED)
    except expectations.NotAMismatch:
        result = Result(done=Done.NOT_A_MISMATCH)
    record(conn, operator, "settle", provider, event_id, result)
    return result


def cancel_refund(
    conn: Connection, provider: str, idempotency_key: str, *, reason: str, operator: str
) -> Result:
    """A refund intent stuck ``requested`` cancelled (``payhooks.refunding.refunds.cancel``), with
    the operator's name and reason: never sent afterwards, its amount refundable again. Refused
    while a sender is calling the gateway with it, or once the gateway has it."""
    if provider not in PROVIDERS:
        return Result(done=Done.NO_SUCH_REFUND)  # nothing recorded for a gateway no one serves
    try:
        done, now = refunds.cancelling(conn, provider, idempotency_key, reason=reason,
                                       cancelled_by=operator,
                                       not_at_gateway=True)  # fmt: skip  # the box ticked
    except NotFound:
        result, target = Result(done=Done.NO_SUCH_REFUND), idempotency_key
    except InvalidRequest:  # the reason's text
        result, target = Result(done=Done.REASON_REFUSED), idempotency_key
    except refunds.NotCancellable as exc:  # a sender calling with it now, or the gateway's
        in_flight = exc.refund.state is refunds.RefundState.REQUESTED
        said = Done.REFUND_NOT_CANCELLABLE if in_flight else Done.REFUND_AT_GATEWAY
        result, target = Result(done=said), exc.refund.payment_id
    except Conflict:
        result, target = Result(done=Done.REFUND_NOT_CANCELLABLE), idempotency_key
    else:
        said = Done.REFUND_CANCELLED if now else Done.REFUND_ALREADY_CANCELLED
        result, target = Result(done=said), done.payment_id
    record(conn, operator, "cancel_refund", provider, target, result)
    return result


def record(
    conn: Connection,
    operator: str,
    action: str,
    provider: str | None,
    target: str,
    result: Result,
    said: str | None = None,
) -> None:
    """One line of the action log; ``said`` in place of the result's name (a bulk action's
    counts)."""
    shown = said or result.done.value
    conn.execute(_RECORD, (operator, action, provider, target, shown))
    log.info(f"console_{action}", extra={"operator": operator, "target": target, "result": shown})
