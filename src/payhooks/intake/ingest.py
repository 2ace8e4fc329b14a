"""One delivery, start to finish: verify, parse, claim, apply, record, commit once.

This is the library's entry point. ``handler`` is the merchant's code; it runs inside the
same transaction as the claim, so its writes and the claim commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import psycopg
from psycopg.errors import InvalidSavepointSpecification
from psycopg.pq import TransactionStatus

from payhooks.events import MAX_PAISE as MAX_PAISE  # kept importable from here
from payhooks.events import MAX_REFERENCE_CHARS as MAX_REFERENCE_CHARS
from payhooks.events import MAX_TEXT_CHARS as MAX_TEXT_CHARS
from payhooks.events import Event, EventKind, Received, is_text, storable
from payhooks.gateways import Adapter
from payhooks.gateways import _reports as reports
from payhooks.gateways._adapter import UNKEPT_HEADERS
from payhooks.intake import confirmations, disputes, expectations, idempotency, relaying
from payhooks.intake.idempotency import ClaimState
from payhooks.plumbing.db import (
    AsyncConnection,
    Connection,
    Done,
    Statement,
    Steps,
    advance,
    execute,
    query,
    run,
    translated,
)
from payhooks.plumbing.errors import (
    ConfirmationsFull,
    HandlerCommitted,
    MalformedPayload,
    NotCommitted,
    PayloadTooLarge,
    SignatureMismatch,
)
from payhooks.refunding import refunds
from payhooks.settlements import records as settled

MAX_BODY_BYTES = 1024 * 1024  # the largest body any built-in adapter accepts


class Outcome(StrEnum):
    """What a delivery came to; every outcome is answered 200."""

    PROCESSED = "processed"
    DUPLICATE = "duplicate"
    IGNORED = "ignored"
    PARKED = "parked"
    CONFIRMING = "confirming"
    """Recorded; what it claims takes effect as the gateway's API confirms it
    (``payhooks.intake.confirmations``)."""


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


def receive(adapter: Adapter, body: bytes, headers: Mapping[str, str]) -> Received:
    """Verify the exact bytes first, then parse: the one way a delivery becomes ``Received``.

    A body over the adapter's bound is refused before either: some gateways (PayU) must be
    parsed to be verified, and an unauthenticated sender chooses the size.
    """
    if len(body) > adapter.max_body_bytes:
        raise PayloadTooLarge(
            adapter.provider, f"body of {len(body)} bytes exceeds {adapter.max_body_bytes}"
        )
    adapter.verify(body, headers)
    event = storable(adapter.parse(body, headers))
    kept = {name: headers[name] for name in adapter.headers_read
            if name in headers and name not in UNKEPT_HEADERS}  # fmt: skip
    return Received(event=event, body=body, headers=_storable_headers(adapter, kept))


def _storable_headers(adapter: Adapter, kept: dict[str, str]) -> dict[str, str]:
    """The headers kept with the body are stored as JSON (``jsonb``), which holds neither a
    NUL nor a lone surrogate. HTTP servers refuse the first and cannot decode the second, but
    a framework may pass on what it likes: such a header is refused, not a failed insert."""
    for name, value in kept.items():
        if "\x00" in value or not is_text(value):
            raise MalformedPayload(adapter.provider, f"header {name} is not valid text")
    return kept


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
        elif found[key] != value and key in adapter.headers_read:
            raise SignatureMismatch(
                adapter.provider, f"header {key} is sent more than once with different values"
            )
    return found


def ingest(
    conn: Connection,
    adapter: Adapter,
    body: bytes,
    headers: Mapping[str, str],
    handler: Handler,
) -> Receipt:
    """Verify, then claim and apply in a transaction of its own (docs/design.md).

    ``conn`` is an autocommit connection with no transaction open; the answer is final when
    this returns. To run inside a transaction of your own, use ``ingest_in_transaction``.
    """
    return ingest_received(conn, receive(adapter, body, headers), handler)


def ingest_received(
    conn: Connection, received: Received, handler: Handler, *, pipeline: bool = False
) -> Receipt:
    """Claim and apply a delivery already received (a live one, or a stored one replayed).

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
        raise ValueError(
            "ingest needs an autocommit connection with no open transaction "
            "(inside your own transaction, use ingest_in_transaction)"
        )
    with translated(received.event.event_id):
        seen = run(conn, idempotency.seeing(received.event))
        if seen is not None:
            return duplicate(received, seen)
        if not pipeline:
            return _claim_and_apply(conn, received, handler)
        with conn.pipeline():
            return _claim_and_apply(conn, received, handler)


