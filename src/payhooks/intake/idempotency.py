"""The claim: one conditional insert per delivery key, on the caller's connection.

Insert first, never check-then-insert: a twin arriving in the same millisecond blocks on the
first one's uncommitted key and sees the conflict once it commits (docs/design.md, "Insert first").

Its statements and steps are written once, with no driver: each step (``seeing``,
``claiming``, ``recording``, ``unclaiming``) yields a ``payhooks.plumbing.db.Statement`` and
receives its row, so the sync path (``payhooks.intake.ingest``) and the async one
(``payhooks.aio.claims``) run the very same statements in the same order, through
``payhooks.plumbing.db.run`` and ``run_async``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from payhooks.events import Event, Received
from payhooks.plumbing.db import (
    AsyncConnection,
    Connection,
    Row,
    Statement,
    Steps,
    query,
    query_async,
    run,
)
from payhooks.plumbing.errors import UnreadableRecord

log = logging.getLogger("payhooks")


class ClaimState(StrEnum):
    """What the claim found for a delivery key."""

    NEW = "new"
    DUPLICATE = "duplicate"
    PARKED = "parked"
    """Seen before and parked: the caller holds its row lock and may apply it again."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The claim's result: its state and, for a key seen before, what that delivery was
    answered, its order and whether its body differed."""

    state: ClaimState
    outcome: str | None = None
    order_ref: str | None = None
    mismatch: bool = False
    xmin: str | None = None
    """The transaction that inserted the record, when this claim did (``NEW``)."""


# The claim's statements, named once: the sync and async drivers run them through the steps
# below, the service's first capture reads ``EXISTING`` and writes ``claim_values`` too, and
# the benchmarks' pgbench scripts are built from them.

# No conflict target: a conflict on the delivery key, or on the body (the same authentic
# bytes replayed under another key, since key headers are not signed), is a duplicate. A
# delivery payhooks composed (a ``reconcile:`` key) conflicts on its key alone.
INSERT = """
INSERT INTO processed_webhooks
    (provider, event_id, event_type, outcome, payment_id, merchant_ref, bank_ref, payload_sha256,
     body, headers)
VALUES (%s, %s, %s, 'processed', %s, %s, %s, %s, %s, %s)
ON CONFLICT DO NOTHING
RETURNING xmin::text
"""

EXISTING = """
SELECT outcome, payload_sha256, order_ref FROM processed_webhooks
WHERE provider = %s AND event_id = %s
"""

# The one-body rule's own predicate (migration 0018): a delivery payhooks composed (its
# reserved ``reconcile:`` key) is never the record another delivery's bytes are a copy of.
SAME_BODY = """
SELECT outcome, order_ref FROM processed_webhooks
WHERE provider = %s AND payload_sha256 = %s AND first_copy AND event_id NOT LIKE 'reconcile:%%'
"""

LOCK_PARKED = """
SELECT outcome FROM processed_webhooks
WHERE provider = %s AND event_id = %s AND outcome = 'parked'
FOR NO KEY UPDATE
"""

MARK_MISMATCH = """
UPDATE processed_webhooks SET mismatches = mismatches + 1, last_mismatch_at = now()
WHERE provider = %s AND event_id = %s
"""

# Only the record this claim inserted: after a ROLLBACK a twin may have claimed the key anew.
UNCLAIM = """
DELETE FROM processed_webhooks WHERE provider = %s AND event_id = %s AND xmin = %s::xid
"""

# The record and the payment's row (``payhooks.intake.expectations``) this claim inserted
# beside it, in one statement: on an autocommit connection two would be two transactions, and
# a payment's row outliving its record would answer the gateway's retry as applied. A
# dispute's row this claim's transaction moved is marked ``UNCLAIMED`` (it cannot be moved
# back): the retry of the same report moves it again (``payhooks.intake.disputes.RECORD``).
UNCLAIMED = "unclaimed:"
UNCLAIM_WITH_PAYMENT = f"""
WITH payment AS (
    DELETE FROM payhooks_payments
    WHERE provider = %(provider)s AND event_id = %(key)s AND xmin = %(xmin)s::xid),
