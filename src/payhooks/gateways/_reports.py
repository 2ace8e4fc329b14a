"""What a gateway's status API says about an order's payments, as events: pure, no I/O.

Each payment the API reports becomes a ``Received`` whose ``Event`` carries what a webhook for
that payment would carry (provider, payment id, merchant reference, amounts, kind), under a
delivery key of its own, ``reconcile:<payment id>:<status>``. No webhook key can take it: key
headers holding a ':' are refused (``gateways._common.key_header``) and no gateway derives a
key starting with ``reconcile:``. So the reconciled event and a late webhook are two deliveries
with one meaning, and the business keys (one payment row, one order per cart) make them take
effect once, whichever comes first. Each gateway's ``status.py`` reads its own answers with
these helpers.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from payhooks.events import Event, EventKind, Provider, Received, storable
from payhooks.gateways import _refunds, gateway
from payhooks.gateways._common import parse_json, rupees_to_paise, sha256_hex
from payhooks.plumbing.errors import MalformedPayload
from payhooks.plumbing.keys import RECONCILED, is_reconciled

KEY_PREFIX = RECONCILED
MAX_SAID_CHARS = 200


class Verdict(StrEnum):
    """What a status API says of a callback it was asked to confirm
    (``payhooks.intake.confirmations``)."""

    CONFIRMED = "confirmed"
    REFUTED = "refuted"


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """One answer of a status API about one checkout: its payments as deliveries to ingest,
    what was left aside (refunded payments, states that carry nothing), and whether the
    gateway says the checkout expired."""

    received: tuple[Received, ...] = ()
    skipped: tuple[str, ...] = ()
    expired: bool = False
    unknown: bool = False
    """The API says it has no such thing as was asked about (PayU: a refund's request id): a
    callback that claimed it is refuted, saying so, once ``PATIENCE`` has passed, as one the
    API never reports; not at once, for PayU's API may not show yet what it called back
    about."""
    contradicted: bool = False
    """The API reports what was asked about in a final state no callback's claim can become
    (a refund FAILED: none is made under its id again): a callback claiming it is refuted at
    once."""
    underway: bool = False
    """The API knows what was asked about and says it is not final yet (a refund queued or
    pending): a callback claiming it done waits for its final state, never refuted for time.
    Refuted, the key it holds is the one the gateway's own callback takes when the refund
    completes, which would then be answered ``duplicate``: a refund the app never hears of."""
    unreadable: tuple[str, ...] = ()
    """Payments the answer lists that payhooks cannot read, each named with why: never a
    reason to pass over the others, and never passed over themselves (the checkout or
    callback keeps them as its error, and is asked about again)."""


def key(payment_id: str, status: str) -> str:
    return f"{KEY_PREFIX}:{payment_id}:{status}"


def canonical(entity: object) -> bytes:
    """The payment as the API returned it, serialised canonically (sorted keys, no spaces)."""
    return json.dumps(entity, sort_keys=True, separators=(",", ":"), default=str).encode()


def printable(value: object, limit: int = MAX_SAID_CHARS) -> str | None:
    """A gateway's own words for an operator's eyes and a text column: at most ``limit``
    characters, each control character, lone surrogate or other unprintable one a space."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = "".join(c if c.isprintable() else " " for c in value[: limit + 1])
    return text if len(text) <= limit else text[:limit] + "…"


def received(
    provider: Provider,
    entity: Mapping[str, Any],
    *,
    kind: EventKind,
    status: str,
    payment_id: str,
    merchant_ref: str,
    amount_paise: int,
    currency: object,
    payment_amount_paise: int | None = None,
    bank_ref: str | None = None,
) -> Received:
    """The delivery a reported payment stands for, its canonical body as the stored body."""
    body = canonical(entity)
    event = Event(
        provider=provider,
        kind=kind,
        event_type=f"{KEY_PREFIX}.payment.{status}",
        event_id=key(payment_id, status),
        payment_id=payment_id,
        merchant_ref=merchant_ref,
        amount_paise=amount_paise,
        payment_amount_paise=payment_amount_paise,
        currency=currency if isinstance(currency, str) and currency else None,
        bank_ref=bank_ref,
        payload_sha256=sha256_hex(body),
    )
    return Received(event=storable(event), body=body, headers={})


def named_currency(
    provider: Provider, kind: EventKind, payment_id: str, currency: object
) -> object:
    """The currency of a payment authorised or captured, where the gateway always names it
    (Razorpay, Cashfree): one naming none is unreadable, as its webhook would be, never
    compared with the order as rupees unsaid."""
    if kind.pays and not (isinstance(currency, str) and currency):
        raise MalformedPayload(provider, f"payment {payment_id} names no currency")
    return currency


def read_json(provider: Provider, body: bytes) -> Any:
    return parse_json(body, provider=provider, what="status API answer")


def text(provider: Provider, entity: object, name: str) -> str:
    value = entity.get(name) if isinstance(entity, dict) else None
    if not isinstance(value, str) or value == "":
        raise MalformedPayload(provider, f"{name} is missing or not a string")
    return value


def rupees(provider: Provider, value: object, name: str) -> int:
    if isinstance(value, float):  # never: parsed as Decimal; refused rather than rounded
        raise MalformedPayload(provider, f"{name} is not exact")
    return rupees_to_paise(value, provider=provider, field=name)


def reread(provider: Provider, event_id: str, body: bytes) -> Received:
    """A reconciled payment as it was stored (its canonical body), read again under its key by
    the gateway's own status reader (``stored``): for a replay, the console, the worker. That
    reader's module needs the ``reconcile`` extra, as did the pass that stored the payment; the
    registry names it, and it is imported only here, when such a record is read."""
    if _refunds.is_processed_key(event_id):  # a refund the sender made, processed
        return _refunds.reread(provider, event_id, body)
    entity = read_json(provider, body)
    if not isinstance(entity, dict):
        raise MalformedPayload(provider, "stored payment is not an object")
    reader = importlib.import_module(gateway(provider).status_api.module)
    return one_of(reader.stored(event_id, entity), provider, event_id)


def one_of(report: Report, provider: Provider, event_id: str) -> Received:
    """The delivery stored under ``event_id``, read again from its stored payment."""
    found = [r for r in report.received if r.event.event_id == event_id]
    if not found:
        raise MalformedPayload(provider, f"stored payment does not read as {event_id}")
    return found[0]


__all__ = [
    "KEY_PREFIX",
    "Report",
    "Verdict",
    "canonical",
    "is_reconciled",
    "key",
    "one_of",
    "printable",
    "read_json",
    "received",
    "reread",
    "rupees",
    "text",
]
