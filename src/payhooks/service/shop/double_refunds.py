"""The double-payment policy (``PAYHOOKS_REFUND_DOUBLE_PAYMENTS``, off by default): the second
payment of a cart already paid (flagged ``duplicate_payment``, ``needs_refund``) is refunded
automatically: an intent (``payhooks.refunding.refunds``) under the key ``double:<payment id>``,
sent by the worker's sender like any other. One the gateway refused or failed is asked again
under a fresh key (``double:<payment id>:2``, ...) after ``RETRY_WAIT``, at most ``TRIES`` times
in all; then the payment keeps its flag for a person, and the shop's ``refunds_needed`` alert
says the policy gave up on it. One a person cancelled is a person's: the policy never asks again
for that payment. The console's Refund button takes the same next key, so it asks again too,
never "already asked for" while nothing is live. A payment of a gateway payhooks does not refund
keeps its flag for a person.

What is asked for is what is left (``REFUNDABLE``): what the customer paid, less what lost
disputes took back for the customer (the core refuses a refund of that again) and what refunds
returned. A flagged payment lost disputes left nothing of needs no refund (``taken_back``): its
flag is cleared, marked ``taken_back_by_dispute``, and the operators told once, by the
dispute's report, by the policy's pass or by the console's button, whichever finds it first."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from payhooks.gateways import GATEWAYS, title_of
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import Conflict, InvalidRequest
from payhooks.refunding import refunds
from payhooks.service import outbox

RECORD = """LEFT JOIN payhooks_payments c ON c.provider = p.provider
    AND c.payment_id = p.payment_id AND c.kind = 'payment_captured'
