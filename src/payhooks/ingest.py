"""One delivery, start to finish: verify, parse, claim, apply, record, commit once.

This is the library's entry point. ``handler`` is the merchant's code; it runs inside the
same transaction as the claim, so its writes and the claim commit together or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

import psycopg
from psycopg.pq import TransactionStatus

from payhooks import idempotency
from payhooks.db import Connection, translated
from payhooks.errors import MalformedPayload, PayloadTooLarge, SignatureMismatch
from payhooks.events import Event
from payhooks.idempotency import ClaimState
from payhooks.providers import Adapter

MAX_BODY_BYTES = 1024 * 1024  # the largest body any built-in adapter accepts


class Outcome(StrEnum):
    PROCESSED = "processed"
    DUPLICATE = "duplicate"
    IGNORED = "ignored"
    PARKED = "parked"


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    """What a handler did with an event: processed, ignored or parked, and the order involved."""

    outcome: Outcome
    order_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """The answer to one delivery (the JSON body of the webhook response)."""

    outcome: Outcome
    event: Event
    order_id: str | None = None
    mismatch: bool = False


Handler = Callable[[Connection, Event], Applied]


def verified_event(adapter: Adapter, body: bytes, headers: Mapping[str, str]) -> Event:
    """Signature first, over the exact bytes; only then parse.

    A body over the adapter's bound is refused before either: some gateways (PayU) must be
    parsed to be verified, and an unauthenticated sender chooses the size.
    """
    if len(body) > adapter.max_body_bytes:
        raise PayloadTooLarge(
            adapter.provider, f"body of {len(body)} bytes exceeds {adapter.max_body_bytes}"
        )
    adapter.verify(body, headers)
    return storable(adapter.parse(body, headers))


def header_map(pairs: Iterable[tuple[str, str]], adapter: Adapter) -> dict[str, str]:
    """A request's headers as the adapters read them: lower-case names, one value each.

    HTTP lets a header repeat, and frameworks resolve repeats differently (first, last,
    joined). A header the adapter reads (signature, timestamp, delivery key) sent twice with
    different values is ambiguous about what the gateway meant, so it is refused like a bad
    signature; identical copies pass. Of other repeated headers the first is kept.
    """
    found: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        if key not in found:
            found[key] = value
        elif found[key] != value and key in adapter.signed_headers:
            raise SignatureMismatch(
                adapter.provider, f"header {key} is sent more than once with different values"
            )
    return found


MAX_TEXT_CHARS = 255
MAX_PAISE = 10**15  # ten trillion rupees: far above any payment, far below bigint
_TEXTS = ("event_id", "event_type", "payment_id", "merchant_ref", "refund_id", "currency")
_AMOUNTS = ("amount_paise", "payment_amount_paise", "refund_amount_paise")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def storable(event: Event) -> Event:
    """Refuse, as malformed, values PostgreSQL cannot store or index (a NUL in text, an id
    longer than a key should be, an amount beyond ``bigint``) and ids holding a control
    character, which would break the log line, email subject or terminal they are shown in.
    Authentic bytes can hold any of them; no gateway sends them."""
    for name in _TEXTS:
        value = getattr(event, name)
        if value is not None and (_CONTROL.search(value) or len(value) > MAX_TEXT_CHARS):
            raise MalformedPayload(
                event.provider, f"{name} has a control character or over {MAX_TEXT_CHARS} chars"
            )
    for name in _AMOUNTS:
        value = getattr(event, name)
        if value is not None and not 0 <= value <= MAX_PAISE:
            raise MalformedPayload(event.provider, f"{name} is out of range: {value}")
    return event


def ingest(
    conn: Connection,
    adapter: Adapter,
    body: bytes,
    headers: Mapping[str, str],
    handler: Handler,
) -> Receipt:
    """Verify, then claim and apply in one transaction (DESIGN.md section 1)."""
    event = verified_event(adapter, body, headers)
    return ingest_event(conn, event, body, signed_headers(adapter, headers), handler)


def signed_headers(adapter: Adapter, headers: Mapping[str, str]) -> dict[str, str]:
    """The headers worth keeping with the body: those the gateway signs or keys on."""
    return {name: headers[name] for name in adapter.signed_headers if name in headers}


def ingest_event(
    conn: Connection,
    event: Event,
    body: bytes,
    signed: Mapping[str, str],
    handler: Handler,
    *,
    pipeline: bool = False,
) -> Receipt:
    """Claim and apply an event already verified (a live delivery, or a stored one replayed).

    The connection must have no transaction open: inside one, the claim would only be a
    savepoint, and a ``processed`` answer could be rolled back by the caller afterwards.

    A delivery whose record is already committed is answered by one read, with no
    transaction: the same answer the claim would give, at a fraction of the cost, which is
    what a gateway's retry storm mostly consists of. Anything else (unseen, parked, another
    body, a twin still in flight) takes the claim path.

    With ``pipeline``, the transaction runs in libpq pipeline mode: statements whose results
    are not read (the order's writes, the record, COMMIT) go to the server together. The
    handler must then use only what pipeline mode allows (no COPY, one statement per call).
    """
    if not conn.autocommit or conn.info.transaction_status is not TransactionStatus.IDLE:
        # Otherwise the claim's transaction would only be a savepoint in the caller's, and a
        # `processed` answer could be lost when the caller never commits.
        raise ValueError("ingest needs an autocommit connection with no open transaction")
    with translated(event.event_id):
        seen = idempotency.seen(conn, event)
        if seen is not None:
            return Receipt(outcome=Outcome.DUPLICATE, event=event, order_id=seen.order_ref)
        if not pipeline:
            return _claim_and_apply(conn, event, body, signed, handler)
        with conn.pipeline():
            return _claim_and_apply(conn, event, body, signed, handler)


def _claim_and_apply(
    conn: Connection, event: Event, body: bytes, signed: Mapping[str, str], handler: Handler
) -> Receipt:
    with conn.transaction() as tx:
        claim = idempotency.claim(conn, event, body, signed)
        if claim.state is ClaimState.DUPLICATE:
            # Nothing was written but the mismatch mark, which is meant to stay.
            return Receipt(
                outcome=Outcome.DUPLICATE,
                event=event,
                order_id=claim.order_ref,
                mismatch=claim.mismatch,
            )
        applied = handler(conn, event)
        if claim.state is ClaimState.PARKED and applied.outcome is Outcome.PARKED:
            raise psycopg.Rollback(tx)  # still nothing to apply it to: leave the row as it was
        idempotency.record(conn, event, applied.outcome, applied.order_id)
    return Receipt(outcome=applied.outcome, event=event, order_id=applied.order_id)


__all__ = [
    "MAX_BODY_BYTES",
    "Applied",
    "Handler",
    "Outcome",
    "Receipt",
    "header_map",
    "ingest",
    "ingest_event",
    "signed_headers",
    "storable",
    "verified_event",
]
