"""Refunds sent to the gateway exactly once: an intent, then a call.

Asking for a refund writes an intent in the caller's transaction (``request``), with a stable
idempotency key made from the caller's own key: asking again with the same key is the same
intent, and one key never stands for two refunds. A sender (``payhooks.refunds_sending``, the
``refunds`` extra: httpx) then makes the gateway call with that key and the same body,
retrying timeouts, 409s and 5xx until the gateway answers, and records the gateway's refund
id. Each gateway refunds a key once (Razorpay's ``X-Refund-Idempotency``, Cashfree's
``refund_id``, PayU's token id: docs/providers.md, "Refunds"), so a call that timed out after
the gateway acted, an answer lost, a sender killed mid-call or two senders at once refund the
customer once. The refund webhook (or its status) closes the intent: by the gateway's refund
id, or by the intent's own key where the gateway's report carries it back, so an intent whose
answer was lost is the gateway's as soon as its webhook comes (``closing``).

The sum of a payment's live intents never exceeds what it captured, at any isolation level:
``request`` first updates the payment's row in ``payhooks_refund_payments`` (made on its first
refund), then sums. Intents racing for one payment meet on that row and are counted one after
the other: at READ COMMITTED the second waits and then sees the first; at REPEATABLE READ or
SERIALIZABLE, whose snapshot could not see the first, the second's serialization fails
(``psycopg.errors.SerializationFailure``, retried by the caller as every caller at those levels
must), so no stale snapshot is ever summed.

An intent stuck ``requested`` (a gateway that keeps failing its call) has a way out: a person
cancels it (``cancel``, ``payhooks refunds cancel``, the consoles, the shop API), saying who
and why, unless a sender holds it mid-call or a report of the gateway's named it (no longer
``requested``). A cancelled intent is never sent and no longer counts against what the
payment may refund, until a report of the gateway's says it made the refund after all.

Statements and steps written once with no driver, as the claim's are: ``request`` and
``request_async`` drive the same steps.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Required, TypedDict, Unpack

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from payhooks.events import CONTROL, MAX_PAISE, Event, EventKind, Provider, is_text
from payhooks.gateways import GATEWAYS
from payhooks.gateways._refunds import Refund, RefundState
from payhooks.plumbing import db
from payhooks.plumbing.db import AsyncConnection, Connection, Statement, Steps, run, run_async
from payhooks.plumbing.errors import Conflict, InvalidRequest, NotFound

KEY_PREFIX = "ph"
KEY_CHARS = 22
"""``ph`` and 20 hex digits: within every gateway's rule (Razorpay: 10+ of letters, digits,
``-`` and ``_``; Cashfree's ``refund_id``: up to 40 of letters, digits, ``-`` and ``_``; PayU's
token id: up to 23 characters)."""
MAX_TEXT_CHARS = 255
_CURRENCY = re.compile(r"[A-Z]{3}")
LEASE = timedelta(minutes=2)
"""How long a sender holds an intent it is sending, at least: longer than its calls may take,
so a second sender, or a cancel, meets it only after the first has given up or died."""
CALLS_PER_SEND = 5
"""The most calls one intent's send or check makes, each within the client's deadline: PayU's
``check_payment`` and ``verify_payment``, then a lookup, the post and a second lookup."""


def lease_for(call_s: float) -> timedelta:
    """The hold on an intent whose calls each take up to ``call_s`` seconds: ``LEASE``, or twice
    what its calls may take together when that is longer (a deadline set above the default:
    a cancel landing mid-call would free an amount the gateway is refunding)."""
    return max(LEASE, timedelta(seconds=2 * CALLS_PER_SEND * call_s))


LIVE = (RefundState.REQUESTED, RefundState.SENT, RefundState.PROCESSED)
"""The states that count against what a payment may still refund."""


class RefundTooLarge(InvalidRequest):
    """More than the payment captured minus what its live refunds and lost disputes already
    take."""

    def __init__(self, payment_id: str, asked: int, refundable: int) -> None:
        super().__init__(
            f"payment {payment_id}: a refund of {asked} paise is more than the {refundable} "
            "paise still refundable (captured, less live refunds and disputes lost)"
        )
        self.asked = asked
        self.refundable = refundable


def idempotency_key(gateway: Provider | str, payment_id: str, key: str) -> str:
    """The key the gateway dedupes on, made from the caller's ``key``: the same for the same
    payment and key, another for anything else."""
    digest = hashlib.sha256(f"{Provider(gateway).value}:{payment_id}:{key}".encode()).hexdigest()
    return KEY_PREFIX + digest[: KEY_CHARS - len(KEY_PREFIX)]


REPORTED_KEY = "gateway:"
"""The key of a refund the gateway reported that no intent knew as its own (``REPORTED``)."""


COLUMNS = """provider, idempotency_key, payment_id, gateway_order_id, amount_paise, currency,
       captured_paise, reason, requested_by, state, gateway_refund_id, attempts, last_error,
       requested_at, sent_at, settled_at, attempt_id, cancelled_by, cancel_reason"""
LOCK = """
INSERT INTO payhooks_refund_payments AS p (provider, payment_id) VALUES (%s, %s)
ON CONFLICT (provider, payment_id) DO UPDATE SET asked = p.asked + 1, asked_at = now()
"""
"""The payment's row, written before its intents are summed: held to the transaction's end,
and a serialization failure for a snapshot that cannot see the last writer's intent."""
# The payment's turn (core 0027), taken first, as a dispute's report and a new record of the
# payment take it: a loss reported meanwhile is in what the payment's record says was paid
# (PAID), read after it; a report coming after waits for this refund's transaction to end.
TURN = "SELECT payhooks_lock_payment(%s, %s)"
EXISTING = f"SELECT {COLUMNS} FROM payhooks_refunds WHERE provider = %s AND idempotency_key = %s"
_LIVE = f"""FROM payhooks_refunds r
WHERE provider = %(provider)s AND payment_id = %(payment_id)s AND state = ANY(%(live)s)
  AND NOT (starts_with(idempotency_key, '{REPORTED_KEY}')
           AND EXISTS (SELECT 1 FROM payhooks_refunds o
                       WHERE o.provider = r.provider AND o.gateway_refund_id = r.gateway_refund_id
                         AND o.idempotency_key <> r.idempotency_key))"""