class Apply:
    """The command to run the handler, on the claim's connection, inside its transaction."""


APPLY = Apply()


@dataclass(frozen=True, slots=True, kw_only=True)
class Settled:
    """How a delivery's steps ended: the answer, and whether the transaction is kept (a parked
    delivery that still matches nothing is rolled back, its row left as it was)."""

    receipt: Receipt
    keep: bool = True


DeliverySteps = Generator[Statement | Apply, Any, Settled]


class Delivery:
    """One delivery's claim, apply and record, written once with no driver.

    ``steps()`` yields each ``Statement`` (and ``APPLY``) and receives its row (and the
    handler's ``Applied``); the sync driver below and ``payhooks.aio.claims`` run it inside
    a transaction of their own. ``unclaiming()`` is what to run when a handler's ``COMMIT``
    ended that transaction.
    """

    def __init__(self, received: Received) -> None:
        self.received = received
        self.claim: idempotency.Claim | None = None

    def steps(self) -> DeliverySteps:
        """The claim's steps, as statements for a sync or an async driver to run: a
        duplicate is answered from its record, a callback to confirm is recorded, the rest is
        handed to the handler."""
        event = self.received.event
        self.claim = claim = yield from idempotency.claiming(self.received, mark=False)
        if claim.state is ClaimState.DUPLICATE:
            if claim.mismatch and (second := confirmations.another_attempt(event)) is not None:
                return (yield from _another_attempt(self.received, second, claim))
            if claim.mismatch and (again := confirmations.posted_again(event, claim.outcome)):
                return (yield from _posted_again(self.received, again))
            if claim.mismatch:  # a copy of this key in another body: counted on its record
                yield from idempotency.marking(event)
            return Settled(receipt=duplicate(self.received, claim))
        if event.kind is EventKind.SETTLEMENT:  # the gateway's payout: no payment, no handler
            return (yield from _settlement(self.received))
        if event.unconfirmed:  # what it says is only a claim: the gateway's API decides
            return (yield from _to_confirm(event))
        replay = claim.state is ClaimState.PARKED
        if not (yield from disputes.recording(event, replay=replay)):  # a stale report
            yield from idempotency.recording(event, Outcome.IGNORED, None)
            return Settled(receipt=Receipt(outcome=Outcome.IGNORED, event=event))
        yield from refunds.closing(event)  # a refund payhooks sent, now processed
        check = yield from expectations.checking(
            event, reconciled=expectations.is_reconciled(event.event_id)
        )
        if (
            check.another_attempt
            and claim.state is ClaimState.NEW
            and (second := confirmations.another_attempt(event)) is not None
        ):  # its first post's record purged, the key claimed anew: let go of, as purged
            yield from idempotency.letting_go(event, claim)
            return (yield from _another_attempt(self.received, second, claim))
        if check.applied_by is not None:  # the payment reached a handler under another key
            if claim.state is ClaimState.PARKED:  # parked for its amount, perhaps: settled
                yield from expectations.applying(event, applied_by=check.applied_by)
            yield from idempotency.recording(event, Outcome.IGNORED, check.order_ref)
            return Settled(
                receipt=duplicate(self.received, replace(claim, order_ref=check.order_ref))
            )
        if check.mismatch is not None:  # never handed to the handler as a payment
            yield from expectations.releasing(event, check)
            return (yield from _held(self.received, claim, check.mismatch))
        if check.refunds_held:  # its payment is parked for its amount: parked beside it
            return (yield from _parked_beside(event, claim))
        applied: Applied = yield APPLY
        receipt = Receipt(outcome=applied.outcome, event=event, order_id=applied.order_id)
        if claim.state is ClaimState.PARKED and applied.outcome is Outcome.PARKED:
            return Settled(receipt=receipt, keep=False)  # still nothing to apply it to
        if applied.outcome is not Outcome.PROCESSED:
            yield from expectations.releasing(event, check)
        if (
            claim.state is ClaimState.PARKED
            and event.kind.pays
            and (applied.outcome in (Outcome.PROCESSED, Outcome.IGNORED))
        ):  # parked for its amount, perhaps: applied or ignored now, its mismatch is settled
            yield from expectations.settling(event, applied=applied.outcome is Outcome.PROCESSED)
        if applied.outcome is Outcome.PROCESSED:  # no mismatch of the payment outlives it
            yield from expectations.applying(event)
        yield from idempotency.recording(event, applied.outcome, applied.order_id)
        if applied.outcome is Outcome.PROCESSED:  # for each relay channel, last: its lock
            yield from relaying.queueing(event, applied.order_id)  # is held only to commit
        return Settled(receipt=receipt)

    def unclaiming(self, conn: Connection | AsyncConnection) -> Steps[None]:
        """Read how the handler left ``conn`` (its transaction ended, autocommit) first."""
        idle = conn.info.transaction_status is TransactionStatus.IDLE
        return idempotency.unclaiming(
            self.received.event, self.claim, idle=idle, autocommit=conn.autocommit
        )


