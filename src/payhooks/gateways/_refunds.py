"""What a gateway's refund client is given and answers: the refund intent (``Refund``, in
its ``RefundState``), the gateway's acceptance (``Sent``) or refusal (``RefundRefused``), an
intent naming too little to be sent (``RefundIncomplete``), and the client itself
(``RefundClient``); and a refund the sender learned is processed, as a delivery of its own
(``processed_delivery``), which the stored-delivery reader reads again.

Pure values, in the gateways' room so that the status clients never import money out: the
intents' statements are ``payhooks.refunding.refunds`` and the sender
``payhooks.refunding.sending``, and both still name these where they always did."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from payhooks.events import Event, EventKind, Provider, Received, is_text, storable
from payhooks.gateways._common import sha256_hex
from payhooks.plumbing.errors import GatewayApiError, MalformedPayload
from payhooks.plumbing.keys import RECONCILED


class RefundState(StrEnum):
    REQUESTED = "requested"
    """Written; the gateway not yet known to have it (never sent, or its answer not seen)."""
    SENT = "sent"
    """The gateway accepted it under its key and gave its refund id; not yet processed."""
    PROCESSED = "processed"
    """The money went back (the gateway's answer, its refund webhook or its status)."""
    FAILED = "failed"
    """The gateway accepted it, then said it failed: no money went back."""
    REFUSED = "refused"
    """Refused for good, none sent: by the gateway (more than refundable, not captured), or by
    payhooks before the gateway was asked (``RefundIncomplete``: its ``last_error`` starts
    ``refused by payhooks``)."""
    CANCELLED = "cancelled"
    """A person stopped it before the gateway had it (``cancel``): never sent afterwards."""


class RefundRefused(GatewayApiError):
    """The gateway refused the refund for good (its words in ``reason``): asking again with
    the same key and body would be refused again."""


class RefundFailed(RefundRefused):
    """The gateway made the refund under its own id and says it failed (no money went back):
    the intent is closed ``failed`` with that id, whether the create call's answer says so or
    a later status check does, never ``refused`` (which no refund of the gateway's stands for)."""

    def __init__(self, provider: str, reason: str, *, gateway_refund_id: str) -> None:
        super().__init__(provider, reason, status=200)
        self.gateway_refund_id = gateway_refund_id


LOOKUP_LAG_S = 60.0
"""How long after a lost answer a refusal waits for the gateway's lookup: Cashfree's read side
lags its write side "by seconds" (docs/providers.md); a minute covers that many times, and
PayU's ``check_action_status`` is given the same."""
UNCONFIRMED = "refused right after an answer lost, looked up again before it stands: "
"""How the reason of a refusal not yet taken starts; the sender keeps a retried intent's
reason as its ``last_error`` (``refunds.again``), so the next attempt reads that it came."""


def standing(refund: Refund, refused: RefundRefused) -> GatewayApiError:
    """The gateway's refusal as the sender takes it. Right after an attempt whose answer was
    lost it may be about the refund that attempt made (the payment's amount taken by it), not
    yet shown by the gateway's lookup: asked again (the lookup first), no sooner than
    ``LOOKUP_LAG_S``, and refused only when refused again with the refund still not found.
    A first attempt's refusal stands."""
    if refund.attempts > 1 and not (refund.last_error or "").startswith(UNCONFIRMED):
        return GatewayApiError(
            refused.provider,
            UNCONFIRMED + refused.reason,
            status=refused.status,
            code=refused.code,
            retry_after_s=LOOKUP_LAG_S,
        )
    return refused


def failed_refund(provider: Provider, reason: str, refund_id: object) -> RefundRefused:
    """A refund answer saying it failed: ``RefundFailed`` under the gateway's id for it (a
    string, or a number), else, naming none, ``RefundRefused`` (closed without one)."""
    if isinstance(refund_id, int) and not isinstance(refund_id, bool):
        refund_id = str(refund_id)
    if isinstance(refund_id, str) and refund_id.strip() and is_text(refund_id):
        return RefundFailed(provider.value, reason, gateway_refund_id=refund_id)
    return RefundRefused(provider.value, reason, status=200)


class RefundIncomplete(Exception):
    """The client will not send the refund as its intent stands, and has not asked the gateway
    to make it: the intent names too little for the gateway's refund call (a Cashfree one no
    order, a PayU one neither its ``mihpayid`` nor its txnid). A payment the gateway's API
    does not know is no such intent: an error, asked again (``GatewayApiError``).
    payhooks' own refusal, never the gateway's: the sender closes the intent ``refused`` saying
    so, and counts it apart (``Tally.incomplete``). ``request`` refuses such a refund when it
    is asked; an intent written before it did meets this."""

    def __init__(self, provider: str, reason: str) -> None:
        super().__init__(f"{provider}: {reason}")
        self.provider = provider
        self.reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    """The gateway has the refund: its own id for it, and whether the money already went."""

    gateway_refund_id: str
    processed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Refund:
    """One refund intent and what became of it."""

    provider: Provider
    idempotency_key: str
    payment_id: str
    gateway_order_id: str | None
    amount_paise: int
    currency: str
    captured_paise: int
    reason: str
    requested_by: str
    state: RefundState = RefundState.REQUESTED
    gateway_refund_id: str | None = None
    attempts: int = 0
    last_error: str | None = None
    requested_at: datetime | None = None
    sent_at: datetime | None = None
    settled_at: datetime | None = None
    attempt_id: str | None = None
    """The gateway's own id of the payment refunded where ``payment_id`` is another (PayU's
    ``mihpayid``, ``payment_id`` its txnid): what the gateway's refund call names."""
    cancelled_by: str | None = None
    cancel_reason: str | None = None


def same_amount(
    refund: Refund, found_paise: int, *, provider: Provider, currency: object = None
) -> None:
    """A refund answer naming another amount than the intent asked for, or another
    ``currency`` (when the answer names one: PayU's name none) (a refund made of another
    amount under the intent's key or id, the gateway's or a proxy's mix-up) says nothing of
    the intent's refund: malformed, as an answer naming another refund is
    (``_common.naming``), so never read as its state (made, processed or failed): asked again,
    its words kept for a person."""
    if currency is not None and currency != refund.currency:
        raise MalformedPayload(
            provider, f"refund answer names another currency: {currency}, not {refund.currency}"
        )
    if found_paise != refund.amount_paise:
        raise MalformedPayload(
            provider,
            f"refund answer names another amount: {found_paise} paise, not the "
            f"{refund.amount_paise} asked",
        )


class RefundClient(Protocol):
    provider: Provider

    def send_refund(self, refund: Refund) -> Sent:
        """The refund made under the intent's key: ``Sent``; ``RefundRefused`` for the
        gateway's refusal; ``RefundIncomplete`` when the intent names too little to ask."""
        ...

    def refund_status(self, refund: Refund) -> Sent:
        """What the gateway now says of a refund it accepted (``refund.gateway_refund_id``):
        ``processed`` or not yet; ``RefundRefused`` when it failed."""
        ...


SENT_REFUND = "sent_refund"
"""The status word of a processed refund's delivery key, ``reconcile:<refund id>:sent_refund``:
no status API reader makes it."""
_FIELDS = ("provider", "payment_id", "gateway_order_id", "gateway_refund_id", "amount_paise",
           "currency", "idempotency_key")  # fmt: skip


def processed_key(gateway_refund_id: str) -> str:
    return f"{RECONCILED}:{gateway_refund_id}:{SENT_REFUND}"


def is_processed_key(event_id: str) -> bool:
    return event_id.startswith(RECONCILED + ":") and event_id.endswith(":" + SENT_REFUND)


def processed_delivery(refund: Refund) -> Received:
    """The refund the sender made, processed, as a delivery: what a refund webhook for it
    carries (payment, order, refund id, amount, the intent's key), its body the intent's own
    fields."""
    if not refund.gateway_refund_id:
        raise ValueError("a refund is processed under the gateway's refund id")
    kept = {name: getattr(refund, name) for name in _FIELDS}
    body = json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()
    event = Event(
        provider=refund.provider,
        kind=EventKind.REFUND_PROCESSED,
        event_type=f"{RECONCILED}.refund.processed",
        event_id=processed_key(refund.gateway_refund_id),
        payment_id=refund.payment_id,
        merchant_ref=refund.gateway_order_id,
        currency=refund.currency,
        refund_id=refund.gateway_refund_id,
        refund_amount_paise=refund.amount_paise,
        refund_key=refund.idempotency_key,
        payload_sha256=sha256_hex(body),
    )
    return Received(event=storable(event), body=body, headers={})


def reread(provider: Provider, event_id: str, body: bytes) -> Received:
    """A processed refund's delivery as it was stored, read again (a replay, the console)."""
    try:
        kept: Any = json.loads(body)
        refund = Refund(
            **{name: kept[name] for name in _FIELDS if name != "provider"},
            provider=provider, captured_paise=int(kept["amount_paise"]), reason="",
            requested_by="",
        )  # fmt: skip
    except (ValueError, KeyError, TypeError) as exc:
        raise MalformedPayload(provider, "stored refund does not read") from exc
    again = processed_delivery(refund)
    if again.event.event_id != event_id:
        raise MalformedPayload(provider, f"stored refund does not read as {event_id}")
    return again


__all__ = [
    "LOOKUP_LAG_S",
    "SENT_REFUND",
    "UNCONFIRMED",
    "Refund",
    "RefundClient",
    "RefundFailed",
    "RefundIncomplete",
    "RefundRefused",
    "RefundState",
    "Sent",
    "failed_refund",
    "is_processed_key",
    "processed_delivery",
    "processed_key",
    "reread",
    "same_amount",
    "standing",
]