TAKEN = f"SELECT coalesce(sum(amount_paise), 0) {_LIVE}"
"""What a payment's live refunds take: its intents and the refunds its gateway reported made
outside them (a dashboard's, the gateway's own auto-refund), one reported before its intent
learnt its refund id counted once, as the intent."""
TAKEN_FIRST = f"""
SELECT coalesce(sum(amount_paise) FILTER (WHERE NOT later OR attempts > 0), 0),
       coalesce(sum(amount_paise), 0)
FROM (SELECT amount_paise, attempts,
             state = 'requested' AND (requested_at, idempotency_key) > (%(requested_at)s, %(key)s)
             AS later
      {_LIVE} AND idempotency_key <> %(key)s) live
"""
"""What goes before an intent on its payment: ``TAKEN`` less the intent and less the intents
asked after it that no call was made for yet (the one asked first is sent first; one a call
was made for may have been refunded, its answer lost); and all that the others take."""
INSERT = f"""
INSERT INTO payhooks_refunds (provider, idempotency_key, payment_id, gateway_order_id,
    amount_paise, currency, captured_paise, reason, requested_by, attempt_id, lost_paise,
    requested_at)
VALUES (%(provider)s, %(idempotency_key)s, %(payment_id)s, %(gateway_order_id)s,
    %(amount_paise)s, %(currency)s, %(captured_paise)s, %(reason)s, %(requested_by)s,
    %(attempt_id)s, %(lost_paise)s, clock_timestamp())
RETURNING {COLUMNS}
"""


def intent(
    gateway: Provider | str,
    payment_id: str,
    amount_paise: int,
    *,
    key: str,
    captured_paise: int,
    reason: str,
    requested_by: str,
    currency: str = "INR",
    gateway_order_id: str | None = None,
    attempt_id: str | None = None,
) -> Refund:
    """A refund as asked, checked: what ``request`` writes."""
    provider = _provider(gateway)
    if not GATEWAYS[provider].sends_refunds:
        sent = ", ".join(p.value for p, g in GATEWAYS.items() if g.sends_refunds)
        raise InvalidRequest(f"payhooks sends no refunds to {provider.value} yet (only {sent})")
    for name, value in (("payment_id", payment_id), ("key", key), ("reason", reason),
                        ("requested_by", requested_by)):  # fmt: skip
        _text(name, value)
    for name, named in (("gateway_order_id", gateway_order_id), ("attempt_id", attempt_id)):
        if named is not None:
            _text(name, named)
    for name, paise in (("amount_paise", amount_paise), ("captured_paise", captured_paise)):
        if isinstance(paise, bool) or not isinstance(paise, int) or not 0 < paise <= MAX_PAISE:
            raise InvalidRequest(f"{name} is a whole number of paise from 1 to {MAX_PAISE}")
    if not isinstance(currency, str) or _CURRENCY.fullmatch(currency) is None:
        raise InvalidRequest("currency is three capital letters (INR)")
    return Refund(
        provider=provider,
        idempotency_key=idempotency_key(provider, payment_id, key),
        payment_id=payment_id,
        gateway_order_id=gateway_order_id,
        amount_paise=amount_paise,
        currency=currency,
        captured_paise=captured_paise,
        reason=reason,
        requested_by=requested_by,
        attempt_id=attempt_id,
    )


def _provider(gateway: Provider | str) -> Provider:
    try:
        return Provider(gateway)
    except ValueError:
        raise InvalidRequest(f"no gateway named {gateway!r}") from None


def _text(name: str, value: object) -> None:
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > MAX_TEXT_CHARS
        or not is_text(value)
        or CONTROL.search(value)
    ):
        raise InvalidRequest(f"{name} is 1 to {MAX_TEXT_CHARS} characters of plain text")


# What the customer paid, by payhooks' own record of the payment (its capture's first), less
# what lost disputes already took back for the customer: a caller's captured figure above it
# never lets a refund past it. With no record (a payment the handler answered ignored, a
# second payment of a paid order, keeps none), what its lost disputes took back, from the
# disputes themselves, comes off the caller's figure.
RECORDED = """(SELECT paid_paise - disputed_paise FROM payhooks_payments
        WHERE provider = %(provider)s AND payment_id = %(payment_id)s
          AND paid_paise IS NOT NULL
        ORDER BY kind = 'payment_captured' DESC
        LIMIT 1)"""
LOST = """(SELECT coalesce(sum(lost_paise), 0) FROM payhooks_disputes
        WHERE provider = %(provider)s AND payment_id = %(payment_id)s)"""
PAID = f"""
SELECT {RECORDED},
       {LOST},
       (SELECT currency FROM payhooks_payments
        WHERE provider = %(provider)s AND payment_id = %(payment_id)s AND currency IS NOT NULL
        ORDER BY kind = 'payment_captured' DESC
        LIMIT 1)
"""


# What payhooks' record of the payment names of it (``payhooks.intake.payments.find``'s row,
# its capture's first): its order and, where payhooks keys it by another id, the gateway's own.
IDENTITIES = """
SELECT gateway_order_id, attempt_id FROM payhooks_payments
WHERE provider = %s AND payment_id = %s
ORDER BY kind = 'payment_captured' DESC
LIMIT 1
"""


