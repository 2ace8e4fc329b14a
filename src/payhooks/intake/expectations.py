"""What the merchant expects a gateway order to be paid, and the check every payment meets.

The merchant calls ``expect()`` when it creates the order at the gateway, in its own
transaction::

    with conn.transaction():
        conn.execute("INSERT INTO orders ...")
        payhooks.expect(conn, "razorpay", rzp_order["id"], amount_paise=49_900,
                        currency="INR", reference=order_id)

From then on every payment authorised or captured for that gateway order is checked before
the merchant's handler runs: a payment of another amount or currency is parked, recorded in
``payhooks_amount_mismatches`` with both amounts for a person, and never handed to a handler
as a payment. A gateway order nobody expected is applied as before. Reconciliation
(``payhooks.reconcile``) asks the gateways about expected orders whose payment never came.

Like the claim, the statements and steps are written once, with no driver
(``payhooks.intake.idempotency``): ``expect`` and ``expect_async`` drive the same one.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from payhooks.events import CONTROL, MAX_PAISE, Event, EventKind, Provider, is_text
from payhooks.intake import confirmations, disputes
from payhooks.plumbing.db import (
    AsyncConnection,
    Connection,
    Statement,
    Steps,
    query,
    run,
    run_async,
)
from payhooks.plumbing.keys import RECONCILED as RECONCILED  # kept importable from here
from payhooks.plumbing.keys import is_reconciled as is_reconciled

MONEY = frozenset(kind for kind in EventKind if kind.pays)
"""The kinds whose amount is checked (``EventKind.pays``): kept for importers."""

MAX_ID_CHARS = 255
_CURRENCY = re.compile(r"[A-Z]{3}")

# The expectation, and what the records of the order's payments already written keep of it
# (the merchant's reference, core migration 0036: what the search finds a payment by once the
# purge has taken its delivery and expectation; the amount expected, 0029: what the payments
# list and the order's page show then), in one statement: an expectation recorded or corrected
# after a payment leaves no record with none, or with the one it replaced. The records are
# locked in their key's order, as a dispute's report locks a payment's, and only those that
# keep another.
EXPECT = """
WITH expected AS (
    INSERT INTO payhooks_expectations
        (provider, gateway_order_id, amount_paise, currency, reference)
    VALUES (%(provider)s, %(gateway_order_id)s, %(amount_paise)s, %(currency)s, %(reference)s)
    ON CONFLICT (provider, gateway_order_id) DO UPDATE
        SET amount_paise = excluded.amount_paise, currency = excluded.currency,
            reference = excluded.reference
), stale AS (
    SELECT provider, payment_id, kind FROM payhooks_payments
    WHERE provider = %(provider)s AND gateway_order_id = %(gateway_order_id)s
      AND (reference, expected_paise, expected_currency)
          IS DISTINCT FROM (%(reference)s, %(amount_paise)s::bigint, %(currency)s::text)
    ORDER BY payment_id, kind
    FOR NO KEY UPDATE
)
UPDATE payhooks_payments p
SET reference = %(reference)s, expected_paise = %(amount_paise)s,
    expected_currency = %(currency)s
FROM stale s
WHERE p.provider = s.provider AND p.payment_id = s.payment_id AND p.kind = s.kind
"""

# The expectation of the order when this payment does not meet it, locked (FOR KEY SHARE) so
# that a purge, which deletes only the expectations it can lock (FOR UPDATE), cannot take it
# while the payment is being parked for it; a payment that meets it takes no lock. One a purge
# is deleting is waited for, and then found gone: the payment is applied as unexpected.
UNMET = """
SELECT amount_paise, currency FROM payhooks_expectations
WHERE provider = %(provider)s AND gateway_order_id = %(order)s
  AND (amount_paise IS DISTINCT FROM %(amount)s OR currency <> %(currency)s)
