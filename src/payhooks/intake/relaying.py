"""A payment event the claim applied, queued for the relay in the claim's own transaction.

While a relay runs for a channel (``payhooks_relay_channels``: ``nats``, ``rabbitmq``), every
event a handler applies (``processed``) queues one row of ``payhooks_outbox`` per channel,
beside the claim's record, so the message exists if and only if the effect committed; the
relay (``payhooks.relay``) publishes it after commit. With no channel there, the statement
writes nothing and takes no lock (docs/design.md, "The relay").

A message is keyed by the logical event, not by the delivery that brought it: a payment's
capture is one event whether ``payment.captured``, ``order.paid`` or reconciliation reported
it, and a refund is one per refund id; the queue's unique ``dedupe_key`` then keeps one row per
event and channel, and the brokers and the consumer's inbox (``payhooks.relay.inbox``)
deduplicate a republish by the same id. Events of one payment are queued one transaction at
a time (a transaction-scoped advisory lock per channel and payment, taken only when a row is
queued), so their order in the queue is the order they committed in.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime

from payhooks.events import Event
from payhooks.plumbing.db import Statement, Steps

RELAY_PREFIX = "relay:"
"""A relayed row's ``dedupe_key`` is ``relay:<channel>:<message id>``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Relayed:
    """What a relay publishes for one applied event."""

    message_id: str
    """The logical event's stable key: the broker's ``Nats-Msg-Id`` or ``message_id``."""
    payment: str
    """The payment whose events keep their order (``<gateway>:<payment id>``)."""
    subject: str
    """``<gateway>.<kind>``: under the relay's subject prefix (NATS) or as the routing key
    (RabbitMQ)."""
    body: str
    """The message: the event as JSON."""


def message_id(event: Event) -> str:
    """The logical event's key: a refund by its refund id, a payment authorised or captured by
    the payment and kind (the business keys payhooks keeps, docs/design.md "Two levels of
    idempotency"), anything else by the claim's key (gateway and delivery key)."""
    gateway = event.provider.value
    if event.kind.is_refund and event.refund_id is not None:
        return f"{gateway}:refund:{event.refund_id}"
    if event.kind.pays and event.payment_id is not None:
        return f"{gateway}:{event.payment_id}:{event.kind.value}"
    return f"{gateway}:{event.event_id}"


def payment_of(event: Event) -> str:
    """The payment an event belongs to, for its order: its id, else its gateway order, else
    the delivery itself (an event that names neither has nothing to keep in order with)."""
    known = event.payment_id or event.merchant_ref or event.event_id
    return f"{event.provider.value}:{known}"


def relayed(event: Event, order_id: str | None) -> Relayed:
    """The message for ``event``, applied to ``order_id`` (the merchant's order, when the
    handler named one)."""
    ident = message_id(event)
    body = {
        "message_id": ident,
        "kind": event.kind.value,
        "gateway": event.provider.value,
        "event_type": event.event_type,
        "delivery_key": event.event_id,
        "payment_id": event.payment_id,
        "gateway_order_id": event.merchant_ref,
        "order_id": order_id,
        "amount_paise": event.amount_paise,
        "paid_paise": event.payment_amount_paise,
        "currency": event.currency,
        "refund_id": event.refund_id,
        "refund_amount_paise": event.refund_amount_paise,
        "dispute": dispute_figures(event),
    }
    return Relayed(
        message_id=ident,
        payment=payment_of(event),
        subject=f"{event.provider.value}.{event.kind.value}",
        body=json.dumps(body, separators=(",", ":")),
    )


def dispute_figures(event: Event) -> dict[str, object] | None:
    """A dispute event's figures, as ``payhooks.events.Dispute`` names them (its times in ISO
    8601), for a consumer to know which dispute moved, where to and for how much; None for
    the other events."""
    if event.dispute is None:
        return None
    figures = asdict(event.dispute).items()
    return {name: v.isoformat() if isinstance(v, datetime) else v for name, v in figures}


# One row per channel a relay runs for; none, and no lock, when there is none. The lock is
# per channel and payment (correlated with the channel's row, so it is taken only for a row).
QUEUE = """
INSERT INTO payhooks_outbox (kind, channel, dedupe_key, subject, body, payload)
SELECT 'event', c.channel, 'relay:' || c.channel || ':' || %(id)s, %(subject)s, %(body)s,
       jsonb_build_object('message_id', %(id)s::text, 'payment', %(payment)s::text)
FROM payhooks_relay_channels c
CROSS JOIN LATERAL (
    SELECT pg_advisory_xact_lock(hashtext('payhooks-relay:' || c.channel || ':' || %(payment)s))
) AS in_order
ON CONFLICT (dedupe_key) DO NOTHING
"""


def params(message: Relayed) -> dict[str, str]:
    """``QUEUE``'s parameters."""
    return {
        "id": message.message_id,
        "payment": message.payment,
        "subject": message.subject,
        "body": message.body,
    }


def queueing(event: Event, order_id: str | None) -> Steps[None]:
    """Queue ``event`` for every relay channel, inside the claim's open transaction."""
    yield Statement(sql=QUEUE, params=params(relayed(event, order_id)), reads=False)


__all__ = [
    "QUEUE",
    "RELAY_PREFIX",
    "Relayed",
    "dispute_figures",
    "message_id",
    "params",
    "payment_of",
    "queueing",
    "relayed",
]