def requesting(asked: Refund) -> Steps[Refund]:
    """Write ``asked`` unless its key is already an intent: the same refund is that intent,
    another under the key a ``Conflict``. The cap is the smaller of the caller's
    ``captured_paise`` and the payment's record of what was paid, when payhooks keeps one.
    A PayU refund takes what it does not name of its payment's ids from that record
    (``_payu_named``), any other its order (``_order_named``). Inside the caller's
    transaction (the lock is held to its end)."""
    provider = asked.provider.value
    yield Statement(sql=TURN, params=(provider, asked.payment_id), reads=False)
    yield Statement(sql=LOCK, params=(provider, asked.payment_id), reads=False)
    row = yield Statement(sql=EXISTING, params=(provider, asked.idempotency_key))
    if row is not None:
        found = _refund(row)
        if (found.payment_id, found.amount_paise, found.currency) != (
            asked.payment_id, asked.amount_paise, asked.currency,
        ):  # fmt: skip
            raise Conflict(
                f"refund key already names a refund of {found.amount_paise} paise of payment "
                f"{found.payment_id}: one key never stands for two refunds"
            )
        return found
    payu = asked.provider is Provider.PAYU
    if asked.gateway_order_id is None or (payu and asked.attempt_id is None):
        # what it does not name, from the payment's record: what its refund call needs, and
        # the order its processed refund names to the app's handlers, as its webhook would
        record = yield Statement(sql=IDENTITIES, params=(provider, asked.payment_id))
        asked = (_payu_named if payu else _order_named)(asked, record)
    live = {"provider": provider, "payment_id": asked.payment_id, "live": [s.value for s in LIVE]}
    taken = yield Statement(sql=TAKEN, params=live)
    paid = yield Statement(sql=PAID, params={"provider": provider, "payment_id": asked.payment_id})
    assert paid is not None
    recorded, lost, currency = paid
    if currency is not None and currency != asked.currency:  # no refund call names one
        raise InvalidRequest(
            f"payment {asked.payment_id} was paid in {currency}, not {asked.currency}: a refund "
            "is in its payment's currency"
        )
    captured = min(asked.captured_paise, int(recorded) if recorded is not None else
                   asked.captured_paise - int(lost))  # fmt: skip
    refundable = captured - int(taken[0] if taken else 0)
    if asked.amount_paise > refundable:
        raise RefundTooLarge(asked.payment_id, asked.amount_paise, max(refundable, 0))
    params = {name: getattr(asked, name) for name in _INSERTED} | {
        "captured_paise": captured, "lost_paise": int(lost),
    }  # fmt: skip
    inserted = yield Statement(sql=INSERT, params={**params, "provider": provider})
    assert inserted is not None
    return _refund(inserted)


def _order_named(asked: Refund, record: Any) -> Refund:
    """A refund naming no order: the order payhooks' record of the payment names. With no
    record naming one, a refund of a gateway that refunds under the order (Cashfree's) is
    refused, saying so; any other goes without."""
    order = None if record is None else record[0]
    if order is None and GATEWAYS[asked.provider].refund_needs_order:
        title = GATEWAYS[asked.provider].title
        raise InvalidRequest(
            f"a {title} refund names its order (gateway_order_id), and payhooks keeps no "
            f"record of payment {asked.payment_id} naming it"
        )
    return replace(asked, gateway_order_id=order)


def _payu_named(asked: Refund, record: Any) -> Refund:
    """A PayU refund naming what PayU's refund call needs. PayU refunds a payment by its
    ``mihpayid``, and payhooks keys a PayU payment by its txnid (its event's ``payment_id``):
    what the caller did not name (``gateway_order_id``, the txnid; ``attempt_id``, the
    ``mihpayid``) is taken from payhooks' record of the payment (``record``: its order and
    attempt, or None when it keeps none). A refund naming neither even so is one whose
    ``mihpayid`` payhooks cannot know: refused now, saying what to pass, never an intent the
    sender would refuse later."""
    order, attempt = (None, None) if record is None else record
    named = replace(asked, gateway_order_id=asked.gateway_order_id or order,
                    attempt_id=asked.attempt_id or attempt)  # fmt: skip
    if named.gateway_order_id is None and named.attempt_id is None:
        raise InvalidRequest(
            f"PayU refunds a payment by its mihpayid, and payhooks keeps no record naming the "
            f"mihpayid or the txnid of payment {asked.payment_id}: pass its txnid as "
            "gateway_order_id (PayU's verify_payment then names its mihpayid), or its mihpayid "
            "as attempt_id"
        )
    return named


_INSERTED = ("idempotency_key", "payment_id", "gateway_order_id", "amount_paise", "currency",
             "captured_paise", "reason", "requested_by", "attempt_id")  # fmt: skip


class RefundTerms(TypedDict, total=False):
    """The keywords of a refund asked for, past its gateway, payment and amount: ``intent``'s,
    which ``request`` and ``request_async`` take as they are (``intent`` names the defaults)."""

    key: Required[str]
    captured_paise: Required[int]
    reason: Required[str]
    requested_by: Required[str]
    currency: str
    gateway_order_id: str | None
    attempt_id: str | None


def request(
    conn: Connection,
    gateway: Provider | str,
    payment_id: str,
    amount_paise: int,
    **terms: Unpack[RefundTerms],
) -> Refund:
    """Ask for a refund of ``amount_paise`` of ``payment_id``, in the caller's transaction: it
    is sent once that commits. ``payment_id`` is the payment as payhooks' events name it
    (``Event.payment_id``): the gateway's payment id, PayU's txnid (a second payment of a txnid
    is named by its ``mihpayid``, as payhooks records it). ``key`` is yours (an order's refund
    number, a support ticket): the same key is the same refund. ``captured_paise`` is what the
    customer paid for the payment (Cashfree's ``payment_amount``, not the order amount an offer
    or a fee changed); ``gateway_order_id`` the order it belongs to (Cashfree refunds under the
    order: one not named is taken from the payment's record; PayU's is the txnid);
    ``attempt_id`` PayU's ``mihpayid`` when ``payment_id`` is its txnid.
    ``payhooks.intake.payments.find`` reads all three from the payment's record; when that
    record holds what was paid, the smaller of it (less what lost disputes took back:
    ``disputed_paise``) and ``captured_paise`` is the bound. Past ``amount_paise`` each is a
    keyword (``RefundTerms``); ``currency`` is ``INR`` unless named.

    PayU refunds a payment by its ``mihpayid``: a PayU refund asked by the txnid alone takes
    the order and the ``mihpayid`` it does not name from the payment's record
    (``payhooks_payments``: a post's ``mihpayid``, or the one PayU's ``verify_payment`` named
    when reconciliation recorded the payment; for a record naming none, one reconciliation
    made before it kept them, the sender asks ``verify_payment`` for the txnid's). One whose
    ``mihpayid`` payhooks cannot know (no record, and neither named) is refused here, saying
    to pass the txnid as ``gateway_order_id`` or the ``mihpayid`` as ``attempt_id``.

    Raises ``RefundTooLarge`` past what is still refundable, ``Conflict`` for a key already
    used for another refund, ``InvalidRequest`` for a refund payhooks cannot send (PhonePe's
    and Juspay's, a Cashfree one naming no order that payhooks' record does not name either, a
    PayU one as above, a bad figure)."""
    asked = intent(gateway, payment_id, amount_paise, **terms)
    with conn.transaction():  # a savepoint in the caller's: the lock lasts to its end
        return run(conn, requesting(asked))