FOR KEY SHARE
"""

# No conflict target: the delivery's own mismatch (a retry of it), or the payment's open one
# under another key (``payhooks_amount_mismatches_one_open``: one open mismatch per payment; a
# twin inserting it is waited for), and nothing is inserted. Nor is anything for a payment a
# person settled by hand (``resolve``): read after the payment's turn, which the claim took
# (``CLAIM_PAYMENT``'s trigger) and ``resolve`` takes too, so a settlement committed meanwhile
# is seen. The amounts are cast: a ``SELECT``'s parameters take no type from the columns.
HOLD = """
INSERT INTO payhooks_amount_mismatches (provider, event_id, gateway_order_id, payment_id,
    expected_paise, expected_currency, paid_paise, paid_currency)
SELECT %(provider)s, %(event_id)s, %(merchant_ref)s, %(payment_id)s, %(expected_paise)s::bigint,
    %(expected_currency)s, %(paid_paise)s::bigint, %(paid_currency)s
WHERE NOT EXISTS (SELECT 1 FROM payhooks_amount_mismatches s
                  WHERE s.provider = %(provider)s AND s.payment_id = %(payment_id)s
                    AND s.settled_by_hand)
ON CONFLICT DO NOTHING
RETURNING 1
"""

# The delivery that holds the payment's open mismatch when it is not this one; else the one
# whose mismatch a person settled by hand, with their words.
HELD_BY = """
SELECT event_id, resolved_at IS NULL, resolution FROM payhooks_amount_mismatches
WHERE provider = %(provider)s AND payment_id = %(payment_id)s AND event_id <> %(event_id)s
  AND (resolved_at IS NULL OR settled_by_hand)
ORDER BY resolved_at NULLS FIRST, event_id
LIMIT 1
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Expectation:
    """A gateway order the merchant created: what it must be paid, and the merchant's own
    reference for it (its order id)."""

    provider: Provider
    gateway_order_id: str
    amount_paise: int
    currency: str
    reference: str


def expectation(
    gateway: Provider | str,
    gateway_order_id: str,
    amount_paise: int,
    currency: str = "INR",
    reference: str | None = None,
) -> Expectation:
    """The expectation, checked: a clear ``ValueError`` or ``TypeError`` for what no gateway
    order can be (an unknown gateway, an amount that is not whole paise, a currency that is
    not three capital letters)."""
    try:
        provider = Provider(gateway)
    except ValueError:
        known = ", ".join(p.value for p in Provider)
        raise ValueError(f"unknown gateway {gateway!r} (one of {known})") from None
    if isinstance(amount_paise, bool) or not isinstance(amount_paise, int):
        raise TypeError(f"amount_paise must be an int of paise, not {type(amount_paise).__name__}")
    if not 0 <= amount_paise <= MAX_PAISE:
        raise ValueError(f"amount_paise is out of range: {amount_paise}")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise ValueError(f"currency must be three capital letters (ISO 4217), not {currency!r}")
    return Expectation(
        provider=provider,
        gateway_order_id=_identifier("gateway_order_id", gateway_order_id),
        amount_paise=amount_paise,
        currency=currency,
        reference=_identifier("reference", gateway_order_id if reference is None else reference),
    )