dispute AS (
    UPDATE payhooks_disputes SET event_id = '{UNCLAIMED}' || event_id
    WHERE provider = %(provider)s AND event_id = %(key)s AND xmin = %(xmin)s::xid)
DELETE FROM processed_webhooks
WHERE provider = %(provider)s AND event_id = %(key)s AND xmin = %(xmin)s::xid
"""

RECORD = """
UPDATE processed_webhooks SET outcome = %s, order_ref = %s, processed_at = now()
WHERE provider = %s AND event_id = %s
"""

# A payment applied: its order written on the payment's record too (the row this delivery
# claimed, ``payhooks.intake.expectations.CLAIM_PAYMENT``), in the same statement, so the
# record names it past the purge of this one (core migration 0036). By the record's key; a row
# another delivery claimed is left as it is.
RECORD_WITH_PAYMENT = """
WITH payment AS (
    UPDATE payhooks_payments SET order_ref = %(order_ref)s
    WHERE provider = %(provider)s AND payment_id = %(payment_id)s AND kind = %(kind)s
      AND event_id = %(key)s)
UPDATE processed_webhooks SET outcome = %(outcome)s, order_ref = %(order_ref)s,
    processed_at = now()
WHERE provider = %(provider)s AND event_id = %(key)s
"""


def key(event: Event) -> tuple[str, str]:
    """The delivery key's columns: the gateway's name and the event id."""
    return (event.provider.value, event.event_id)


def existing(event: Event) -> Statement:
    """The record of this delivery key: its outcome, body hash and order."""
    return Statement(sql=EXISTING, params=key(event))


def settled_copy(event: Event, row: Row) -> Claim | None:
    """What ``EXISTING``'s row says without a claim: a settled record of this very body is a
    duplicate with its order; None is anything else (unseen, parked, another body)."""
    if row is None or row[0] == "parked" or row[1] != event.payload_sha256:
        return None
    return Claim(state=ClaimState.DUPLICATE, outcome=str(row[0]), order_ref=_text(row[2]))


def seeing(event: Event) -> Steps[Claim | None]:
    """A committed, settled record of this very delivery (same body), read without a claim.

    Safe without a lock: such a record never changes or disappears (until retention purges
    it, after which the claim path handles the delivery as it would anyway). None means "take
    the claim path": unseen, still in flight, parked, or the same key with another body.
    """
    return settled_copy(event, (yield existing(event)))


def claim_values(received: Received) -> tuple[object, ...]:
    """The claim's row, in ``INSERT``'s order (and ``shop_first_capture``'s first nine)."""
    event = received.event
    return (
        event.provider.value,
        event.event_id,
        event.event_type,
        event.payment_id,
        event.merchant_ref,
        event.bank_ref,
        event.payload_sha256,
        received.body,
        json.dumps(dict(received.headers)),
    )


def claiming(received: Received, *, mark: bool = True) -> Steps[Claim]:
    """Claim the delivery's key inside the caller's open transaction: insert first; on a
    conflict, find out what it conflicted with. A copy in another body is counted on the
    record (``marking``) unless ``mark`` is False: the caller then marks it once it knows the
    copy is one of this key's (a PayU post naming another ``mihpayid`` is recorded under a key
    of its own, and is no copy of this one)."""
    event = received.event
    inserted = yield Statement(sql=INSERT, params=claim_values(received))
    if inserted:
        return Claim(state=ClaimState.NEW, xmin=str(inserted[0]))
    row = yield existing(event)
    if row is None:
        return (yield from _same_body(event))
    outcome, digest, order_ref = str(row[0]), str(row[1]), row[2]
    if digest != event.payload_sha256:
        if mark:
            yield from marking(event)
        return Claim(
            state=ClaimState.DUPLICATE, outcome=outcome, order_ref=_text(order_ref), mismatch=True
        )
    if outcome == "parked":
        if (yield Statement(sql=LOCK_PARKED, params=key(event))):
            return Claim(state=ClaimState.PARKED, outcome=outcome)
        # A twin applied it while we waited: answer with what it recorded.
        outcome, _, order_ref = (yield existing(event)) or (outcome, None, None)
    return Claim(state=ClaimState.DUPLICATE, outcome=outcome, order_ref=_text(order_ref))


def marking(event: Event) -> Steps[None]:
    """A copy of ``event``'s key in another body, counted on its record (``mismatches``)."""
    yield Statement(sql=MARK_MISMATCH, params=key(event), reads=False)


def _same_body(event: Event) -> Steps[Claim]:
    """These very bytes are recorded under another key (a replay with a new key header), or
    the conflicting record was purged between the two statements: handled either way."""
    same = (event.provider.value, event.payload_sha256)
    row = yield Statement(sql=SAME_BODY, params=same)
    if row is None:
        return Claim(state=ClaimState.DUPLICATE)
    return Claim(state=ClaimState.DUPLICATE, outcome=str(row[0]), order_ref=_text(row[1]))


def recording(event: Event, outcome: str, order_ref: str | None) -> Steps[None]:
    """Write what applying the claimed event did, and the trail to its order: on the payment's
    record too when it paid for one."""
    if outcome == "processed" and order_ref is not None and event.kind.pays and event.payment_id:
        provider, event_id = key(event)
        params = {
            "outcome": outcome,
            "order_ref": order_ref,
            "provider": provider,
            "payment_id": event.payment_id,
            "kind": event.kind.value,
            "key": event_id,
        }
        yield Statement(sql=RECORD_WITH_PAYMENT, params=params, reads=False)
        return
    yield Statement(sql=RECORD, params=(outcome, order_ref, *key(event)), reads=False)


def letting_go(event: Event, claim: Claim) -> Steps[None]:
    """The record ``claim`` inserted deleted again, in the claim's own transaction: the key
    left as the claim found it (never recorded, or purged)."""
    assert claim.xmin is not None
    yield Statement(sql=UNCLAIM, params=(*key(event), claim.xmin), reads=False)


def unclaiming(event: Event, claim: Claim | None, *, idle: bool, autocommit: bool) -> Steps[None]:
    """The record ``claim`` inserted, which a handler's ``COMMIT`` made final as ``processed``
    before anything was applied, deleted in a transaction of its own (with the payment's row
    inserted beside it), so the gateway's retry applies the delivery. What the handler wrote
    after its ``COMMIT`` (the connection not ``idle``) was never committed and is rolled back
    first. Nothing for a claim that inserted nothing."""
    if claim is None or claim.xmin is None:
        return
    if not idle:
        yield Statement(sql="ROLLBACK", reads=False)
    provider, event_id = key(event)
    params = {"provider": provider, "key": event_id, "xmin": claim.xmin}
    yield Statement(sql=UNCLAIM_WITH_PAYMENT, params=params, reads=False)
    if not autocommit:
        yield Statement(sql="COMMIT", reads=False)


def seen(conn: Connection, event: Event) -> Claim | None:
    """``seeing`` on a connection."""
    return run(conn, seeing(event))


def claim(conn: Connection, received: Received) -> Claim:
    """``claiming`` on a connection, inside its open transaction."""
    return run(conn, claiming(received))


def record(conn: Connection, event: Event, outcome: str, order_ref: str | None) -> None:
    """``recording`` on a connection."""
    run(conn, recording(event, outcome, order_ref))


def _text(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stored:
    """A delivery as it was received: the verified bytes and the headers kept with them."""

    provider: str
    event_id: str
    event_type: str
    outcome: str
    processed_at: datetime
    body: bytes
    headers: dict[str, str]


_PARKED = """
SELECT provider, event_id, event_type, outcome, processed_at, body, headers
FROM processed_webhooks WHERE outcome = 'parked' ORDER BY processed_at, event_id
LIMIT %s
"""
_STORED = """
SELECT provider, event_id, event_type, outcome, processed_at, body, headers
FROM processed_webhooks WHERE event_id = %s AND (%s::text IS NULL OR provider = %s)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Unreadable:
    """A parked delivery whose kept record this release cannot read again (its headers no JSON
    object: never written by payhooks), and why: listed apart, beside the others."""

    provider: str
    event_id: str
    event_type: str
    outcome: str
    processed_at: datetime
    reason: str


class Listed(list[Stored]):
    """The parked deliveries that read, the list ``parked`` has always returned, and beside it
    those that do not (``unreadable``): one row this release cannot read never ends the list of
    the others, and is never left out unsaid (as ``confirmations.leased``'s ``Leased``)."""

    __slots__ = ("unreadable",)
    unreadable: list[Unreadable]

    def __init__(self, readable: Iterable[Stored] = (), unreadable: Iterable[Unreadable] = ()):
        super().__init__(readable)
        self.unreadable = list(unreadable)


def parked(conn: Connection, limit: int = 10_000) -> Listed:
    """The deliveries recorded ``parked`` (matched nothing yet, parked for their amount, or by
    a handler), oldest first, at most ``limit``: each a ``Stored`` with its gateway
    (``provider``), delivery key (``event_id``), ``event_type``, ``outcome`` ("parked"),
    ``processed_at``, and the verified ``body`` bytes and kept ``headers`` a replay parses
    again (``payhooks.intake.ingest.replay``). ``conn`` is any psycopg connection on the database
    holding ``processed_webhooks``; it only reads. A list (``Listed``): a delivery whose kept
    headers do not read is not in it but in its ``unreadable`` (each an ``Unreadable``: the
    same names, and the ``reason``), logged ``parked_unreadable``; the rest are listed all the
    same. An empty list with nothing ``unreadable``: nothing is parked."""
    return _listed(query(conn, _PARKED, (limit,)).fetchall())


async def parked_async(conn: AsyncConnection, limit: int = 10_000) -> Listed:
    """``parked`` on an async connection (a FastAPI or Starlette app's pool)."""
    cursor = await query_async(conn, _PARKED, (limit,))
    return _listed(await cursor.fetchall())


def _listed(rows: Iterable[tuple[Any, ...]]) -> Listed:
    """Each row read on its own: one that does not read is set apart, with why."""
    listed = Listed()
    for row in rows:
        try:
            listed.append(_stored(row))
        except UnreadableRecord as exc:
            provider, event_id, event_type, outcome, at = row[:5]
            listed.unreadable.append(Unreadable(provider=provider, event_id=event_id,
                                                event_type=event_type, outcome=outcome,
                                                processed_at=at, reason=str(exc)))  # fmt: skip
            log.warning("parked_unreadable", extra={"provider": provider, "event_id": event_id,
                                                    "reason": str(exc)})  # fmt: skip
    return listed


def stored(conn: Connection, event_id: str, provider: str | None = None) -> list[Stored]:
    """The stored deliveries of ``event_id`` (of one gateway's, when named), with their
    bodies and headers, for a replay."""
    return [_stored(row) for row in query(conn, _STORED, (event_id, provider, provider))]


def _stored(row: tuple[Any, ...]) -> Stored:
    provider, event_id, event_type, outcome, at, body, headers = row
    return Stored(
        provider=provider,
        event_id=event_id,
        event_type=event_type,
        outcome=outcome,
        processed_at=at,
        body=bytes(body),
        headers=stored_headers(headers),
    )


def stored_headers(stored: object) -> dict[str, str]:
    """A delivery's kept headers: jsonb arrives decoded from psycopg's own loaders, as text
    from a connection that does not register them (Django's). Anything but a JSON object
    (``null``, an array, a number: never written by payhooks) is ``UnreadableRecord``, never
    read as no headers, nor as pairs of characters."""
    try:
        found: Any = json.loads(stored) if isinstance(stored, (str, bytes)) else stored
    except ValueError as exc:
        raise UnreadableRecord("its stored headers are not JSON") from exc
    if not isinstance(found, dict):
        raise UnreadableRecord("its stored headers are not a JSON object")
    return {str(name): str(value) for name, value in found.items()}