async def request_async(
    conn: AsyncConnection,
    gateway: Provider | str,
    payment_id: str,
    amount_paise: int,
    **terms: Unpack[RefundTerms],
) -> Refund:
    """``request`` on an async connection."""
    asked = intent(gateway, payment_id, amount_paise, **terms)
    async with conn.transaction():
        return await run_async(conn, requesting(asked))


OF_PAYMENT = f"""
SELECT {COLUMNS} FROM payhooks_refunds WHERE provider = %s AND payment_id = %s
ORDER BY requested_at, idempotency_key
"""


ASKED = """
SELECT amount_paise FROM payhooks_refunds WHERE provider = %s AND idempotency_key = %s
"""


def asked_paise(conn: Connection, gateway: Provider | str, key: str) -> int | None:
    """What the intent under ``key`` (its idempotency key, the gateway's token for its
    refund) asked, whatever became of it; None when payhooks has no such intent."""
    row = conn.execute(ASKED, (_provider(gateway).value, key)).fetchone()
    return None if row is None else int(row[0])


def of_payment(conn: Connection, gateway: Provider | str, payment_id: str) -> list[Refund]:
    """A payment's refund intents, oldest first."""
    rows = db.query(conn, OF_PAYMENT, (Provider(gateway).value, payment_id)).fetchall()
    return [_refund(row) for row in rows]


# --- what the sender runs: lease, and record what the gateway said --------------------------

_LEASED_COLUMNS = ", ".join("r." + c.strip() for c in COLUMNS.split(","))
"""``COLUMNS`` of the row a lease updates (``r``), as its ``RETURNING`` names them."""


def _due(state: RefundState) -> str:
    """``provider``'s intents in ``state`` that are due, oldest due first (``limit`` of them,
    none another holds, none a pass set aside)."""
    return f"""
    SELECT provider, idempotency_key FROM payhooks_refunds
    WHERE state = '{state.value}' AND provider = %(provider)s AND next_attempt_at <= now()
      AND idempotency_key <> ALL(%(aside)s)
    ORDER BY next_attempt_at LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED"""


def _lease(state: RefundState, *, also: str = "") -> str:
    """The statement holding the intents ``_due`` names for ``lease``, setting ``also``
    besides."""
    return f"""
WITH due AS ({_due(state)}
)
UPDATE payhooks_refunds r
SET next_attempt_at = now() + %(lease)s{also}
FROM due WHERE r.provider = due.provider AND r.idempotency_key = due.idempotency_key
RETURNING {_LEASED_COLUMNS}, r.leased_until
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Leased(Refund):
    """An intent as a sender's lease handed it out, with the lease's own mark
    (``leased_until``): its call is counted only against it (``CALLING``), so a sender whose
    lease ran out, and was another sender's since, never calls on that other's."""

    leased_until: datetime


class LeaseRefused(Exception):
    """The database refused to hold an intent (an app's trigger or constraint on
    ``payhooks_refunds``): the sender sets it aside for its pass, naming it, and goes on."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key, self.reason = key, reason


LEASED = _lease(RefundState.REQUESTED, also=", leased_until = now() + %(lease)s")
"""The due intents to send, each held from a cancel (``leased_until``: ``CANCEL``) while its
sender weighs it and calls; its call is counted when it is weighed (``CALLING``)."""
CALLING = f"""
UPDATE payhooks_refunds
SET attempts = attempts + 1, leased_until = clock_timestamp() + %(lease)s,
    next_attempt_at = clock_timestamp() + %(lease)s
WHERE provider = %(provider)s AND idempotency_key = %(key)s AND state = 'requested'
  AND leased_until = %(held)s AND leased_until > clock_timestamp()
RETURNING {COLUMNS}, leased_until
"""
"""The intent's call counted, its hold renewed from this moment for the call: only under this
sender's own lease (``Leased``), while it holds (one that ran out may be a cancel's, or another
sender's, by now)."""
WEIGH_WAIT = timedelta(seconds=5)
"""The longest the weighing waits for the payment's turn or the intent's row (a quarter of a
shorter lease): a payment that busy is asked about again later."""
BOUNDED = """
SELECT set_config('lock_timeout', %(wait)s, true),
       set_config('statement_timeout', %(statement)s, true)
"""
"""The weighing's bound on its waits, its own transaction's alone (a session's statement
timeout, the reference service's 3 s, would otherwise fire before it, in other words)."""


def _owning(update: str) -> str:
    """``update`` of an intent, learning its gateway refund id, and the row a report of that
    refund left before the intent knew it (``REPORTED``) gone: one refund, one row."""
    return f"""
WITH mine AS ({update.strip()}
    RETURNING provider, gateway_refund_id)
DELETE FROM payhooks_refunds r USING mine
WHERE r.provider = mine.provider AND r.idempotency_key = '{REPORTED_KEY}' || mine.gateway_refund_id
"""


ACCEPTED = _owning("""
UPDATE payhooks_refunds
SET state = %(state)s, gateway_refund_id = %(refund_id)s, sent_at = coalesce(sent_at, now()),
    settled_at = CASE WHEN %(state)s = 'processed' THEN now() END, last_error = NULL,
    next_attempt_at = now() + %(check)s, leased_until = NULL
WHERE provider = %(provider)s AND idempotency_key = %(key)s
  AND state IN ('requested', 'cancelled')
""")
"""A cancelled intent the gateway says it has is the gateway's: sent, and counted again (a
cancel whose sender outlived its lease; the person's name and reason are kept)."""
_OWN = """(leased_until = %(held)s OR (%(held)s::timestamptz IS NULL
       AND (leased_until IS NULL OR leased_until <= clock_timestamp())))"""