def _identifier(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value or len(value) > MAX_ID_CHARS or CONTROL.search(value) or not is_text(value):
        raise ValueError(
            f"{name} must be 1 to {MAX_ID_CHARS} characters of valid text, none a control one"
        )
    return value


def expecting(expected: Expectation) -> Steps[None]:
    """Record (or correct) what a gateway order must be paid, and the merchant's reference
    the records of its payments keep."""
    yield Statement(sql=EXPECT, params=asdict(expected), reads=False)


def expect(
    conn: Connection,
    gateway: Provider | str,
    gateway_order_id: str,
    amount_paise: int,
    currency: str = "INR",
    reference: str | None = None,
) -> Expectation:
    """Tell payhooks what ``gateway_order_id`` must be paid, in the caller's transaction (it
    counts once that commits). Calling it again for the same order corrects it: a delivery
    parked for its amount is applied when it is replayed after the correction. ``reference``
    (the order's own id by default) is kept on the records of the order's payments, those
    written already included: what the search finds them by after the purge."""
    expected = expectation(gateway, gateway_order_id, amount_paise, currency, reference)
    run(conn, expecting(expected))
    return expected


async def expect_async(
    conn: AsyncConnection,
    gateway: Provider | str,
    gateway_order_id: str,
    amount_paise: int,
    currency: str = "INR",
    reference: str | None = None,
) -> Expectation:
    """``expect`` on an async connection."""
    expected = expectation(gateway, gateway_order_id, amount_paise, currency, reference)
    await run_async(conn, expecting(expected))
    return expected


@dataclass(frozen=True, slots=True, kw_only=True)
class Mismatch:
    """A payment whose amount or currency is not the expected one."""

    expected_paise: int
    expected_currency: str
    paid_paise: int | None
    paid_currency: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """What a payment authorised or captured meets before any handler runs.

    ``mismatch``: its amount or currency is not what the merchant expected. ``applied_by``:
    the same payment (and kind) already reached a handler under another delivery key, and one
    of the two is reconciliation's, or under this very key, whose record the purge took: the
    key of that delivery, whose answer stands.
    ``claimed``: this delivery holds the payment's row, to let go of if it is not applied.
    ``refunds_held``: a refund of a payment parked for its amount and not yet resolved.
    ``another_attempt``: the payment's record names another attempt of it (PayU's
    ``mihpayid``) than this delivery does, under this delivery's own key (its record purged
    since): a second payment, or the post edited, for the gateway's API to tell.
    """

    mismatch: Mismatch | None = None
    applied_by: str | None = None
    order_ref: str | None = None
    claimed: bool = False
    reported: bool = False
    """This delivery holds the claim of a failed or pending attempt (``reporting``)."""
    refunds_held: bool = False
    another_attempt: bool = False


UNCHECKED = Check()

# The payment's row claimed (insert first, as the delivery's own claim) and the expectation
# it does not meet read (``UNMET``), in one round trip. On a conflict the row is left as it is
# and read back. A new row counts what the payment's disputes already took back (the record's
# trigger, core migrations 0027 and 0029, on every path that records a payment): one lost
# before the payment was recorded (its capture parked, then replayed) bounds its refunds too.
# The trigger takes the payment's turn first, so a loss being reported meanwhile is waited for
# and counted. The record keeps what the payment is searched by past the purge of its
# deliveries (core migration 0036): its bank reference, written here; the merchant's reference,
# copied from the expectation by the trigger; the order its handler answered, written with the
# delivery's record (``idempotency.RECORD_WITH_PAYMENT``).
CLAIM_PAYMENT = (
    """
WITH mine AS (
    INSERT INTO payhooks_payments AS p
        (provider, payment_id, kind, gateway_order_id, event_id, reconciled, attempt_id,
         paid_paise, currency, bank_ref)
    VALUES (%(provider)s, %(payment_id)s, %(kind)s, %(order)s, %(event_id)s, %(reconciled)s,
        %(attempt)s, %(paid)s, %(currency)s, %(bank_ref)s)
    ON CONFLICT (provider, payment_id, kind) DO UPDATE SET applied_at = p.applied_at,
        gateway_order_id = coalesce(p.gateway_order_id, excluded.gateway_order_id),
        attempt_id = coalesce(p.attempt_id, excluded.attempt_id),
        paid_paise = coalesce(p.paid_paise, excluded.paid_paise),
        currency = coalesce(p.currency, excluded.currency),
        bank_ref = coalesce(p.bank_ref, excluded.bank_ref)
    RETURNING xmax = 0 AS inserted, p.reconciled, p.event_id, p.attempt_id, p.order_ref
), unmet AS ("""
    + UNMET
    + """)
SELECT mine.inserted, mine.reconciled, mine.event_id, mine.attempt_id, mine.order_ref,
       unmet.amount_paise, unmet.currency
FROM mine LEFT JOIN unmet ON true
"""
)

# The order of a payment applied under another key, for a record that does not keep it (one
# an earlier release wrote since core migration 0036, or a merchant's own one-statement
# capture): from that delivery's record, while it is stored. Read in a statement of its own:
# after waiting on a twin's row, the claim's statement still sees the database as it was
# before the wait. (The record's own columns, returned by the conflict's update, are its
# latest version, the twin's included.)
APPLIED_BY = """
SELECT order_ref FROM processed_webhooks
WHERE provider = %s AND event_id = %s AND outcome = 'processed'
"""

RELEASE_PAYMENT = """
DELETE FROM payhooks_payments WHERE provider = %s AND payment_id = %s AND kind = %s
    AND event_id = %s
"""


def paid_paise(event: Event) -> int | None:
    """What the customer paid for the payment, the bound on its refunds: the gateway's own
    figure of it where that differs from the amount compared with the order (Cashfree's
    ``payment_amount``, Juspay's ``effective_amount``), else the amount (Razorpay's, PayU's,
    PhonePe's)."""
    return event.amount_paise if event.payment_amount_paise is None else event.payment_amount_paise


def paid_currency(event: Event) -> str:
    """Razorpay and Cashfree name the currency; PayU's posts are rupees."""
    return event.currency or "INR"


# A payment parked for its amount, not yet resolved: its refund waits beside it.
HELD = """
SELECT 1 FROM payhooks_amount_mismatches
WHERE provider = %s AND payment_id = %s AND resolved_at IS NULL
LIMIT 1
"""


def checking(event: Event, *, reconciled: bool) -> Steps[Check]:
    """For a payment authorised or captured: claim the payment's own row and compare it with
    what the merchant expected. For a refund: whether its payment is parked for its amount (a
    handler must not see a refund of a payment it never saw). Any other event passes with no
    statement. ``reconciled``: the delivery is one reconciliation made (its key no webhook can
    take)."""
    if event.kind.is_refund and event.payment_id is not None:
        held = yield Statement(sql=HELD, params=(event.provider.value, event.payment_id))
        return Check(refunds_held=held is not None)
    if event.kind in REPORTED_ONCE and event.payment_id is not None:
        return (yield from reporting(event, reconciled=reconciled))
    if not event.kind.pays:
        return UNCHECKED
    paid = {"provider": event.provider.value, "order": event.merchant_ref,
            "amount": event.amount_paise, "currency": paid_currency(event)}  # fmt: skip
    if event.payment_id is None:
        if event.merchant_ref is None:
            return UNCHECKED
        row = yield Statement(sql=UNMET, params=paid)
        return Check(mismatch=None if row is None else _mismatch(event, row[0], row[1]))
    row = yield Statement(
        sql=CLAIM_PAYMENT,
        params={
            **paid,
            "payment_id": event.payment_id,
            "kind": event.kind.value,
            "event_id": event.event_id,
            "reconciled": reconciled,
            "attempt": event.attempt_id,
            "paid": paid_paise(event),
            "bank_ref": event.bank_ref,
        },
    )
    assert row is not None
    inserted, first_reconciled, first_key, attempt, kept_order, *unmet = row
    another = (
        not inserted and None not in (attempt, event.attempt_id) and attempt != event.attempt_id
    )
    # The record names this very key: the payment was applied under it, and the key's
    # delivery record purged since (a copy sent late, a report the status API makes again).
    purged = first_key == event.event_id and not another
    crossed = first_key != event.event_id and (reconciled or first_reconciled)
    if not inserted and not (purged or crossed or another):
        # Under another key: a second delivery of the payment (Razorpay's ``order.paid``
        # beside ``payment.captured``) reaches the handler as the first did, while the
        # first's delivery record is kept; once it is purged, a delivery of the payment is a
        # copy sent late (the second's own record went with the first's), never applied again.
        first = yield Statement(sql=APPLIED_BY, params=(event.provider.value, first_key))
        purged = first is None
    if not inserted and (purged or crossed):
        # Its order, from the payment's record: kept past the purge of that delivery.
        order_ref = None if kept_order is None else str(kept_order)
        if order_ref is None and crossed:
            first = yield Statement(sql=APPLIED_BY, params=(event.provider.value, first_key))
            order_ref = None if first is None or first[0] is None else str(first[0])
        return Check(applied_by=str(first_key), order_ref=order_ref)
    mismatch = None if unmet[1] is None else _mismatch(event, unmet[0], unmet[1])
    return Check(mismatch=mismatch, claimed=bool(inserted), another_attempt=another)


REPORTED_ONCE = frozenset({EventKind.PAYMENT_FAILED, EventKind.PAYMENT_PENDING})
"""Attempts that pay nothing, claimed by the attempt and kind (``reporting``), as a payment is
by its own row: its webhook and reconciliation's report of it reach the handlers once."""
CLAIM_REPORT = """
INSERT INTO payhooks_attempt_reports AS a
    (provider, payment_id, kind, attempt_id, event_id, reconciled)
VALUES (%(provider)s, %(payment_id)s, %(kind)s, %(attempt)s, %(event_id)s, %(reconciled)s)
ON CONFLICT (provider, payment_id, kind, attempt_id) DO UPDATE SET reported_at = a.reported_at
RETURNING xmax = 0 AS inserted, a.event_id, a.reconciled
"""
RELEASE_REPORT = """
DELETE FROM payhooks_attempt_reports WHERE provider = %s AND payment_id = %s AND kind = %s
    AND event_id = %s
"""


def reporting(event: Event, *, reconciled: bool) -> Steps[Check]:
    """A failed or pending attempt claimed by the attempt and its kind (core 0042): the later
    of its webhook and reconciliation's report of it (``reconciled``), under two keys, is a
    copy of the first (``applied_by``), as a payment's is. Two webhooks of it under two keys
    (Cashfree's two endpoints) each reach the handler, as a payment's do. An attempt is its
    payment id and, where the gateway names attempts under one (PayU's ``mihpayid`` under the
    txnid), the attempt: another attempt's failure is its own. Only a report that was
    applied holds the claim (``releasing``)."""
    assert event.payment_id is not None
    params = {
        "provider": event.provider.value,
        "payment_id": event.payment_id,
        "kind": event.kind.value,
        "attempt": event.attempt_id or "",
        "event_id": event.event_id,
        "reconciled": reconciled,
    }
    row = yield Statement(sql=CLAIM_REPORT, params=params)
    assert row is not None
    inserted, first_key, first_reconciled = row
    if inserted:
        return Check(reported=True)
    if first_key != event.event_id and (reconciled or first_reconciled):
        first = yield Statement(sql=APPLIED_BY, params=(event.provider.value, first_key))
        order_ref = None if first is None or first[0] is None else str(first[0])
        return Check(applied_by=str(first_key), order_ref=order_ref)
    return UNCHECKED


def _mismatch(event: Event, amount: int, currency: str) -> Mismatch:
    return Mismatch(
        expected_paise=int(amount),
        expected_currency=str(currency),
        paid_paise=event.amount_paise,
        paid_currency=paid_currency(event),
    )


def releasing(event: Event, check: Check) -> Steps[None]:
    """The payment's row let go when this delivery was not applied after all (parked,
    ignored): a later delivery of the payment may then apply it."""
    if check.claimed or check.reported:
        assert event.payment_id is not None
        params = (event.provider.value, event.payment_id, event.kind.value, event.event_id)
        released = RELEASE_PAYMENT if check.claimed else RELEASE_REPORT
        yield Statement(sql=released, params=params, reads=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldBy:
    """Another delivery of a payment parked for its amount: its key, and the words of the
    person who settled its mismatch by hand (None: it is still open)."""

    event_id: str
    settled: str | None = None


def holding(event: Event, mismatch: Mismatch) -> Steps[HeldBy | None]:
    """Record the mismatch beside the delivery's record (once, however often it is retried).
    A payment has one mismatch, settled once: when another delivery of it (a webhook's,
    reconciliation's) holds it open, or had it settled by hand, nothing is recorded and that
    delivery is returned."""
    assert event.merchant_ref is not None
    params = {**asdict(event), **asdict(mismatch)}
    if (yield Statement(sql=HOLD, params=params)) is not None or event.payment_id is None:
        return None
    other = yield Statement(sql=HELD_BY, params=params)
    if other is None:
        return None
    return HeldBy(event_id=str(other[0]), settled=None if other[1] else str(other[2]))


SETTLED_WITH = "its payment was settled by hand under {key}: {words}"


def noting(event: Event, held: HeldBy) -> Steps[None]:
    """Why a delivery of a payment settled by hand under another key is ignored, kept where a
    person's words for a delivery are (``payhooks_resolutions``, on its timeline)."""
    assert held.settled is not None
    words = SETTLED_WITH.format(key=held.event_id, words=held.settled)
    params = {"provider": event.provider.value, "event_id": event.event_id, "resolution": words}
    yield Statement(sql=KEEP_NOTE, params=params, reads=False)


# One delivery's open mismatch, settled with how. A payment parked for its amount and replayed
# after the expectation was corrected: applied after all, or ignored by the handlers (recorded
# ignored, it can no longer be resolved by hand), its mismatch is settled by that, never left
# open; so is one whose payment reached a handler under another key (``applying``).
SETTLED_BY_DELIVERY = """
UPDATE payhooks_amount_mismatches SET resolved_at = now(), resolution = %s
WHERE provider = %s AND event_id = %s AND resolved_at IS NULL
"""
APPLIED_AFTER_ALL = "applied: the expectation was corrected and the delivery replayed"
IGNORED_AFTER_ALL = "ignored: the expectation was corrected and the handlers ignored it"


def settling(event: Event, *, applied: bool) -> Steps[None]:
    """The mismatch of a parked delivery now applied (or ignored by the handlers), marked
    resolved with which (none: no change)."""
    resolution = APPLIED_AFTER_ALL if applied else IGNORED_AFTER_ALL
    params = (resolution, event.provider.value, event.event_id)
    yield Statement(sql=SETTLED_BY_DELIVERY, params=params, reads=False)


# The payment applied, whichever delivery brought it: any mismatch of it still open is settled
# in the same transaction, so none outlives its payment (and holds its refunds back).
SETTLED_BY_PAYMENT = """
UPDATE payhooks_amount_mismatches SET resolved_at = now(), resolution = %s
WHERE provider = %s AND payment_id = %s AND resolved_at IS NULL
"""
APPLIED_UNDER = "applied: the payment reached a handler under "


def applying(event: Event, applied_by: str | None = None) -> Steps[None]:
    """The payment of ``event`` applied: under this delivery's key (``applied_by`` None), any
    open mismatch of the payment is settled; under another key found applied before, the open
    mismatch of this delivery (a parked one replayed) is."""
    if not event.kind.pays:
        return
    if applied_by is not None:
        params = (APPLIED_UNDER + applied_by, event.provider.value, event.event_id)
        yield Statement(sql=SETTLED_BY_DELIVERY, params=params, reads=False)
    elif event.payment_id is not None:
        params = (APPLIED_UNDER + event.event_id, event.provider.value, event.payment_id)
        yield Statement(sql=SETTLED_BY_PAYMENT, params=params, reads=False)


RESOLVE = """
WITH settled AS (
    UPDATE processed_webhooks SET outcome = 'ignored', processed_at = now()
    WHERE provider = %(provider)s AND event_id = %(event_id)s AND outcome = 'parked'
      AND EXISTS (SELECT 1 FROM payhooks_amount_mismatches m
                  WHERE m.provider = %(provider)s AND m.event_id = %(event_id)s
                    AND m.resolved_at IS NULL)
    RETURNING 1
)
UPDATE payhooks_amount_mismatches
SET resolved_at = now(), resolution = %(resolution)s, settled_by_hand = true
WHERE provider = %(provider)s AND event_id = %(event_id)s AND EXISTS (SELECT 1 FROM settled)
RETURNING 1
"""


# The parked delivery's record, locked: what a replay or a second person settling it waits on,
# so each statement after it (a snapshot of its own) sees what they committed.
LOCK_PARKED = """
SELECT payment_id FROM processed_webhooks
WHERE provider = %(provider)s AND event_id = %(event_id)s AND outcome = 'parked'
FOR UPDATE
"""
# Its payment parked for its amount under another delivery and not settled: this one (a refund
# of it) is held beside it, and applies once that is settled and it is replayed.
HELD_BESIDE = """
SELECT 1 FROM payhooks_amount_mismatches
WHERE provider = %(provider)s AND payment_id = %(payment_id)s AND event_id <> %(event_id)s
  AND resolved_at IS NULL
LIMIT 1
"""
# One parked for another reason (a payment for no checkout, a refund or a dispute of a payment
# never taken), or still parked after its own mismatch was settled: ignored, the words kept.
RESOLVE_PARKED = """
WITH settled AS (
    UPDATE processed_webhooks SET outcome = 'ignored', processed_at = now()
    WHERE provider = %(provider)s AND event_id = %(event_id)s AND outcome = 'parked'
    RETURNING 1
)
INSERT INTO payhooks_resolutions (provider, event_id, resolution)
SELECT %(provider)s, %(event_id)s, %(resolution)s FROM settled
ON CONFLICT (provider, event_id) DO UPDATE
    SET resolution = excluded.resolution, resolved_at = now()
RETURNING 1
"""

# A person's words for a delivery they settled (a callback refuted by hand, below).
KEEP_NOTE = """
INSERT INTO payhooks_resolutions (provider, event_id, resolution)
VALUES (%(provider)s, %(event_id)s, %(resolution)s)
ON CONFLICT (provider, event_id) DO UPDATE
    SET resolution = excluded.resolution, resolved_at = now()
"""


class NotAMismatch(LookupError):
    """The delivery named cannot be settled by hand: not parked (unknown, applied, or settled
    already), or a refund held beside its payment's amount mismatch, which is settled first."""


def resolve(conn: Connection, gateway: Provider | str, event_id: str, resolution: str) -> None:
    """A parked delivery settled by a person outside payhooks; its delivery is recorded
    ``ignored``. A payment parked for its amount (refunded in the gateway's dashboard, written
    off): its mismatch keeps ``resolution`` (their words) and when. Any other parked delivery
    that will never apply (a payment for no checkout, a refund or a dispute of a payment the
    app never took): its words kept in ``payhooks_resolutions``, shown on its timeline. A
    refund held beside its payment's unsettled mismatch is refused (it applies once that is
    settled and it is replayed). A callback waiting for its gateway's API (``confirming``)
    that the API will never settle: refuted, nothing applied, the words kept. To apply a
    payment as paid instead, correct the expectation with ``expect`` and replay it. Raises
    ``NotAMismatch`` for one that cannot be settled."""
    if not resolution.strip():
        raise ValueError("say how it was resolved (refunded, written off, ...)")
    params = {"provider": Provider(gateway).value, "event_id": event_id, "resolution": resolution}
    with conn.transaction():
        parked = query(conn, LOCK_PARKED, params).fetchone()
        if parked is None:
            if confirmations.refuted_by_hand(conn, params["provider"], event_id, resolution):
                query(conn, KEEP_NOTE, params)
                return  # a callback waiting for its gateway's API: refuted by hand
            raise NotAMismatch(
                f"{gateway} delivery {event_id!r} is not parked nor waiting for its gateway's "
                "API (unknown, applied, or settled)"
            )
        held = {**params, "payment_id": parked[0]}
        if parked[0] is not None:  # its turn: a delivery of it parking meanwhile sees this
            query(conn, disputes.TURN, held)
        if query(conn, RESOLVE, params).fetchone() is not None:
            return  # parked for its amount: settled with its mismatch
        if parked[0] is not None and query(conn, HELD_BESIDE, held).fetchone() is not None:
            raise NotAMismatch(
                f"{gateway} delivery {event_id!r} is held beside its payment, parked for its "
                "amount: settle that payment first, then replay this one"
            )
        query(conn, RESOLVE_PARKED, params)


__all__ = [
    "MONEY",
    "Check",
    "Expectation",
    "HeldBy",
    "Mismatch",
    "NotAMismatch",
    "applying",
    "checking",
    "expect",
    "expect_async",
    "expectation",
    "holding",
    "noting",
    "releasing",
    "resolve",
    "settling",
]
