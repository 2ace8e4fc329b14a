"""Callbacks that prove only who sent them, not what they say: PhonePe's static
``Authorization`` digest, Juspay's Basic credentials, PayU's unsigned refund callbacks. Anyone
who learns the credential can write any body under it, so such a callback never reaches a
handler as it came. Its adapter marks its event ``unconfirmed``; ingest claims its key (a copy
is a duplicate as any other), records it ``confirming``, asks here for a confirmation, and
answers 200 at once (``requesting``).

A confirmation pass (``payhooks.reconcile.confirming``, run by reconciliation's runners) then
asks the gateway's status API about the order within seconds, applies what the API reports
through the same exactly-once path as reconciliation (``reconcile:<payment>:<status>`` keys:
once with any webhook or pass), and compares it with what the callback claimed (``verdict``):
``confirmed`` when the API reports that very state, ``refuted`` when it reports another final
state or, past ``PATIENCE``, never reports it. A refuted callback is a forgery or a stale
copy: it changed nothing, and is flagged (logged ``callback_refuted``, and its record says so).
What the API said always wins over what the callback said.

Another attempt: a second post under one delivery key whose body names another payment
attempt than the first (``Event.attempt_id``: PayU's ``mihpayid``, outside its hash) is a real
second payment or an edited copy of the first. It is recorded under a key of its own,
``<first key>:<attempt>``, ``confirming``, and asked about here beside the first post's record
(``first_event_id``); the gateway's status client tells which (``another_attempt``).

Posted again: a callback in other bytes under the key of one the API refuted is asked about in
its own right, under ``<first key>:<its body's hash>`` (``posted_again``).

Pure steps and statements: no HTTP here (the status clients are an extra).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from payhooks.events import Event, EventKind, Provider
from payhooks.gateways import GATEWAYS
from payhooks.gateways._reports import Verdict
from payhooks.plumbing.db import Connection, Statement, Steps, query
from payhooks.plumbing.keys import is_reconciled

PATIENCE = timedelta(minutes=30)
"""How long the API may keep saying nothing (a payment still pending), or that it knows no
such thing (PayU's "not found": a payment or refund too new for its API), before the callback
is refuted: a real payment's status API answers within minutes of its callback."""
LEASE = timedelta(minutes=2)
"""How long a pass holds a confirmation it is asking about (another pass skips it)."""


REQUEST = """
INSERT INTO payhooks_confirmations (provider, event_id, gateway_order_id, kind, payment_id,
                                    refund_id, amount_paise, first_event_id)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (provider, event_id) DO NOTHING
"""


MAX_OPEN_PER_ORDER = 8
"""Callbacks of one gateway order waiting for the API at once. A real order has a few (Juspay
sends an attempt's TXN_FAILED or TXN_CHARGED beside the order's ORDER_SUCCEEDED, then a
refund's); past this bound another is refused for now (``ConfirmationsFull``,
503, so the gateway sends it again), never stored: whoever holds a static credential, or
PayU's public merchant key, could otherwise make a record and API calls per post."""
MAX_OPEN_PER_GATEWAY = 200
"""Callbacks of one gateway waiting for the API at once, whatever their orders."""
ROOM = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM payhooks_confirmations
            WHERE provider = %(provider)s AND gateway_order_id = %(order)s AND verdict IS NULL
            LIMIT %(per_order)s) o),
       (SELECT count(*) FROM (SELECT 1 FROM payhooks_confirmations
            WHERE provider = %(provider)s AND verdict IS NULL LIMIT %(per_gateway)s) g)
"""


def room(event: Event) -> Steps[str | None]:
    """None while the bounds leave room for ``event``'s confirmation; else which is full."""
    row = yield Statement(
        sql=ROOM,
        params={"provider": event.provider.value, "order": event.merchant_ref,
                "per_order": MAX_OPEN_PER_ORDER, "per_gateway": MAX_OPEN_PER_GATEWAY},
    )  # fmt: skip
    assert row is not None
    if int(row[0]) >= MAX_OPEN_PER_ORDER:
        return f"{MAX_OPEN_PER_ORDER} callbacks of this order already wait for the API"
    if int(row[1]) >= MAX_OPEN_PER_GATEWAY:
        return f"{MAX_OPEN_PER_GATEWAY} callbacks of this gateway already wait for the API"
    return None