"""A sender's write of an intent it leased (``Leased``): only under its own lease, never
another sender's that took the intent after its own ran out (clearing that one's hold mid-call
would let a cancel free what its call refunds); anyone else's (a plain ``Refund``) only while
no sender holds it."""
STILL_REQUESTED = """
SELECT 1 FROM payhooks_refunds
WHERE provider = %(provider)s AND idempotency_key = %(key)s AND state = 'requested'
"""
REFUSED = f"""
UPDATE payhooks_refunds
SET state = 'refused', last_error = %(error)s, settled_at = now(), leased_until = NULL
WHERE provider = %(provider)s AND idempotency_key = %(key)s AND state = 'requested' AND {_OWN}
"""
AGAIN = f"""
UPDATE payhooks_refunds
SET next_attempt_at = now() + %(wait)s, last_error = %(error)s, leased_until = NULL
WHERE provider = %(provider)s AND idempotency_key = %(key)s AND state = 'requested' AND {_OWN}
"""


UNSETTLED = _lease(RefundState.SENT)
"""The same lease over the intents the gateway accepted and has not said processed: each
asked about in turn (``check_due``), never by two checkers at once."""
SETTLED = """
UPDATE payhooks_refunds SET state = %(state)s, settled_at = now(), last_error = %(error)s
WHERE provider = %(provider)s AND idempotency_key = %(key)s AND state = 'sent'
"""
UNSETTLED_AGAIN = """
UPDATE payhooks_refunds
SET next_attempt_at = now() + greatest(
        least(greatest((now() - sent_at) / 4, %(first)s), %(most)s), %(asked)s),
    last_error = %(error)s
WHERE provider = %(provider)s AND idempotency_key = %(key)s AND state = 'sent'
"""
FIRST_CHECK = timedelta(minutes=1)
MOST_BETWEEN_CHECKS = timedelta(hours=6)
"""A refund the gateway accepted is asked about a minute after, then at a quarter of its
age, at most every six hours: Razorpay's normal refunds take 5 to 7 days, and a refund
webhook closes most intents long before."""


def leased(
    conn: Connection,
    provider: Provider,
    limit: int,
    hold: timedelta = LEASE,
    aside: Iterable[str] = (),
) -> list[Refund]:
    """The due intents of ``provider``, each held for ``hold`` (``lease_for`` its calls),
    but those keyed in ``aside``."""
    return _leasing(conn, LEASED, RefundState.REQUESTED, provider, limit, hold, aside)


def unsettled(
    conn: Connection,
    provider: Provider,
    limit: int,
    hold: timedelta = LEASE,
    aside: Iterable[str] = (),
) -> list[Refund]:
    """The sent intents of ``provider`` due to be asked about, each held for ``hold``."""
    return _leasing(conn, UNSETTLED, RefundState.SENT, provider, limit, hold, aside)


def _leasing(
    conn: Connection,
    lease: str,
    state: RefundState,
    provider: Provider,
    limit: int,
    hold: timedelta,
    aside: Iterable[str],
) -> list[Refund]:
    """What ``lease`` (``LEASED``, ``UNSETTLED``) holds of ``provider``'s intents for ``hold``;
    ``LeaseRefused`` naming the first due when the database refuses to hold it."""
    params = {"provider": provider.value, "limit": limit, "lease": hold, "aside": list(aside)}
    try:
        with conn.transaction():
            found = db.query(conn, lease, params).fetchall()
    except psycopg.Error as exc:
        if not db.row_refused(conn, exc):
            raise
        first = db.query(conn, _due(state), {**params, "limit": 1}).fetchone()
        if first is None:  # taken meanwhile: the next lease meets whatever refused
            raise
        raise LeaseRefused(str(first[1]), db.first_line(exc)[:200]) from exc
    return [_leased(row) for row in found]


def _leased(row: Any) -> Refund:
    """An intent a lease returned (``COLUMNS``, then its ``leased_until``): ``Leased`` when the
    lease held it for a call."""
    refund, until = _refund(row[:-1]), row[-1]
    if until is None:
        return refund
    fields = {name: getattr(refund, name) for name in refund.__dataclass_fields__}
    return Leased(**fields, leased_until=until)


def accepted(conn: Connection, refund: Refund, gateway_refund_id: str, *, processed: bool) -> None:
    """The gateway took the refund under this id: ``sent``, or ``processed`` when it
    says the money already went back."""
    state = RefundState.PROCESSED if processed else RefundState.SENT
    conn.execute(ACCEPTED, {**_keyed(refund), "state": state.value,
                            "refund_id": gateway_refund_id, "check": FIRST_CHECK})  # fmt: skip


def settled(conn: Connection, refund: Refund, *, processed: bool, error: str | None = None) -> None:
    """A sent intent closed by what the gateway says of it: processed (the money went back) or
    failed (none went; its amount is free again)."""
    state = RefundState.PROCESSED if processed else RefundState.FAILED
    conn.execute(SETTLED, {**_keyed(refund), "state": state.value, "error": error})


def unsettled_again(
    conn: Connection, refund: Refund, error: str | None = None, *, asked: timedelta = timedelta()
) -> bool:
    """A sent intent the gateway has not settled yet, asked about again later: no sooner than
    ``asked`` (what a gateway's 429 asked for). False when it is settled already (its
    webhook)."""
    return conn.execute(UNSETTLED_AGAIN, {**_keyed(refund), "error": error, "first": FIRST_CHECK,
                                          "most": MOST_BETWEEN_CHECKS, "asked": asked},
                        ).rowcount > 0  # fmt: skip


# What a payment's record says the customer paid less its lost disputes now, and, for a payment
# payhooks keeps no record of, what its lost disputes took back beyond what they had taken when
# the intent was written (its bound took those already: core 0040).
PAID_NOW = f"""
SELECT {RECORDED},
       {LOST},
       (SELECT lost_paise FROM payhooks_refunds
        WHERE provider = %(provider)s AND idempotency_key = %(key)s)
"""


@dataclass(frozen=True, slots=True)
class Room:
    """What a payment may still refund for an intent (``room_now``): ``left``, beside the live
    refunds that go before it; ``unheld``, what no other live refund of it holds (the most a
    new intent could ask for now)."""

    left: int
    unheld: int