def _held(
    received: Received, claim: idempotency.Claim, mismatch: expectations.Mismatch
) -> Generator[Statement, Any, Settled]:
    """A payment of another amount or currency than expected: parked, with the mismatch
    recorded for a person (once: a parked delivery retried stays parked as it was). When
    another delivery of the payment is parked for it already, or was settled by hand, this one
    is recorded ignored and answered as its duplicate: one mismatch per payment, settled once
    (the person's words kept for this one too)."""
    event = received.event
    other = yield from expectations.holding(event, mismatch)
    if other is not None:
        yield from idempotency.recording(event, Outcome.IGNORED, None)
        if other.settled is not None:
            yield from expectations.noting(event, other)
        return Settled(receipt=duplicate(received, claim))
    if claim.state is ClaimState.NEW:
        yield from idempotency.recording(event, Outcome.PARKED, None)
    return Settled(receipt=Receipt(outcome=Outcome.PARKED, event=event))


def _settlement(received: Received) -> Generator[Statement, Any, Settled]:
    """A payout the gateway made (its settlement webhook): recorded by the core
    (``payhooks.settlements.records``), in the claim's transaction, and answered processed. It
    is no payment event, so no handler sees it, and a shop's state machine never meets it."""
    yield from settled.webhook_recording(received)
    yield from idempotency.recording(received.event, Outcome.PROCESSED, None)
    return Settled(receipt=Receipt(outcome=Outcome.PROCESSED, event=received.event))


def _to_confirm(event: Event) -> Generator[Statement, Any, Settled]:
    """A callback resting on a static credential: recorded, its confirmation asked for, and
    answered at once; its handler never sees what it claims. One the API cannot be asked
    about (no order named, nothing a handler acts on) is recorded ignored."""
    if not confirmations.confirmable(event):
        yield from idempotency.recording(event, Outcome.IGNORED, None)
        return Settled(receipt=Receipt(outcome=Outcome.IGNORED, event=event))
    full = yield from confirmations.room(event)
    if full is not None:  # refused for now, stored nowhere: the gateway sends it again
        raise ConfirmationsFull(event.provider.value, full)
    yield from idempotency.recording(event, Outcome.CONFIRMING, None)
    yield from confirmations.requesting(event)
    return Settled(receipt=Receipt(outcome=Outcome.CONFIRMING, event=event))


def _another_attempt(
    received: Received, second: Event, first: idempotency.Claim
) -> Generator[Statement, Any, Settled]:
    """A copy under a recorded key whose body names another payment attempt (PayU's
    ``mihpayid``, outside its hash): a real second payment, or the first post edited. Recorded
    under its own key ``confirming`` and answered at once; the gateway's API decides, and only
    what it reports reaches a handler (``payhooks.intake.confirmations``, "another attempt"); one
    in other bytes under an attempt's key the API refuted is that attempt posted again, under a
    key of its own (``confirmations.posted_again``: PayU may give the id later). Past
    ``confirmations.MAX_OPEN_ATTEMPTS`` waiting at once for one post, refused for now (503,
    stored nowhere, asking nothing): whoever holds the signed post could otherwise make a
    record and an API call per invented id, and the gateway's own post of a real second
    payment is taken when it is sent again."""
    copy = yield Statement(
        sql=confirmations.SAME_ATTEMPT,
        params=(
            second.provider.value, second.payment_id, second.kind.value, second.attempt_id,
            received.event.event_id,
        ),
    )  # fmt: skip
    if copy is not None:  # the attempt the first post applied: this post edited, a copy
        if first.mismatch:
            yield from idempotency.marking(received.event)
        return Settled(receipt=duplicate(received, first))
    again = replace(received, event=second)
    claim = yield from idempotency.claiming(again, mark=False)
    if (
        claim.state is not ClaimState.NEW
        and claim.mismatch  # another body under the attempt's key: refuted, perhaps
        and (posted := confirmations.posted_again(second, claim.outcome)) is not None
    ):  # posted again under a key of its own: no copy of the attempt's
        second, again = posted, replace(received, event=posted)
        claim = yield from idempotency.claiming(again)
    elif claim.mismatch:  # a copy of the attempt's key in another body
        yield from idempotency.marking(again.event)
    if claim.state is not ClaimState.NEW:  # this attempt is recorded already: a copy of it
        return Settled(receipt=duplicate(again, claim))
    event = received.event
    row = yield Statement(
        sql=confirmations.OPEN_ATTEMPTS, params=(event.provider.value, event.event_id)
    )
    if row is not None and int(row[0]) >= confirmations.MAX_OPEN_ATTEMPTS:
        raise ConfirmationsFull(  # rolls the claim just taken back: nothing stored
            event.provider.value,
            f"{confirmations.MAX_OPEN_ATTEMPTS} other payments of this post already wait for "
            "the API",
        )
    yield from idempotency.recording(second, Outcome.CONFIRMING, None)
    yield from confirmations.requesting(second, first_event_id=received.event.event_id)
    return Settled(receipt=Receipt(outcome=Outcome.CONFIRMING, event=second))


