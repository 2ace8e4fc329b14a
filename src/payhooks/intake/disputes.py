"""Disputes, once and in order (docs/design.md, "Disputes"): each report a gateway sends of a
dispute is recorded in ``payhooks_disputes`` (core migration 0023) inside the delivery's claim,
before any handler sees it, by one conditional upsert that moves the dispute only forward.

Forward is a later phase of the chargeback process (a dispute won as a chargeback may be raised
again as a pre-arbitration, under the same id: Cashfree's own samples show it), or, within a
phase, a later status: opened, then under review or action required, then won, lost or closed.
Two reports of one open rank (under review, then action required again) are ordered by the
time the gateway says each state was reached. A report that is not forward (a late
``created`` after ``won``, a twin racing its original) is stale: its delivery is recorded
``ignored`` and no handler sees it. The guard is in the statement itself, so two deliveries of
one dispute at the same moment serialise on its row and the later one is judged against what
the first committed.

A lost dispute records what it took back: the dispute's ``lost_paise`` (what the gateway says
it deducted, else the dispute's amount: a loss said to have deducted nothing, Razorpay's
``amount_deducted`` 0, is taken as the whole amount, the side that never refunds money the
card network already gave back; a person can refund the rest by hand) and, on the payment's
record (``payhooks_payments``), ``disputed_paise``, the sum over its disputes. A dispute won
in a later phase gives it back.

The reads (``open_disputes``, ``of_order``, ``find``) are what the console, the alerts, the
metrics and the timeline show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from payhooks.events import Event, EventKind
from payhooks.intake.idempotency import UNCLAIMED
from payhooks.plumbing.db import Connection, Statement, Steps, shaped_rows


class Status(StrEnum):
    """Where a dispute stands, in payhooks' words (each gateway's are mapped by its adapter)."""

    OPENED = "opened"
    UNDER_REVIEW = "under_review"
    ACTION_REQUIRED = "action_required"
    WON = "won"
    LOST = "lost"
    CLOSED = "closed"


STATUS: Mapping[EventKind, Status] = {
    EventKind.DISPUTE_OPENED: Status.OPENED,
    EventKind.DISPUTE_UNDER_REVIEW: Status.UNDER_REVIEW,
    EventKind.DISPUTE_ACTION_REQUIRED: Status.ACTION_REQUIRED,
    EventKind.DISPUTE_WON: Status.WON,
    EventKind.DISPUTE_LOST: Status.LOST,
    EventKind.DISPUTE_CLOSED: Status.CLOSED,
}
"""The status each dispute kind reports (tests/unit/test_disputes.py: every one has one)."""

DECIDED = 2
RANK: Mapping[Status, int] = {
    Status.OPENED: 0,
    Status.UNDER_REVIEW: 1,
    Status.ACTION_REQUIRED: 1,
    Status.WON: DECIDED,
    Status.LOST: DECIDED,
    Status.CLOSED: DECIDED,
}
"""A status's place within a phase: a decided dispute moves again only in a later phase."""

AWAITING_RESPONSE = frozenset({Status.OPENED, Status.ACTION_REQUIRED})
"""The merchant must answer by ``respond_by``: what the deadline alert watches."""

PHASES: Mapping[str, int] = {
    "retrieval": 0,
    "fraud": 0,
    "dispute": 0,
    "chargeback": 1,
    "pre_arbitration": 2,
    "arbitration": 3,
}
"""The stages of the chargeback process in order (Razorpay's ``phase``, Cashfree's
``dispute_type``). A request for information (retrieval), a suspicion of fraud or a service
dispute may become a chargeback; a chargeback the merchant won may be raised again as a
pre-arbitration, then an arbitration."""
UNKNOWN_PHASE = PHASES["chargeback"]
"""A phase no gateway documents yet is placed as a chargeback: its reports are ordered by
status and time within it, never dropped for its name."""


def phase_rank(phase: str | None) -> int:
    """The place of a gateway's phase in the chargeback process."""
    if phase is None:
        return UNKNOWN_PHASE
    return PHASES.get(phase.strip().lower().replace("-", "_").replace(" ", "_"), UNKNOWN_PHASE)


