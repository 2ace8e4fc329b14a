"""What an operator of the reference shop does beyond the core console's actions: queue a dead
letter (an email or alert the worker gave up on) again. Idempotent, and recorded with the
operator's name like the core's (``payhooks.console.actions``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg.rows import class_row

from payhooks import refunds
from payhooks.console.actions import Done, Result, record
from payhooks.db import Connection
from payhooks.errors import Conflict, InvalidRequest
from payhooks.service import outbox
from payhooks.service.shop import double_refunds


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    id: int
    kind: str
    recipient: str | None
    subject: str
    attempts: int
    last_error: str | None
    failed_at: datetime


_DEAD = """
SELECT id, kind, recipient, subject, attempts, last_error, failed_at FROM outbox
WHERE failed_at IS NOT NULL ORDER BY failed_at DESC LIMIT %s
"""
_DEAD_COUNT = "SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL"


def dead_letters(conn: Connection, limit: int = 200) -> list[DeadLetter]:
    with conn.cursor(row_factory=class_row(DeadLetter)) as cur:
        return cur.execute(_DEAD, (limit,)).fetchall()


def dead_count(conn: Connection) -> int:
    row = conn.execute(_DEAD_COUNT).fetchone()
    return int(row[0]) if row else 0


def retry_dead_letter(conn: Connection, message_id: int, *, operator: str) -> Result:
    revived = outbox.revive(conn, message_id)
    result = Result(done=Done.QUEUED if revived else Done.ALREADY_QUEUED)
    record(conn, operator, "retry", None, str(message_id), result)
    return result


_FLAGGED = f"""
SELECT p.amount_paise, p.refunded_paise, p.currency, p.cart_id, {double_refunds.GATEWAY_ORDER}
FROM payments p WHERE p.provider = %s AND p.payment_id = %s AND p.needs_refund
"""


def request_refund(conn: Connection, provider: str, payment_id: str, *, operator: str) -> Result:
    """A refund of what is left of a payment flagged ``needs_refund``, asked for under the
    same key the double-payment policy uses (``double_refunds.key_of``): two operators, or an
    operator and the policy, ask for one refund. The worker sends it."""
    row = conn.execute(_FLAGGED, (provider, payment_id)).fetchone()
    left = 0 if row is None else int(row[0]) - int(row[1])
    if row is None or left <= 0:
        result = Result(done=Done.REFUND_NOT_POSSIBLE)
    else:
        key = double_refunds.key_of(payment_id)
        before = {r.idempotency_key for r in refunds.of_payment(conn, provider, payment_id)}
        try:
            with conn.transaction():
                made = refunds.request(
                    conn, provider, payment_id, left, key=key, captured_paise=int(row[0]),
                    reason=f"asked for in the console for cart {row[3]}", requested_by=operator,
                    currency=row[2] or "INR", gateway_order_id=row[4],
                )  # fmt: skip
        except (InvalidRequest, Conflict):
            result = Result(done=Done.REFUND_NOT_POSSIBLE)
        else:
            fresh = made.idempotency_key not in before
            result = Result(done=Done.REFUND_REQUESTED if fresh else Done.REFUND_ALREADY_REQUESTED)
    record(conn, operator, "refund", provider, payment_id, result)
    return result
