"""A payment as the core keeps it (``payhooks_payments``): its identities at the gateway and
what the customer paid, written when the payment is applied (a webhook, reconciliation or a
confirmation alike) and kept by the purge while a refund of it is possible
(``payhooks.operations.retention``). A refund reads them here: the stored deliveries they came from
go after the retention window."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from payhooks.events import EventKind, Provider
from payhooks.plumbing.db import AsyncConnection, Connection, Statement, Steps, run, run_async


@dataclass(frozen=True, slots=True, kw_only=True)
class Payment:
    """One payment applied: ``payment_id`` as payhooks keys it (PayU: the txnid of its first
    payment), ``attempt_id`` the gateway's own id where that is another (PayU's ``mihpayid``),
    ``gateway_order_id`` the order it paid, ``paid_paise`` what the customer paid for it (the
    bound on its refunds; not the amount compared with the order, which differs under an offer
    or a fee), ``disputed_paise`` what its lost disputes took back. A figure unknown (a record
    kept from before payhooks kept it) is None."""

    provider: Provider
    payment_id: str
    gateway_order_id: str | None
    attempt_id: str | None
    paid_paise: int | None
    currency: str | None
    captured: bool
    applied_at: datetime
    disputed_paise: int = 0
    """What its lost disputes took back (``payhooks.intake.disputes``)."""


FIND = """
SELECT provider, payment_id, gateway_order_id, attempt_id, paid_paise, currency,
       kind = %(captured)s, applied_at, disputed_paise
FROM payhooks_payments
WHERE provider = %(provider)s AND payment_id = %(payment_id)s
ORDER BY kind = %(captured)s DESC
LIMIT 1
"""


def finding(gateway: Provider | str, payment_id: str) -> Steps[Payment | None]:
    """The payment's record, its capture's when it was captured; None when payhooks keeps
    none (never applied, or purged once no refund of it is possible)."""
    params = {"provider": Provider(gateway).value, "payment_id": payment_id,
              "captured": EventKind.PAYMENT_CAPTURED.value}  # fmt: skip
    row = yield Statement(sql=FIND, params=params)
    if row is None:
        return None
    provider, pid, order, attempt, paid, currency, captured, applied_at, disputed = row
    return Payment(
        provider=Provider(provider),
        payment_id=str(pid),
        gateway_order_id=order,
        attempt_id=attempt,
        paid_paise=None if paid is None else int(paid),
        currency=currency,
        captured=bool(captured),
        applied_at=applied_at,
        disputed_paise=int(disputed),
    )


def find(conn: Connection, gateway: Provider | str, payment_id: str) -> Payment | None:
    """``finding`` on ``conn``: in a handler, on the connection it is handed, in the
    delivery's own transaction."""
    return run(conn, finding(gateway, payment_id))


async def find_async(
    conn: AsyncConnection, gateway: Provider | str, payment_id: str
) -> Payment | None:
    """``find`` on an async connection (an ``AsyncHooks`` handler's)."""
    return await run_async(conn, finding(gateway, payment_id))


__all__ = ["Payment", "find", "find_async", "finding"]