MAX_OPEN_ATTEMPTS = 2
"""Other attempts of one post waiting for the API at once; another is refused for now
(``ConfirmationsFull``, 503), as past the bounds above: it may be the gateway's own post of a
real second payment, sent again once the invented ones are refuted."""
OPEN_ATTEMPTS = """
SELECT count(*) FROM payhooks_confirmations
WHERE provider = %s AND first_event_id = %s AND verdict IS NULL
"""


SAME_ATTEMPT = """
SELECT 1 FROM payhooks_payments
WHERE provider = %s AND payment_id = %s AND kind = %s AND attempt_id = %s AND event_id = %s
"""
"""The first post under this key applied the payment, and its record names this very
attempt: a post of it in other bytes is a copy, answered at once, asking no one. (A payment
another key applied, reconciliation's, is the pass's to judge against the first post's.)"""


def another_attempt(event: Event) -> Event | None:
    """``event``, a copy under its key with another body, as the second post it may be: keyed
    ``<key>:<attempt>`` and unconfirmed; None where the body names no attempt of its own (a
    copy is a copy, as for every gateway whose signature covers the payment's id), and under
    a key payhooks wrote (``reconcile:``): that body is the gateway API's own answer, read
    again as the payment changes (PayU's ``verify_payment`` entry, its ``mihpayid`` the
    payment's record keeps), never a post."""
    if event.attempt_id is None or event.kind is not EventKind.PAYMENT_CAPTURED:
        return None
    if is_reconciled(event.event_id):
        return None
    return replace(event, event_id=f"{event.event_id}:{event.attempt_id}", unconfirmed=True)


def posted_again(event: Event, first: str | None) -> Event | None:
    """``event``, a copy in other bytes under the key of a callback whose confirmation was
    refuted (``first``, that record's outcome), as a callback in its own right: keyed
    ``<key>:<its body's hash, 16 hex>``. The key of a callback without an id of the gateway's
    (PhonePe's ``event:merchantOrderId:state``) is taken by the first body under it: a forgery
    sent before the customer paid, refuted, would otherwise make the real callback a
    duplicate, dropped. The API decides it as any other; the bounds of ``room`` hold."""
    if first != Verdict.REFUTED.value or not event.unconfirmed or is_reconciled(event.event_id):
        return None
    return replace(event, event_id=f"{event.event_id}:{event.payload_sha256[:16]}")


def confirmable(event: Event) -> bool:
    """Whether the API can be asked about what ``event`` claims: an order it names, and a
    state that would change something (a capture, a failure, a refund)."""
    return event.merchant_ref is not None and event.kind is not EventKind.OTHER