def refundable_now(conn: Connection, refund: Refund) -> int:
    """``room_now(conn, refund).left``."""
    return room_now(conn, refund).left


def room_now(conn: Connection, refund: Refund) -> Room:
    """What may still be refunded of ``refund``'s payment beside the live refunds that go
    before it (sent, reported, asked before it, or asked after it and called for: the intent
    asked first goes first), read
    again as the sender is about to call (``request`` bounded the intent when it was written):
    a chargeback lost since then gave the customer part of the payment back already, and a
    refund made outside payhooks (the dashboard's, the gateway's own) took its share. With no
    record of the payment, what its lost disputes took back beyond what they had taken when
    the intent was written (and its bound took) counts against it; an intent written before
    payhooks kept that (core 0040) counts no loss anew (``TAKEN_FIRST``)."""
    provider = refund.provider.value
    params = {"provider": provider, "payment_id": refund.payment_id,
              "live": [s.value for s in LIVE], "key": refund.idempotency_key,
              "requested_at": refund.requested_at}  # fmt: skip
    row = db.query(conn, TAKEN_FIRST, params).fetchone()
    before, others = (int(row[0]), int(row[1])) if row else (0, 0)
    paid = db.query(conn, PAID_NOW, params).fetchone()
    assert paid is not None
    recorded, lost, lost_when_asked = paid
    if recorded is not None:
        captured = min(refund.captured_paise, int(recorded))
    else:  # its bound took the losses of then: only what more was lost since
        then = int(lost) if lost_when_asked is None else int(lost_when_asked)
        captured = refund.captured_paise - max(int(lost) - then, 0)
    return Room(left=max(captured - before, 0), unheld=max(captured - others, 0))


@dataclass(frozen=True, slots=True)
class Weighed:
    """A leased intent weighed (``weighed``): its payment's ``room``, the intent as it is now
    (``refund``: None when it is gone), and whether its call was counted (``calling``)."""

    room: Room
    refund: Refund | None
    calling: bool


class PaymentBusy(Exception):
    """The payment's turn, or the intent's row, was held longer than a sender waits for it (a
    long transaction of the app's asking for a refund of it, say): asked again once its lease
    runs out."""

    def __init__(self, refund: Refund, waited: timedelta) -> None:
        super().__init__(
            f"waited {waited.total_seconds():g} s for payment {refund.payment_id}'s turn or "
            "the intent's row: another transaction held it; asked again after its lease"
        )
        self.refund = refund


def weighed(conn: Connection, refund: Refund, hold: timedelta = LEASE) -> Weighed:
    """The leased ``refund`` (``Leased``) weighed against what its payment has left
    (``room_now``) and, when it fits, counted called for (``attempts``) and held ``hold`` from
    then for its call, in one transaction holding the payment's turn (``TURN``): two senders
    each holding one of a payment's intents weigh one after the other, the second seeing the
    first's call (each counting the other's lease as a call refused both). The transaction
    reads committed whatever the database's default (its snapshot taken after the turn is
    had), and its waits for a lock are bounded well within the lease (``PaymentBusy``): a
    lease run out while waiting would let a cancel free what the call then refunds; one that
    ran out all the same, or is another sender's now, is not counted. On a connection already
    in a transaction (not payhooks' own), that transaction's level and bounds stand."""
    waited = min(WEIGH_WAIT, hold / 4)
    ms = int(waited.total_seconds() * 1000)
    own = conn.info.transaction_status is TransactionStatus.IDLE
    keyed = _keyed(refund)  # its lease's mark among them
    try:
        with _read_committed(conn) if own else contextlib.nullcontext(), conn.transaction():
            if own:
                conn.execute(BOUNDED, {"wait": f"{ms}ms", "statement": f"{ms + 1000}ms"})
            conn.execute(TURN, (refund.provider.value, refund.payment_id))
            room = room_now(conn, refund)
            if room.left >= refund.amount_paise:
                params = {**keyed, "lease": hold}
                if (row := db.query(conn, CALLING, params).fetchone()) is not None:
                    return Weighed(room=room, refund=_leased(row), calling=True)
            found = db.query(conn, EXISTING, (refund.provider.value, refund.idempotency_key))
            row = found.fetchone()
    except (pg_errors.LockNotAvailable, pg_errors.QueryCanceled) as exc:
        raise PaymentBusy(refund, waited) from exc
    if row is None:
        return Weighed(room=room, refund=None, calling=False)
    return Weighed(room=room, refund=_leased((*row, keyed["held"])), calling=False)


@contextlib.contextmanager
def _read_committed(conn: Connection) -> Iterator[None]:
    """The transaction begun inside begins ``READ COMMITTED`` (``BEGIN ISOLATION LEVEL``, as
    psycopg writes it: a pooler's session settings may run a query right after ``BEGIN``, too
    late for ``SET TRANSACTION``); the connection's own level back after it."""
    before = conn.isolation_level
    conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
    try:
        yield
    finally:
        if not (conn.closed or conn.broken):  # a connection lost keeps its own error
            conn.isolation_level = before


def refused(conn: Connection, refund: Refund, error: str) -> bool:
    """The gateway refused the refund: closed with its words, the amount refundable again;
    False when it was not written (past ``requested``, or leased by another sender now)."""
    return conn.execute(REFUSED, {**_keyed(refund), "error": error}).rowcount > 0


def held(conn: Connection, refund: Refund, wait: timedelta, error: str) -> bool:
    """The refund held back, not called (``sending._beyond``): asked about again after
    ``wait``, saying why (``again``)."""
    return again(conn, refund, wait, error)


def again(conn: Connection, refund: Refund, wait: timedelta, error: str) -> bool:
    """The refund is asked again after ``wait``, under the same key (a timeout, a 5xx);
    False when there is nothing to ask again: the intent is past ``requested`` already (its
    refund's webhook closed it while the call's answer was lost)."""
    return conn.execute(AGAIN, {**_keyed(refund), "wait": wait, "error": error}).rowcount > 0


def still_requested(conn: Connection, refund: Refund) -> bool:
    """Whether the intent is still to be sent (``requested``), whoever holds it now."""
    return db.query(conn, STILL_REQUESTED, _keyed(refund)).fetchone() is not None


