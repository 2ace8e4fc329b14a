"""The claim: one conditional insert per delivery key, on the caller's connection.

Insert first, never check-then-insert: a twin arriving in the same millisecond blocks on the
first one's uncommitted key and sees the conflict once it commits (docs/design.md, "Insert first").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from payhooks.db import Connection
from payhooks.events import Event, Received


class ClaimState(StrEnum):
    NEW = "new"
    DUPLICATE = "duplicate"
    PARKED = "parked"
    """Seen before and parked: the caller holds its row lock and may apply it again."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    state: ClaimState
    outcome: str | None = None
    order_ref: str | None = None
    mismatch: bool = False
    xmin: str | None = None
    """The transaction that inserted the record, when this claim did (``NEW``)."""


# No conflict target: a conflict on the delivery key, or on the body (the same authentic
# bytes replayed under another key, since key headers are not signed), is a duplicate.
_INSERT = """
INSERT INTO processed_webhooks
    (provider, event_id, event_type, outcome, payment_id, merchant_ref, bank_ref, payload_sha256,
     body, headers)
VALUES (%s, %s, %s, 'processed', %s, %s, %s, %s, %s, %s)
ON CONFLICT DO NOTHING
RETURNING xmin::text
"""

_EXISTING = """
SELECT outcome, payload_sha256, order_ref FROM processed_webhooks
WHERE provider = %s AND event_id = %s
"""

_SAME_BODY = """
SELECT outcome, order_ref FROM processed_webhooks
WHERE provider = %s AND payload_sha256 = %s AND first_copy
"""

_LOCK_PARKED = """
SELECT outcome FROM processed_webhooks
WHERE provider = %s AND event_id = %s AND outcome = 'parked'
FOR NO KEY UPDATE
"""

_MARK_MISMATCH = """
UPDATE processed_webhooks SET mismatches = mismatches + 1, last_mismatch_at = now()
WHERE provider = %s AND event_id = %s
"""

# Only the record this claim inserted: after a ROLLBACK a twin may have claimed the key anew.
_UNCLAIM = """
DELETE FROM processed_webhooks WHERE provider = %s AND event_id = %s AND xmin = %s::xid
"""

_RECORD = """
UPDATE processed_webhooks SET outcome = %s, order_ref = %s, processed_at = now()
WHERE provider = %s AND event_id = %s
"""


def seen(conn: Connection, event: Event) -> Claim | None:
    """A committed, settled record of this very delivery (same body), read without a claim.

    Safe without a lock: such a record never changes or disappears (until retention purges
    it, after which the claim path handles the delivery as it would anyway). None means "take
    the claim path": unseen, still in flight, parked, or the same key with another body.
    """
    row = conn.execute(_EXISTING, (event.provider.value, event.event_id)).fetchone()
    if row is None or row[0] == "parked" or row[1] != event.payload_sha256:
        return None
    return Claim(state=ClaimState.DUPLICATE, outcome=str(row[0]), order_ref=_text(row[2]))


def claim_values(received: Received) -> tuple[object, ...]:
    """The claim's row, in ``_INSERT``'s order: one builder for the sync and async claims."""
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


def claim(conn: Connection, received: Received) -> Claim:
    """Claim the delivery's key inside the caller's open transaction."""
    event = received.event
    key = (event.provider.value, event.event_id)
    inserted = conn.execute(_INSERT, claim_values(received)).fetchone()
    if inserted:
        return Claim(state=ClaimState.NEW, xmin=str(inserted[0]))
    row = conn.execute(_EXISTING, key).fetchone()
    if row is None:
        return _same_body(conn, event)
    outcome, digest, order_ref = str(row[0]), str(row[1]), row[2]
    if digest != event.payload_sha256:
        conn.execute(_MARK_MISMATCH, key)
        return Claim(
            state=ClaimState.DUPLICATE, outcome=outcome, order_ref=_text(order_ref), mismatch=True
        )
    if outcome == "parked":
        if conn.execute(_LOCK_PARKED, key).fetchone():
            return Claim(state=ClaimState.PARKED, outcome=outcome)
        # A twin applied it while we waited: answer with what it recorded.
        outcome, _, order_ref = conn.execute(_EXISTING, key).fetchone() or (outcome, None, None)
    return Claim(state=ClaimState.DUPLICATE, outcome=outcome, order_ref=_text(order_ref))


def _same_body(conn: Connection, event: Event) -> Claim:
    """These very bytes are recorded under another key (a replay with a new key header), or
    the conflicting record was purged between the two statements: handled either way."""
    row = conn.execute(_SAME_BODY, (event.provider.value, event.payload_sha256)).fetchone()
    if row is None:
        return Claim(state=ClaimState.DUPLICATE)
    return Claim(state=ClaimState.DUPLICATE, outcome=str(row[0]), order_ref=_text(row[1]))


def unclaim_values(event: Event, claim: Claim | None) -> tuple[str, str, str] | None:
    """``_UNCLAIM``'s parameters, when ``claim`` inserted a record a handler's ``COMMIT`` may
    have made final: one builder for the sync and async paths."""
    if claim is None or claim.xmin is None:
        return None
    return (event.provider.value, event.event_id, claim.xmin)


def record(conn: Connection, event: Event, outcome: str, order_ref: str | None) -> None:
    """Write what applying the claimed event did, and the trail to its order."""
    conn.execute(_RECORD, (outcome, order_ref, event.provider.value, event.event_id))


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


def parked(conn: Connection, limit: int = 10_000) -> list[Stored]:
    """Deliveries that matched nothing, oldest first."""
    return [_stored(row) for row in conn.execute(_PARKED, (limit,))]


def stored(conn: Connection, event_id: str, provider: str | None = None) -> list[Stored]:
    return [_stored(row) for row in conn.execute(_STORED, (event_id, provider, provider))]


def _stored(row: tuple[Any, ...]) -> Stored:
    provider, event_id, event_type, outcome, at, body, headers = row
    return Stored(
        provider=provider,
        event_id=event_id,
        event_type=event_type,
        outcome=outcome,
        processed_at=at,
        body=bytes(body),
        headers=_headers(headers),
    )


def _headers(stored: object) -> dict[str, str]:
    """jsonb arrives decoded from psycopg's own loaders, as text from a connection that does
    not register them (Django's)."""
    found: Any = json.loads(stored) if isinstance(stored, (str, bytes)) else stored
    return {str(name): str(value) for name, value in dict(found).items()}