LEFT JOIN checkouts k ON k.cart_id = p.cart_id AND k.provider = p.provider"""
"""The core's record of payment ``p`` (``payhooks.intake.payments``), kept while a refund of it is
possible: its gateway order (Cashfree refunds name it), PayU's ``mihpayid``, what was paid;
and the shop's checkout of its cart, whose gateway order stands in for a payment the
one-statement first capture applied (``captures``: it writes no record)."""
ORDER = "coalesce(c.gateway_order_id, k.gateway_order_id)"
PAID = "coalesce(c.paid_paise, p.payment_amount_paise, p.amount_paise)"
"""What the customer paid for payment ``p``: the bound on its refunds, never the amount
compared with the cart (Cashfree's differ under an offer or a fee)."""
DISPUTED = """(SELECT coalesce(sum(d.lost_paise), 0)::bigint FROM payhooks_disputes d
    WHERE d.provider = p.provider AND d.payment_id = p.payment_id)"""
"""What lost disputes of payment ``p`` took back for the customer: given back already, never
refunded again (the core refuses it). From the disputes themselves, as the core's bound reads
them: its record's ``disputed_paise`` goes with the record, which the purge takes a year on."""
REFUNDABLE = f"{PAID} - {DISPUTED} - p.refunded_paise"
"""What is left to refund of payment ``p``: what it paid, less what lost disputes took back
and what refunds returned."""
TAKEN_BACK = "taken_back_by_dispute"
"""The flag of a payment flagged for a refund that lost disputes left nothing to refund of."""

DUE = f"""
SELECT p.provider, p.payment_id, {REFUNDABLE}, {PAID}, coalesce(c.currency, p.currency),
       p.cart_id, {ORDER}, c.attempt_id,
       (SELECT count(*) FROM payhooks_refunds r
        WHERE r.provider = p.provider AND r.payment_id = p.payment_id),
       p.created_at
FROM payments p {RECORD}
WHERE p.needs_refund AND p.provider = ANY(%(providers)s) AND 'duplicate_payment' = ANY(p.flags)
  AND p.refunded_paise = 0 AND p.amount_paise > 0 AND coalesce(p.currency, 'INR') ~ '^[A-Z]{{3}}$'
  AND {REFUNDABLE} > 0
  AND NOT EXISTS (SELECT 1 FROM payhooks_refunds r
                  WHERE r.provider = p.provider AND r.payment_id = p.payment_id
                    AND (r.state IN ('requested', 'sent', 'processed', 'cancelled')
                         OR r.settled_at > now() - %(wait)s))
  AND (SELECT count(*) FROM payhooks_refunds r
       WHERE r.provider = p.provider AND r.payment_id = p.payment_id) < %(tries)s
  AND (%(after)s::timestamptz IS NULL
       OR (p.created_at, p.provider, p.payment_id) > (%(after)s, %(provider)s, %(payment)s))
ORDER BY p.created_at, p.provider, p.payment_id LIMIT %(limit)s
"""
"""The due double payments after the one last read (``after``, ``provider``, ``payment``):
one refused every tick never takes the place of those after it."""
SCAN = 10
"""How many times ``limit`` due payments a tick reads, at most, looking for ``limit`` to ask."""
GIVEN_UP = """
SELECT p.provider, count(*) FROM payments p
WHERE p.needs_refund AND 'duplicate_payment' = ANY(p.flags)
  AND (SELECT count(*) FROM payhooks_refunds r
       WHERE r.provider = p.provider AND r.payment_id = p.payment_id
         AND r.state IN ('refused', 'failed')) >= %(tries)s
GROUP BY 1 ORDER BY 1
"""
"""Double payments the policy asked to refund ``TRIES`` times, each refused or failed: a
person's now."""
# The policy's double payments lost disputes left nothing of (the loss told before the
# payment's capture was applied: its report found no flag to clear).
ALL_TAKEN = f"""
SELECT p.provider, p.payment_id FROM payments p {RECORD}
WHERE p.needs_refund AND p.provider = ANY(%(providers)s) AND 'duplicate_payment' = ANY(p.flags)
  AND {DISPUTED} > 0 AND {REFUNDABLE} <= 0
LIMIT %(limit)s
"""
# One payment flagged for a refund, its flag cleared and marked when lost disputes left
# nothing of it; what it paid, what they took, what refunds returned.
CLEARED = f"""
WITH found AS (
    SELECT p.provider, p.payment_id, {PAID} AS paid, {DISPUTED} AS disputed
    FROM payments p LEFT JOIN payhooks_payments c ON c.provider = p.provider
        AND c.payment_id = p.payment_id AND c.kind = 'payment_captured'
    WHERE p.provider = %(provider)s AND p.payment_id = %(payment_id)s AND p.needs_refund
      AND {DISPUTED} > 0 AND {REFUNDABLE} <= 0
    FOR NO KEY UPDATE OF p
)
UPDATE payments p SET needs_refund = false, updated_at = now(),
    flags = CASE WHEN f.disputed < f.paid OR %(flag)s = ANY(p.flags) THEN p.flags
                 ELSE array_append(p.flags, %(flag)s) END
FROM found f
WHERE p.provider = f.provider AND p.payment_id = f.payment_id
RETURNING f.paid, f.disputed, p.refunded_paise
"""
REQUESTED_BY = "payhooks (double-payment policy)"
TRIES = 3
"""How many refunds of one double payment the policy asks for, in all."""
RETRY_WAIT = timedelta(minutes=10)
"""How long after a refund was refused or failed the policy asks again."""
log = logging.getLogger("payhooks.worker")


def key_of(payment_id: str, asked: int = 0) -> str:
    """The key of a payment's next refund when ``asked`` refunds of it were asked for before
    (each refused, failed or cancelled): the policy and the console's button take the same
    one, so both asking at once ask for one refund."""
    return f"double:{payment_id}" if asked == 0 else f"double:{payment_id}:{asked + 1}"


def given_up(conn: Connection) -> dict[str, int]:
    """Per gateway, the double payments the policy stopped asking to refund (``TRIES``)."""
    rows = conn.execute(GIVEN_UP, {"tries": TRIES}).fetchall()
    return {str(provider): int(count) for provider, count in rows}


def taken_back(conn: Connection, provider: str, payment_id: str) -> str | None:
    """Why a payment flagged for a refund needs none any more, when lost disputes left
    nothing of it: its flag cleared and marked ``TAKEN_BACK``, the operators told once, in
    the caller's transaction. None when something is left to refund, or no refund was due;
    None too when lost disputes took a part and refunds returned the rest: the flag cleared,
    refunded as any payment is, with no word of a take-back (there was none of the rest)."""
    params = {"provider": provider, "payment_id": payment_id, "flag": TAKEN_BACK}
    row = conn.execute(CLEARED, params).fetchone()
    if row is None:
        return None
    paid, disputed, refunded = (int(n) for n in row)
    if disputed < paid:
        return None
    returned = f" and refunds returned {refunded}" if refunded else ""
    why = (
        f"lost disputes took back {disputed} of the {paid} paise it paid{returned}, so nothing "
        "is left to refund"
    )
    name = TAKEN_BACK.replace("_", " ")
    outbox.enqueue(conn, outbox.alert(
        f"alert:{TAKEN_BACK}:{provider}:{payment_id}",
        f"Check payment: {name} for {title_of(provider)} payment {payment_id}",
        f"{title_of(provider)} payment {payment_id} was flagged for a refund, but {why}: the card "
        "network gave the customer that money back. No refund is due; please check it.",
        provider=provider, payment_id=payment_id, flag=TAKEN_BACK,
    ))  # fmt: skip
    return why


def request_due(conn: Connection, *, limit: int = 50) -> int:
    """An intent for each double payment not yet refunded, for what is left of it; how many
    were written. Each in a transaction of its own, keyed on the payment: two workers at once
    write one. One lost disputes left nothing of first has its flag cleared, and is said."""
    providers = [p.value for p, gateway in GATEWAYS.items() if gateway.sends_refunds]
    params = {"providers": providers, "limit": limit, "wait": RETRY_WAIT, "tries": TRIES}
    _clear_taken(conn, params)
    written = 0
    after: dict[str, object] = {"after": None, "provider": None, "payment": None}
    for _ in range(SCAN):
        rows = conn.execute(DUE, params | after).fetchall()
        for row in rows:
            written += _asked(conn, row)
            if written >= limit:
                return written
        if len(rows) < limit:
            break
        *_, last = rows
        after = {"after": last[-1], "provider": last[0], "payment": last[1]}
    return written


def _asked(conn: Connection, row: Sequence[Any]) -> bool:
    """One double payment's intent written, in a transaction of its own; False when it could
    not be (said), which holds back no other."""
    provider, payment_id, left, paid, currency, cart_id, order_ref, attempt, asked, _ = row
    try:
        with conn.transaction():
            refunds.request(
                conn, provider, payment_id, int(left), key=key_of(payment_id, int(asked)),
                captured_paise=int(paid), reason=f"double payment of cart {cart_id}",
                requested_by=REQUESTED_BY, currency=currency or "INR",
                gateway_order_id=order_ref, attempt_id=attempt,
            )  # fmt: skip
    except (InvalidRequest, Conflict) as exc:  # one odd payment holds back no other
        log.warning("double_payment_not_refunded",
                    extra={"provider": provider, "payment_id": payment_id,
                           "detail": str(exc)})  # fmt: skip
        return False
    except Exception as exc:  # a row the database refuses: this payment only, asked again
        log.exception("double_payment_not_refunded",
                      extra={"provider": provider, "payment_id": payment_id,
                             "detail": f"{type(exc).__name__}: {exc}"[:500]})  # fmt: skip
        return False
    return True


def _clear_taken(conn: Connection, params: dict[str, object]) -> None:
    for provider, payment_id in conn.execute(ALL_TAKEN, params).fetchall():
        said = {"provider": provider, "payment_id": payment_id}
        try:
            with conn.transaction():
                why = taken_back(conn, provider, payment_id)
        except Exception as exc:  # a row the database refuses: this payment only, next tick
            log.exception(
                "double_payment_not_refunded",
                extra={**said, "detail": f"{type(exc).__name__}: {exc}"[:500]},
            )
            continue
        if why is not None:
            log.warning("double_payment_taken_back", extra={**said, "detail": why})


__all__ = [
    "DISPUTED",
    "ORDER",
    "PAID",
    "RECORD",
    "REFUNDABLE",
    "REQUESTED_BY",
    "RETRY_WAIT",
    "SCAN",
    "TAKEN_BACK",
    "TRIES",
    "given_up",
    "key_of",
    "request_due",
    "taken_back",
]