def _posted_again(received: Received, again: Event) -> Generator[Statement, Any, Settled]:
    """Another body under the key of a refuted callback (``confirmations.posted_again``):
    claimed under its own key, then confirmed as any callback; a copy of it is a duplicate."""
    posted = replace(received, event=again)
    claim = yield from idempotency.claiming(posted)
    if claim.state is not ClaimState.NEW:
        return Settled(receipt=duplicate(posted, claim))
    return (yield from _to_confirm(again))


def _parked_beside(event: Event, claim: idempotency.Claim) -> Generator[Statement, Any, Settled]:
    """A refund of a payment parked for its amount: parked too, for the person who settles the
    payment; replayed once it is settled, it applies. Retried before then, nothing changes."""
    receipt = Receipt(outcome=Outcome.PARKED, event=event)
    if claim.state is not ClaimState.NEW:
        return Settled(receipt=receipt, keep=False)
    yield from idempotency.recording(event, Outcome.PARKED, None)
    return Settled(receipt=receipt)


def _claim_and_apply(conn: Connection, received: Received, handler: Handler) -> Receipt:
    """In a transaction of its own, or a savepoint of the caller's (same statements)."""
    delivery = Delivery(received)
    try:
        with conn.transaction() as tx:
            settled = _settle(conn, delivery.steps(), handler, received.event)
            if not settled.keep:
                raise psycopg.Rollback(tx)
    except (HandlerCommitted, InvalidSavepointSpecification) as exc:
        if (ended := ended_by_handler(exc)) is None:
            raise
        run(conn, delivery.unclaiming(conn))
        raise ended from exc
    return settled.receipt


def _settle(
    conn: Connection,
    steps: DeliverySteps,
    handler: Handler,
    event: Event,
) -> Settled:
    answer: object = None
    while not isinstance(command := advance(steps, answer), Done):
        answer = handler(conn, event) if isinstance(command, Apply) else execute(conn, command)
    return command.value


def ended_by_handler(exc: Exception) -> HandlerCommitted | None:
    """The claim's transaction ended inside a handler (a ``COMMIT`` or ``ROLLBACK`` sent as
    SQL): seen as the connection idle after it, or, when it wrote afterwards, as the claim's
    savepoint gone from the new transaction. None for a commit the driver refused (nothing
    ended, the claim rolls back as for any error)."""
    if isinstance(exc, InvalidSavepointSpecification):
        return HandlerCommitted.as_sql()
    if isinstance(exc, HandlerCommitted) and exc.ended:
        return exc
    return None