def requesting(event: Event, first_event_id: str | None = None) -> Steps[None]:
    """Ask for ``event``'s confirmation, in the transaction that claims its key; beside the
    record ``first_event_id`` when it is another attempt than that one's (its ``payment_id``
    then the attempt it names)."""
    assert event.merchant_ref is not None
    yield Statement(
        sql=REQUEST,
        params=(
            event.provider.value,
            event.event_id,
            event.merchant_ref,
            event.kind.value,
            event.attempt_id if first_event_id is not None else event.payment_id,
            event.refund_id,
            event.refund_amount_paise if event.kind.is_refund else event.amount_paise,
            first_event_id,
        ),
        reads=False,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    """A callback waiting for the API's word, as a pass leased it."""

    provider: str
    event_id: str
    gateway_order_id: str
    kind: EventKind
    payment_id: str | None
    refund_id: str | None
    amount_paise: int | None
    attempts: int
    requested_at: datetime
    first_event_id: str | None = None
    """Another attempt's: the record of the first post under its key (``payment_id`` is then
    the attempt this post named)."""


# The least asked first: a flood of forged callbacks, asked again and again until refuted,
# never stands ahead of a callback that has not been asked about once.
LEASED = """
WITH due AS (
    SELECT provider, event_id FROM payhooks_confirmations
    WHERE verdict IS NULL AND provider = %(provider)s AND next_attempt_at <= now()
    ORDER BY attempts, next_attempt_at LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE payhooks_confirmations c
SET next_attempt_at = now() + %(lease)s, attempts = c.attempts + 1
FROM due WHERE c.provider = due.provider AND c.event_id = due.event_id
RETURNING c.provider, c.event_id, c.gateway_order_id, c.kind, c.payment_id, c.refund_id,
          c.amount_paise, c.attempts, c.requested_at, c.first_event_id
"""


WAITING = """
SELECT provider, count(*) FROM payhooks_confirmations
WHERE verdict IS NULL AND provider = ANY(%s)
GROUP BY provider ORDER BY provider
"""


def unaskable(credentialed: Collection[Provider]) -> list[str]:
    """The gateways whose callbacks wait for their status API and whose API credentials are
    not among ``credentialed``: no pass asks about their callbacks."""
    return [p.value for p, g in GATEWAYS.items() if g.awaiting_api() and p not in credentialed]


def unasked(conn: Connection, credentialed: Collection[Provider]) -> dict[Provider, int]:
    """How many callbacks wait for the word of each gateway ``unaskable`` names (the CLI's and
    Django's commands name them)."""
    missing = unaskable(credentialed)
    if not missing:
        return {}
    return {Provider(p): int(n) for p, n in query(conn, WAITING, (missing,)).fetchall()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Unreadable:
    """A leased confirmation this release cannot read (a kind it does not know: written by a
    newer release before a rollback, or by hand), and why: set aside on its own, so it never
    keeps the rest of its gateway's callbacks from being asked about."""

    provider: str
    event_id: str
    attempts: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Leased:
    """What one lease took: the callbacks to ask about, and those this release cannot read."""

    due: list[Pending]
    unreadable: list[Unreadable]


def leased(conn: Connection, provider: str, limit: int) -> Leased:
    """The due confirmations of ``provider``, each held for ``LEASE`` (a second pass running
    meanwhile skips them). Each row is read on its own: one that cannot be is returned
    apart, with why, once the whole batch is already leased."""
    rows = query(conn, LEASED, {"provider": provider, "limit": limit, "lease": LEASE})
    due: list[Pending] = []
    unreadable: list[Unreadable] = []
    for r in rows.fetchall():
        try:
            due.append(_pending(r))
        except (ValueError, TypeError) as exc:
            reason = f"this release cannot read it: {type(exc).__name__}: {exc}"[:500]
            unreadable.append(Unreadable(provider=str(r[0]), event_id=str(r[1]),
                                         attempts=int(r[7]), reason=reason))  # fmt: skip
    return Leased(due=due, unreadable=unreadable)


def _pending(r: tuple[Any, ...]) -> Pending:
    """One ``LEASED`` row; an unknown ``kind`` raises ``ValueError``."""
    return Pending(
        provider=str(r[0]),
        event_id=str(r[1]),
        gateway_order_id=str(r[2]),
        kind=EventKind(r[3]),
        payment_id=r[4],
        refund_id=r[5],
        amount_paise=r[6],
        attempts=int(r[7]),
        requested_at=r[8],
        first_event_id=r[9],
    )


def verdict(
    pending: Pending,
    reported: Iterable[Event],
    now: datetime,
    *,
    contradicted: bool = False,
    underway: bool = False,
) -> Verdict | None:
    """What the API's events for the order say of what the callback claimed: None while it
    says nothing yet (ask again), within ``PATIENCE``.

    Only a claim that money moved can be refuted: a capture the API does not report (or
    reports in another final state), a refund it does not report. A passing or failed state
    (a payment pending, authorised, an attempt failed before another succeeded) claims
    nothing a handler acts on: once the API has answered, what it said is applied and the
    callback is settled, confirmed in the sense that it was heard, never refuted. A claim
    the API says it knows nothing of (PayU's "No action status found") is refuted past
    ``PATIENCE`` too, never at once: PayU's API may not show yet what it called back about.
    A refund the API reports in a final state of its own (``contradicted``: PhonePe's FAILED)
    is refuted at once; one it reports still on its way (``underway``) is waited for, however
    long: the gateway's own callback, when it completes, comes under the same key."""
    said = list(reported)
    if pending.kind.is_refund:
        refunds = [e for e in said if e.kind.is_refund]
        if any(_same_refund(pending, e) for e in refunds):
            return Verdict.CONFIRMED
        if contradicted:
            return Verdict.REFUTED
        if underway:
            return None
    elif pending.kind is EventKind.PAYMENT_CAPTURED:
        payments = [e for e in said if not e.kind.is_refund]
        if any(e.kind is pending.kind and _same_payment(pending, e) for e in payments):
            return Verdict.CONFIRMED
        if any(e.kind is pending.kind and _same_amount(pending, e) for e in payments):
            return Verdict.CONFIRMED  # the order captured, under another attempt's id
        final = [e for e in payments if e.kind.is_final and _same_payment(pending, e)]
        if final:  # the API knows that payment in another final state
            return Verdict.REFUTED
    else:
        return Verdict.CONFIRMED
    return Verdict.REFUTED if _lapsed(pending, now) else None


def attempt_verdict(
    pending: Pending,
    found: Verdict | None,
    reported: Iterable[Event],
    now: datetime,
    *,
    patient: bool = False,
) -> Verdict | None:
    """Another attempt, as its gateway's client judged it (``found``): refuted when the API
    says the attempt is not a payment of this order; confirmed when it reports the attempt a
    second payment (then applied) or the same one as the first post's; None while it knows no
    such attempt yet, and refuted past ``PATIENCE``. A verdict resting on the API knowing no
    such payment (``patient``) stands only past ``PATIENCE``: until then, None."""
    if found is not None:
        return found if not patient or _lapsed(pending, now) else None
    if any(e.payment_id == pending.payment_id for e in reported):
        return Verdict.CONFIRMED
    return Verdict.REFUTED if _lapsed(pending, now) else None


def _lapsed(pending: Pending, now: datetime) -> bool:
    """Whether the callback has waited ``PATIENCE`` for the API's word."""
    return now - pending.requested_at >= PATIENCE


FIRST_BODY = """
SELECT body FROM processed_webhooks WHERE provider = %s AND event_id = %s
"""


def first_body(conn: Connection, pending: Pending) -> bytes | None:
    """The first post's stored body, that another attempt is compared with (None: purged)."""
    assert pending.first_event_id is not None
    row = query(conn, FIRST_BODY, (pending.provider, pending.first_event_id)).fetchone()
    return None if row is None else bytes(row[0])


# The attempt the first post's payment was applied as (its record, kept a refund's year):
# what the first post named, once its body is purged.
APPLIED_ATTEMPT = """
SELECT attempt_id FROM payhooks_payments
WHERE provider = %s AND gateway_order_id = %s AND kind = 'payment_captured'
  AND attempt_id IS NOT NULL
ORDER BY applied_at LIMIT 1
"""


def applied_attempt(conn: Connection, pending: Pending) -> str | None:
    """The attempt (PayU's ``mihpayid``) the payment of ``pending``'s order was applied as,
    by its payment's record; None when none is recorded."""
    row = query(conn, APPLIED_ATTEMPT, (pending.provider, pending.gateway_order_id)).fetchone()
    return None if row is None else str(row[0])


# The record that applied the first post's payment, when it is not the first post itself
# (reconciliation applied it before the post came, and the post was recorded ``ignored``).
APPLIED_BODY = """
SELECT a.body FROM processed_webhooks f
JOIN payhooks_payments p
    ON p.provider = f.provider AND p.payment_id = f.payment_id AND p.kind = %s
JOIN processed_webhooks a ON a.provider = p.provider AND a.event_id = p.event_id
WHERE f.provider = %s AND f.event_id = %s AND a.event_id <> f.event_id
"""


def applied_body(conn: Connection, pending: Pending) -> bytes | None:
    """The stored body of the delivery that applied the first post's payment, when another
    delivery than the first post did (reconciliation's); None when the first post did."""
    assert pending.first_event_id is not None
    params = (pending.kind.value, pending.provider, pending.first_event_id)
    row = query(conn, APPLIED_BODY, params).fetchone()
    return None if row is None else bytes(row[0])


def _same_payment(pending: Pending, event: Event) -> bool:
    return pending.payment_id is None or event.payment_id == pending.payment_id


def _same_amount(pending: Pending, event: Event) -> bool:
    return pending.amount_paise is not None and event.amount_paise == pending.amount_paise


def _same_refund(pending: Pending, event: Event) -> bool:
    if pending.refund_id is not None and event.refund_id is not None:
        return event.refund_id == pending.refund_id
    return pending.amount_paise is not None and event.refund_amount_paise == pending.amount_paise


SETTLE = """
WITH settled AS (
    UPDATE payhooks_confirmations
    SET verdict = %(verdict)s, detail = %(detail)s, settled_at = now(), last_error = NULL
    WHERE provider = %(provider)s AND event_id = %(event_id)s AND verdict IS NULL
    RETURNING provider, event_id
), recorded AS (
    UPDATE processed_webhooks w SET outcome = %(verdict)s
    FROM settled s WHERE w.provider = s.provider AND w.event_id = s.event_id
)
SELECT count(*) FROM settled
"""
AGAIN = """
UPDATE payhooks_confirmations SET next_attempt_at = now() + %(wait)s, last_error = %(error)s
WHERE provider = %(provider)s AND event_id = %(event_id)s AND verdict IS NULL
"""


def settle(conn: Connection, pending: Pending, found: Verdict, detail: str) -> bool:
    """Records what the gateway's API said of a waiting callback (its verdict and why); False
    where it waits no more (a person settled it by hand meanwhile: theirs stands)."""
    return _settled(conn, pending.provider, pending.event_id, found, detail)


def _settled(conn: Connection, provider: str, event_id: str, found: Verdict, detail: str) -> bool:
    """``SETTLE`` run: whether the callback was still waiting, and is settled now."""
    params = {"verdict": found.value, "detail": detail, "provider": provider,
              "event_id": event_id}  # fmt: skip
    row = conn.execute(SETTLE, params).fetchone()
    return row is not None and int(row[0]) == 1


BY_HAND = "settled by hand: "
"""How a confirmation a person refuted (``expectations.resolve``) begins its detail: no word
of the API's, so never counted among the callbacks the API refuted (``health.REFUTED``)."""


def refuted_by_hand(conn: Connection, provider: str, event_id: str, note: str) -> bool:
    """A waiting callback the API will never settle, refuted by a person (``SETTLE``, as a
    pass settles one), their note its detail; False where it waits no more."""
    return _settled(conn, provider, event_id, Verdict.REFUTED, BY_HAND + note)


# Only while the lease is this pass's: one taken since by another pass (its attempts counted
# again) is that pass's to settle.
RELEASE = """
UPDATE payhooks_confirmations c
SET next_attempt_at = now() + %(wait)s, attempts = greatest(c.attempts - 1, 0)
FROM unnest(%(keys)s::text[], %(attempts)s::int[]) AS held (event_id, attempts)
WHERE c.provider = %(provider)s AND c.event_id = held.event_id
  AND c.attempts = held.attempts AND c.verdict IS NULL
"""


def release(conn: Connection, leased: Sequence[Pending], wait: timedelta) -> int:
    """Callbacks of one gateway leased and not asked about (the gateway paused the pass): due
    again after ``wait``, the attempt their lease counted given back; how many. One another
    pass leased since is left to it."""
    params = {
        "wait": wait,
        "provider": leased[0].provider,
        "keys": [pending.event_id for pending in leased],
        "attempts": [pending.attempts for pending in leased],
    }
    return conn.execute(RELEASE, params).rowcount


def again(
    conn: Connection, pending: Pending | Unreadable, wait: timedelta, error: str | None
) -> None:
    """Not settled this time: due again after ``wait`` (growing with its attempts)."""
    conn.execute(
        AGAIN,
        {"wait": wait, "error": error, "provider": pending.provider, "event_id": pending.event_id},
    )


ERRING = """
SELECT provider, count(*) FROM payhooks_confirmations
WHERE verdict IS NULL AND last_error IS NOT NULL AND provider = ANY(%s)
GROUP BY provider
"""


def erring(conn: Connection, providers: Iterable[Provider]) -> Counter[Provider]:
    """The callbacks of ``providers`` waiting to be asked again after an error (their API
    failed, a handler raised, the database refused the pass's bookkeeping), by gateway."""
    rows = query(conn, ERRING, ([p.value for p in providers],)).fetchall()
    return Counter({Provider(provider): int(count) for provider, count in rows})


def wait_after(attempts: int) -> timedelta:
    """2 s, 4 s, 8 s, ... up to 5 minutes: a real payment confirms within seconds."""
    return timedelta(seconds=min(2**attempts, 300))


__all__ = [
    "BY_HAND",
    "LEASE",
    "MAX_OPEN_ATTEMPTS",
    "MAX_OPEN_PER_GATEWAY",
    "MAX_OPEN_PER_ORDER",
    "PATIENCE",
    "Leased",
    "Pending",
    "Unreadable",
    "Verdict",
    "again",
    "another_attempt",
    "applied_body",
    "attempt_verdict",
    "confirmable",
    "erring",
    "first_body",
    "leased",
    "refuted_by_hand",
    "release",
    "requesting",
    "room",
    "settle",
    "verdict",
    "wait_after",
]