# The report is applied when it is forward of the row's state, or when it is the delivery that
# put the row there replayed (``replay``: parked, then replayed; never the same report sent
# again after the purge took its record, which moves the dispute nowhere), or retried after
# its claim was let go (``idempotency.UNCLAIMED``: a handler's COMMIT refused). lost_paise: what
# it took back when lost, given back when won, kept otherwise. closed_at: when it was decided,
# in its latest phase (a decision of a later phase is a new one, even straight after an
# earlier phase's), kept by a replay.
RECORD = f"""
INSERT INTO payhooks_disputes AS d
    (provider, dispute_id, payment_id, gateway_order_id, status, status_rank, phase, phase_rank,
     gateway_status, amount_paise, currency, reason, respond_by, reported_at, lost_paise,
     event_id, closed_at)
VALUES (%(provider)s, %(dispute_id)s, %(payment_id)s, %(gateway_order_id)s, %(status)s,
        %(status_rank)s, %(phase)s, %(phase_rank)s, %(gateway_status)s, %(amount_paise)s,
        %(currency)s, %(reason)s, %(respond_by)s, %(reported_at)s, %(lost_paise)s, %(event_id)s,
        CASE WHEN %(status_rank)s >= 2 THEN now() END)
ON CONFLICT (provider, dispute_id) DO UPDATE SET
    payment_id = coalesce(excluded.payment_id, d.payment_id),
    gateway_order_id = coalesce(excluded.gateway_order_id, d.gateway_order_id),
    status = excluded.status,
    status_rank = excluded.status_rank,
    phase = coalesce(excluded.phase, d.phase),
    phase_rank = excluded.phase_rank,
    gateway_status = coalesce(excluded.gateway_status, d.gateway_status),
    amount_paise = coalesce(excluded.amount_paise, d.amount_paise),
    currency = coalesce(excluded.currency, d.currency),
    reason = coalesce(excluded.reason, d.reason),
    respond_by = coalesce(excluded.respond_by, d.respond_by),
    reported_at = coalesce(excluded.reported_at, d.reported_at),
    lost_paise = CASE excluded.status WHEN 'lost' THEN excluded.lost_paise
                                      WHEN 'won' THEN 0 ELSE d.lost_paise END,
    event_id = excluded.event_id,
    updated_at = now(),
    closed_at = CASE WHEN excluded.status_rank < 2 THEN NULL
                     WHEN d.event_id = excluded.event_id THEN coalesce(d.closed_at, now())
                     ELSE now() END
WHERE (%(replay)s AND d.event_id = excluded.event_id)
   OR d.event_id = '{UNCLAIMED}' || excluded.event_id
   OR (excluded.phase_rank, excluded.status_rank) > (d.phase_rank, d.status_rank)
   OR (excluded.phase_rank = d.phase_rank AND excluded.status_rank = d.status_rank
       AND d.status_rank < 2
       AND excluded.reported_at > coalesce(d.reported_at, '-infinity'::timestamptz))
RETURNING status
"""
# What the payment's disputes took back, on its record. The payment's turn first, in a
# statement of its own (core 0027's payhooks_lock_payment, which the trigger writing a new
# record of the payment takes too): the statements after it read the record and the sum once
# every other writer of them that came first has committed, so a capture recording the payment
# meanwhile is seen, one that comes after waits and sums this dispute, and two disputes of one
# payment lost at once are both counted. The turn comes after the dispute's row (RECORD) and
# before the payment's rows, the cart and the relay's lock; a capture takes it after its
# delivery's record and before the same three, and takes no dispute's row, so neither waits for
# what the other holds while it holds the turn (docs/design.md, "Locks and their order").
TURN = "SELECT payhooks_lock_payment(%(provider)s, %(payment_id)s)"
# The record's rows, locked in a statement of their own: TAKEN_BACK then reads the sum after
# anything else holding them (a writer that does not take the turn) has finished.
LOCK_PAYMENT = """
SELECT 1 FROM payhooks_payments WHERE provider = %(provider)s AND payment_id = %(payment_id)s
FOR NO KEY UPDATE
"""
TAKEN_BACK = """
UPDATE payhooks_payments SET disputed_paise = (
    SELECT coalesce(sum(lost_paise), 0) FROM payhooks_disputes
    WHERE provider = %(provider)s AND payment_id = %(payment_id)s)
WHERE provider = %(provider)s AND payment_id = %(payment_id)s
"""


def recording(event: Event, *, replay: bool = False) -> Steps[bool]:
    """Record a dispute event's report; whether it moved the dispute (False: a stale report,
    which changes nothing and reaches no handler). ``replay``: the delivery was parked and is
    applied again, its report the one the dispute's row already holds. A kind that is no
    dispute's records nothing and goes on."""
    if not event.kind.is_dispute:
        return True
    params = {**values(event), "replay": replay}
    moved = yield Statement(sql=RECORD, params=params)
    if moved is None:
        return False
    if params["payment_id"] is not None:
        yield Statement(sql=TURN, params=params, reads=False)
        yield Statement(sql=LOCK_PAYMENT, params=params, reads=False)
        yield Statement(sql=TAKEN_BACK, params=params, reads=False)
    return True