def duplicate(received: Received, claim: idempotency.Claim) -> Receipt:
    """The answer to a copy: the first delivery's order, and whether the body differed."""
    return Receipt(
        outcome=Outcome.DUPLICATE,
        event=received.event,
        order_id=claim.order_ref,
        mismatch=claim.mismatch,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    """The outcome of a delivery claimed inside the caller's transaction, which only counts
    once that transaction has committed: ask ``receipt()`` after the commit."""

    conn: Connection
    outcome: Receipt
    xid: int | None
    """The caller's transaction id, when the claim wrote anything in it."""

    def receipt(self, conn: Connection | None = None) -> Receipt:
        """The answer for the gateway; raises ``NotCommitted`` unless the work is committed.

        Asked on the claim's own connection by default; pass another (any session of the same
        database) when that one has gone back to a pool and may be serving someone else."""
        if self.xid is None:
            return self.outcome  # nothing was written: a duplicate stands on its own
        check = conn or self.conn
        if check is self.conn and check.info.transaction_status is not TransactionStatus.IDLE:
            raise NotCommitted("answer the gateway only after your transaction has committed")
        opened = not check.autocommit and check.info.transaction_status is TransactionStatus.IDLE
        try:
            with translated(self.outcome.event.event_id):
                self._check_committed(check)
        finally:
            if opened:  # our reads opened a transaction on a connection out of autocommit
                check.rollback()
        return self.outcome

    def _check_committed(self, check: Connection) -> None:
        row = query(check, _XACT_STATUS, (str(self.xid),)).fetchone()
        status = row[0] if row else None
        if status == "in progress":
            raise NotCommitted("answer the gateway only after your transaction has committed")
        if status != "committed":
            raise NotCommitted(f"the claim's transaction is {status or 'unknown'}, not committed")
        # The transaction committed, but a savepoint of the caller's around the claim may have
        # been rolled back: the record must be there for the answer to stand.
        event = self.outcome.event
        if query(check, _RECORDED, (event.provider.value, event.event_id)).fetchone() is None:
            raise NotCommitted("the claim was rolled back inside your transaction")


_XACT_STATUS = "SELECT pg_xact_status(%s::xid8)"
_RECORDED = "SELECT 1 FROM processed_webhooks WHERE provider = %s AND event_id = %s"
_XID = "SELECT pg_current_xact_id_if_assigned()::text"


def ingest_in_transaction(
    conn: Connection,
    adapter: Adapter,
    body: bytes,
    headers: Mapping[str, str],
    handler: Handler,
) -> Pending:
    """Verify, claim and apply inside the transaction the caller has open (a Django
    ``atomic()``, a SQLAlchemy session): the claim and the handler's writes commit with the
    caller's, or not at all. Answer the gateway with ``.receipt()`` after the commit::

        with transaction.atomic():
            pending = ingest_in_transaction(conn, adapter, body, headers, hooks)
        receipt = pending.receipt()   # raises NotCommitted if the commit did not happen
    """
    return ingest_received_in_transaction(conn, receive(adapter, body, headers), handler)


def ingest_received_in_transaction(
    conn: Connection, received: Received, handler: Handler
) -> Pending:
    # A connection that is not in autocommit opens its transaction with the first statement
    # (Django inside atomic(), SQLAlchemy): the caller commits it, as with an explicit one.
    """``ingest_in_transaction`` for a delivery already verified and parsed:
    the claim and the handler on the caller's open transaction, answered once it commits."""
    if conn.autocommit and conn.info.transaction_status is not TransactionStatus.INTRANS:
        raise ValueError(
            "ingest_in_transaction needs a transaction open on the connection "
            "(with none, use ingest)"
        )
    with translated(received.event.event_id):
        if conn.info.transaction_status is TransactionStatus.IDLE:
            conn.execute("SELECT 1")  # opens the caller's transaction: the claim nests in it
        outcome = _claim_and_apply(conn, received, handler)
        row = query(conn, _XID).fetchone()
    xid = int(row[0]) if row and row[0] is not None else None
    return Pending(conn=conn, outcome=outcome, xid=xid)


def restored(
    adapter: Adapter, *, event_id: str, body: bytes, headers: Mapping[str, str]
) -> Received:
    """A stored delivery received again, under the key it was stored with (a later version
    may derive keys differently: PayU's ``txnid:status``): its record is the claim to take.
    The bytes were verified when they arrived; they are parsed again, not re-verified, since
    the secret they were signed with may have been rotated out since. A payment reconciliation
    stored (its key ``reconcile:…``) is read by its gateway's status reader, not the adapter."""
    if expectations.is_reconciled(event_id):
        return reports.reread(adapter.provider, event_id, body)
    event = replace(storable(adapter.parse(body, headers)), event_id=event_id)
    return Received(event=event, body=body, headers=headers)


def replay(
    conn: Connection, adapter: Adapter, stored: idempotency.Stored, handler: Handler
) -> Receipt:
    """A stored delivery through the same path again: ``payhooks replay`` and the worker's
    retry of parked deliveries."""
    again = restored(adapter, event_id=stored.event_id, body=stored.body, headers=stored.headers)
    return ingest_received(conn, again, handler)


__all__ = [
    "MAX_BODY_BYTES",
    "Applied",
    "Handler",
    "NotCommitted",
    "Outcome",
    "Pending",
    "Receipt",
    "header_map",
    "ingest",
    "ingest_in_transaction",
    "ingest_received",
    "ingest_received_in_transaction",
    "receive",
    "replay",
    "restored",
    "storable",
]