def _keyed(refund: Refund) -> dict[str, object]:
    """The intent's own key, as the statements above name it, and the lease it is held under
    when a sender's (``_OWN``)."""
    held = refund.leased_until if isinstance(refund, Leased) else None
    return {"provider": refund.provider.value, "key": refund.idempotency_key, "held": held}


NOT_TAKEN = "processed at the gateway; not yet taken by the app"
"""How a sent intent's error starts when the gateway refunded it and the app's hooks raised:
the refund is the app's to record, and is handed over again."""
ERRING = """
SELECT provider, count(*) FROM payhooks_refunds
WHERE provider = ANY(%s) AND last_error IS NOT NULL
  AND (state = 'requested' OR (state = 'sent' AND starts_with(last_error, %s)))
GROUP BY provider
"""


def erring(conn: Connection, providers: Iterable[Provider]) -> Counter[Provider]:
    """The intents of ``providers`` waiting to be tried again after an error, by gateway: not
    yet sent (the gateway's API failed, a step broke), or refunded and not yet taken by the
    app's hooks. A sent one whose status check failed is not: the gateway has it, and it is
    asked about again as it ages (up to six hours apart), which nothing makes sooner."""
    rows = conn.execute(ERRING, ([p.value for p in providers], NOT_TAKEN)).fetchall()
    return Counter({Provider(provider): int(count) for provider, count in rows})


def wait_after(attempts: int) -> timedelta:
    """5 s, 10 s, 20 s, ... up to 10 minutes: a gateway that timed out is asked again soon,
    with the same key, and one that is down is not hammered."""
    return timedelta(seconds=min(5 * 2 ** max(attempts - 1, 0), 600))


# --- a person's way out: cancel an intent the gateway does not have ------------------------

CANCEL = f"""
UPDATE payhooks_refunds
SET state = 'cancelled', cancelled_by = %(by)s, cancel_reason = %(reason)s, settled_at = now()
WHERE provider = %(provider)s AND idempotency_key = %(key)s AND state = 'requested'
  AND (leased_until IS NULL OR leased_until <= now())
  AND (attempts = 0 OR %(not_at_gateway)s)
RETURNING {COLUMNS}
"""
"""Only a ``requested`` intent no sender holds: the row lock this takes and the sender's lease
(``FOR UPDATE SKIP LOCKED``, then ``state = 'requested'``) exclude each other, so a cancel and
a call never overlap. A gateway's report naming the intent's key (``NAMED``) updates the same
row: one committed first leaves it past ``requested``, and the cancel is refused."""


CALLED_BEFORE = (
    "it was sent to the gateway {attempts} time(s) already, and an answer lost or an error "
    "after the gateway acted may hide a refund it made: look for it in the gateway's "
    "dashboard, and cancel it saying it is not there (not_at_gateway) only if it is not"
)
"""Why an intent called before is not cancelled unless the caller says the gateway does not
have it: its amount would be free again while the gateway gave it back already."""


class NotCancellable(Conflict):
    """The intent is not ``requested`` any more (the gateway has it: its answer, or a report
    naming its key, said so), or a sender is calling its gateway now."""

    def __init__(self, refund: Refund, why: str) -> None:
        super().__init__(f"refund {refund.idempotency_key} of payment {refund.payment_id}: {why}")
        self.refund = refund


def cancel(
    conn: Connection, gateway: Provider | str, idempotency_key: str, *, reason: str,
    cancelled_by: str, not_at_gateway: bool = False,
) -> Refund:  # fmt: skip
    """Stop an intent stuck ``requested`` (a gateway that keeps failing its call): never sent
    afterwards, and its amount free again. ``idempotency_key`` is the intent's (``ph...``, as
    ``of_payment`` lists it). Cancelling one already cancelled returns it (``cancelling``
    says which); ``NotCancellable`` when a sender holds it mid-call (ask again in a minute or
    two) or it is past ``requested`` (the gateway has it: its answer said so, or its refund
    webhook or status report named the intent's key, ``closing``). One that was called before
    (``attempts`` > 0) may be at the gateway all the same (an answer lost, its webhook not yet
    come), and cancelling it would free money the gateway gave back already: it is refused
    (``NotCancellable``) unless the caller looked in the gateway's dashboard and says it is
    not there (``not_at_gateway``). A sender that outlived its lease and then hears the
    gateway has it records it ``sent`` again (``ACCEPTED``), and a report naming its key
    afterwards records it too (``NAMED``): counted again, either way."""
    refund, _ = cancelling(conn, gateway, idempotency_key, reason=reason,
                           cancelled_by=cancelled_by, not_at_gateway=not_at_gateway)  # fmt: skip
    return refund


def cancelling(
    conn: Connection, gateway: Provider | str, idempotency_key: str, *, reason: str,
    cancelled_by: str, not_at_gateway: bool = False,
) -> tuple[Refund, bool]:  # fmt: skip
    """``cancel``, and whether this call cancelled the intent (False: it was cancelled
    before, with its first reason kept)."""
    _text("reason", reason)
    _text("cancelled_by", cancelled_by)
    provider = _provider(gateway)
    params = {"provider": provider.value, "key": idempotency_key, "by": cancelled_by,
              "reason": reason, "not_at_gateway": not_at_gateway}  # fmt: skip
    row = db.query(conn, CANCEL, params).fetchone()
    if row is not None:
        return _refund(row), True
    row = db.query(conn, EXISTING, (provider.value, idempotency_key)).fetchone()
    if row is None:
        raise NotFound("refund", idempotency_key)
    found = _refund(row)
    if found.state is RefundState.CANCELLED:
        return found, False
    if found.state is RefundState.REQUESTED and found.attempts and not not_at_gateway:
        raise NotCancellable(found, CALLED_BEFORE.format(attempts=found.attempts))
    if found.state is RefundState.REQUESTED:
        raise NotCancellable(found, "a sender is calling the gateway with it now: try again later")
    raise NotCancellable(
        found, f"it is {found.state.value}: only a refund not yet sent is cancelled"
    )


# --- what a refund webhook closes --------------------------------------------------------------

