"""What a simulated gateway sends and knows: a delivery's exact bytes and headers, a checked-out
cart, and the bank reference a payment carries. Every gateway's simulator builds on these."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from payhooks.events import Provider


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    provider: Provider
    body: bytes
    headers: dict[str, str]
    label: str

    @property
    def path(self) -> str:
        return f"/webhooks/{self.provider.value}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Paid:
    """What a delivery about one payment says: the payment ``payment_id`` of the gateway order
    ``reference``, for ``amount_paise``, is ``what`` ("captured" or "failed"; on Razorpay also
    "authorized"), under the event named ``event`` when given (a gateway whose deliveries name
    no event, PayU's, has no use for it)."""

    what: str
    reference: str
    payment_id: str
    amount_paise: int
    event: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Disputed:
    """What a delivery about one dispute says: the dispute ``dispute_id`` of the payment
    ``payment_id`` (gateway order ``reference``), for ``amount_paise``, stands ``what``
    (payhooks' words: "opened", "under_review", "action_required", "won", "lost", "closed") in
    ``phase`` ("chargeback", "pre_arbitration", ...), to be answered by ``respond_by``; the
    gateway reports it at ``reported_at`` (both unix seconds)."""

    what: str
    dispute_id: str
    payment_id: str
    reference: str
    amount_paise: int
    respond_by: int
    reported_at: int
    phase: str = "chargeback"


@dataclass(frozen=True, slots=True, kw_only=True)
class Purchase:
    """A checked-out cart as the gateway knows it: the reference it echoes back, and the
    amount it charges (what the demo and storm pay for)."""

    provider: Provider
    cart_id: str
    reference: str
    amount_paise: int
    items: dict[str, int]


def bank_reference(payment_id: str) -> str:
    """The 12-digit reference (UPI RRN / UTR) the customer's bank shows for this payment."""
    return str(int(hashlib.sha256(payment_id.encode()).hexdigest(), 16))[-12:]