def values(event: Event) -> dict[str, Any]:
    """The row a dispute event's report writes."""
    dispute = event.dispute
    if dispute is None:
        raise ValueError(f"{event.kind.value} carries no dispute")
    status = STATUS[event.kind]
    lost = dispute.deducted_paise or dispute.amount_paise or 0  # 0 deducted: the whole (above)
    return {
        "provider": event.provider.value,
        "dispute_id": dispute.id,
        "payment_id": event.payment_id,
        "gateway_order_id": event.merchant_ref,
        "status": status.value,
        "status_rank": RANK[status],
        "phase": dispute.phase,
        "phase_rank": phase_rank(dispute.phase),
        "gateway_status": dispute.status,
        "amount_paise": dispute.amount_paise,
        "currency": event.currency,
        "reason": dispute.reason,
        "respond_by": dispute.respond_by,
        "reported_at": dispute.reported_at,
        "lost_paise": lost if status is Status.LOST else 0,
        "event_id": event.event_id,
    }


# --- what the console, the alerts, the metrics and the timeline read -------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Dispute:
    """A dispute as payhooks holds it: the state its newest report in order put it in."""

    provider: str
    dispute_id: str
    payment_id: str | None
    gateway_order_id: str | None
    status: str
    phase: str | None
    gateway_status: str | None
    amount_paise: int | None
    currency: str | None
    reason: str | None
    respond_by: datetime | None
    lost_paise: int
    event_id: str
    opened_at: datetime
    updated_at: datetime
    closed_at: datetime | None

    @property
    def open(self) -> bool:
        """Not decided yet: won, lost or closed."""
        return self.closed_at is None

    @property
    def awaiting_response(self) -> bool:
        """The merchant must answer it by ``respond_by``. Its status is compared as text,
        never read as a ``Status``: one a newer release wrote is not awaiting an answer here,
        and never an error that stops the list it is drawn in."""
        return self.open and self.status in AWAITING_RESPONSE


COLUMNS = """
SELECT provider, dispute_id, payment_id, gateway_order_id, status, phase, gateway_status,
       amount_paise, currency, reason, respond_by, lost_paise, event_id, opened_at, updated_at,
       closed_at
FROM payhooks_disputes
"""
# Through payhooks_disputes_open: the nearest deadline first, those with none last.
OPEN = (
    COLUMNS
    + """WHERE closed_at IS NULL AND (%(provider)s::text IS NULL OR provider = %(provider)s)
ORDER BY respond_by NULLS LAST, provider, dispute_id LIMIT %(limit)s"""
)
OF_ORDER = (
    COLUMNS
    + """WHERE provider = %(provider)s
  AND (gateway_order_id = %(order)s OR payment_id = ANY(%(payments)s))
ORDER BY opened_at, dispute_id"""
)
FIND = COLUMNS + "WHERE provider = ANY(%(providers)s) AND dispute_id = %(dispute_id)s"
MAX_LISTED = 500


def open_disputes(
    conn: Connection, provider: str | None = None, *, limit: int = MAX_LISTED
) -> list[Dispute]:
    """The disputes not yet decided, the nearest deadline first (those with no deadline
    last), of one gateway or all."""
    params = {"provider": provider, "limit": limit}
    return shaped_rows(conn, Dispute, OPEN, params)


def of_order(
    conn: Connection, provider: str, gateway_order_id: str, payment_ids: Sequence[str] = ()
) -> list[Dispute]:
    """The disputes of a gateway order's payments, in the order they were opened."""
    params = {"provider": provider, "order": gateway_order_id, "payments": list(payment_ids)}
    return shaped_rows(conn, Dispute, OF_ORDER, params)


def find(conn: Connection, dispute_id: str, providers: Sequence[str]) -> list[Dispute]:
    """The disputes of ``providers`` with this id (each gateway's ids are its own)."""
    params = {"providers": list(providers), "dispute_id": dispute_id}
    return shaped_rows(conn, Dispute, FIND, params)


__all__ = [
    "AWAITING_RESPONSE",
    "PHASES",
    "RANK",
    "STATUS",
    "Dispute",
    "Status",
    "find",
    "of_order",
    "open_disputes",
    "phase_rank",
    "recording",
    "values",
]