CLOSE = """
UPDATE payhooks_refunds SET state = 'processed', settled_at = now(), last_error = NULL
WHERE provider = %(provider)s AND state = 'sent' AND gateway_refund_id = %(refund_id)s
  AND (%(amount)s::bigint IS NULL OR amount_paise = %(amount)s::bigint)
"""
_AGREES = "(%(amount)s::bigint IS NULL OR amount_paise = %(amount)s::bigint)"
_MADE = f"(%(processed)s AND {_AGREES})"
NAMED = _owning(f"""
UPDATE payhooks_refunds
SET state = CASE WHEN {_MADE} THEN 'processed' ELSE 'sent' END,
    gateway_refund_id = %(refund_id)s, sent_at = coalesce(sent_at, now()),
    settled_at = CASE WHEN {_MADE} THEN now() END,
    last_error = CASE WHEN {_AGREES} THEN NULL ELSE %(another)s END,
    next_attempt_at = now() + %(check)s, leased_until = NULL
WHERE provider = %(provider)s AND idempotency_key = %(key)s
  AND (gateway_refund_id IS NULL OR gateway_refund_id = %(refund_id)s)
  AND (state IN ('requested', 'cancelled', 'refused') OR (state = 'sent' AND {_MADE}))
""")
"""A refund the gateway reports under the intent's own key is the intent's, whatever the
sender heard: the gateway's refund id learnt, and ``processed`` when the report says so for
the intent's amount, else ``sent`` (the gateway has something under its key: the sender's
check asks about it, a report of another amount kept as its error for a person). From
``requested`` (its answer lost), ``cancelled`` (a person cancelled it meanwhile: counted
again, the person's name and reason kept, as ``ACCEPTED`` does) or ``refused`` (a refusal the
gateway's own report now contradicts); never from ``failed`` or ``processed``. A report of
the refund failed carries no key (``Event.refund_key``): no money went back, so it names no
intent, and one cancelled stays cancelled, its amount free. The row is the
one a cancel updates, so the two take turns: a cancel after it finds the intent past
``requested`` and is refused."""


REPORTED = f"""
INSERT INTO payhooks_refunds (provider, idempotency_key, payment_id, gateway_order_id,
    amount_paise, currency, captured_paise, reason, requested_by, state, gateway_refund_id,
    sent_at, settled_at)
SELECT %(provider)s, '{REPORTED_KEY}' || %(refund_id)s, %(payment_id)s, NULL, %(amount)s,
    %(currency)s, %(amount)s, %(reason)s, 'gateway', 'processed', %(refund_id)s, now(), now()
WHERE NOT EXISTS (SELECT 1 FROM payhooks_refunds
                  WHERE provider = %(provider)s AND gateway_refund_id = %(refund_id)s)
ON CONFLICT (provider, idempotency_key) DO NOTHING
"""
"""A refund the gateway reports made that no intent knows as its own (made in its dashboard,
or the gateway's own auto-refund of a second payment): recorded ``processed`` under
``gateway:`` and its refund id, once however often it is reported, so it counts against what
the payment may still refund (``TAKEN``). Cashfree refunds by order: a refund asked of a
payment it had already given back would come out of another payment's money."""


def closing(event: Event) -> Steps[None]:
    """A refund the gateway reports closes or records the intent it was sent for. By the
    gateway's refund id (Razorpay's ``rfnd_…``, Cashfree's ``cf_refund_id``, PayU's request
    id), a ``sent`` intent of its amount is processed: one of another amount says nothing of
    the intent, which stays ``sent`` for the sender's check (``gateways._refunds.same_amount``:
    asked again, its error kept, the refunds alert telling a person). By the intent's own key,
    where the gateway's report carries it back (``Event.refund_key``: Cashfree's ``refund_id``,
    Razorpay's ``payhooks_key`` note, PayU's token as its API confirms it, the sender's own
    delivery), an intent whose answer the sender never heard is the gateway's (``NAMED``):
    no person can cancel it afterwards and free its amount for a second refund of the same
    money. Any report naming the key does, processed or not (Cashfree's ``PENDING``,
    Razorpay's ``refund.created``). One whose webhook never came is closed by asking the
    gateway (``payhooks.refunding.sending.check_due``)."""
    if not event.refund_id:
        return
    params = {"provider": event.provider.value, "refund_id": event.refund_id,
              "amount": event.refund_amount_paise}  # fmt: skip
    processed = event.kind is EventKind.REFUND_PROCESSED
    if processed:
        yield Statement(sql=CLOSE, params=params, reads=False)
    if event.refund_key:
        another = (
            f"{event.event_type} under this refund's key names a refund of "
            f"{event.refund_amount_paise} paise ({event.refund_id}), not the amount asked: "
            "asked about, for a person to settle"
        )
        named = {**params, "key": event.refund_key, "processed": processed,
                 "another": another[:500], "check": FIRST_CHECK}  # fmt: skip
        yield Statement(sql=NAMED, params=named, reads=False)
    if processed and event.payment_id and event.refund_amount_paise:
        reported = {**params, "payment_id": event.payment_id, "currency": event.currency or "INR",
                    "reason": f"{event.event_type}: made outside payhooks"}  # fmt: skip
        yield Statement(sql=REPORTED, params=reported, reads=False)


def _refund(row: Any) -> Refund:
    values = dict(zip((c.strip() for c in COLUMNS.split(",")), row, strict=True))
    return Refund(
        **{
            **values,
            "provider": Provider(values["provider"]),
            "state": RefundState(values["state"]),
        }
    )


__all__ = [
    "CALLS_PER_SEND",
    "LEASE",
    "LIVE",
    "REPORTED_KEY",
    "NotCancellable",
    "Refund",
    "RefundState",
    "RefundTerms",
    "RefundTooLarge",
    "accepted",
    "again",
    "asked_paise",
    "cancel",
    "cancelling",
    "closing",
    "erring",
    "held",
    "idempotency_key",
    "intent",
    "lease_for",
    "leased",
    "of_payment",
    "refundable_now",
    "refused",
    "request",
    "request_async",
    "requesting",
    "settled",
    "unsettled",
    "unsettled_again",
    "wait_after",
]
