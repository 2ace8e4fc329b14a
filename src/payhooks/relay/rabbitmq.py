"""RabbitMQ as the relay's broker (the ``rabbitmq`` extra: aio-pika).

Each event is published, persistent, to a durable topic exchange under the routing key
``<prefix>.<gateway>.<kind>``, with ``message_id`` set to its message id, on a channel in
publisher-confirm mode, mandatory: it counts as published once the broker confirms it, which
for a persistent message routed to a durable queue means written to disk. AMQP holds 255 bytes
of ``message_id``: a longer message id (a payment id of up to 255 characters in it) is sent as
``sha256:`` and its digest, as stable, the whole id in the ``x-payhooks-message-id`` header.
The relay's own queue takes every event, so a message returned unroutable says that queue (or
its binding) is gone: an outage, never the event's refusal; the next connection declares the
queue again, and the event is published then: never dropped at the exchange. A nack refuses
the event alone (it backs off, its error kept): a queue's limit may refuse one message only (a
body over ``x-max-length-bytes``), and waiting for it would stall the channel.

RabbitMQ does not deduplicate by message id: the republish of a relay killed before it marked
what it published reaches the queue a second time, and the consumer's inbox
(``payhooks.relay.inbox``) drops it by its id.

On connecting, the exchange is declared (durable, topic) and one durable queue bound to every
event, so that events wait there until a consumer comes; a consumer may bind queues of its own
to the exchange as well (by gateway, by kind: ``payhooks.*.payment_captured``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import aio_pika
import aio_pika.abc
import aio_pika.exceptions
import aiormq.exceptions

from payhooks.relay import brokers

CHANNEL = "rabbitmq"
MESSAGE_ID_BYTES = 255
"""AMQP's ``message_id`` is a short string: 255 bytes at most."""
WHOLE_ID_HEADER = "x-payhooks-message-id"
"""The event's whole message id, where ``message_id`` carries its digest."""
_TRANSIENT = (
    OSError,
    TimeoutError,
    aio_pika.exceptions.AMQPConnectionError,
    aio_pika.exceptions.ChannelInvalidStateError,
    aiormq.exceptions.AMQPError,
    RuntimeError,  # aiormq's "Connection closed" on a writer that is gone
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RabbitOptions:
    """Where and how the relay publishes to RabbitMQ."""

    url: str = "amqp://guest:guest@127.0.0.1:5672/"
    exchange: str = "payhooks"
    queue: str = "payhooks.events"
    """Declared durable and bound to every event, so events wait there for a consumer."""
    prefix: str = "payhooks"
    timeout_s: float = 5.0
    """How long a publish waits for the broker's confirm, and a connection for the broker."""


class RabbitMQ:
    """The relay's connection to RabbitMQ (``payhooks.relay.brokers.Broker``)."""

    channel = CHANNEL

    def __init__(self, options: RabbitOptions) -> None:
        self.options = options
        self._connection: aio_pika.abc.AbstractConnection | None = None
        self._exchange: aio_pika.abc.AbstractExchange | None = None

    async def connect(self) -> None:
        """Connect once (the relay reconnects, not the client), open a confirming channel,
        declare the exchange and the queue."""
        await self.close()
        try:
            self._connection = await aio_pika.connect(
                self.options.url, timeout=self.options.timeout_s
            )
            channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
            self._exchange = await channel.declare_exchange(
                self.options.exchange, aio_pika.ExchangeType.TOPIC, durable=True
            )
            queue = await channel.declare_queue(self.options.queue, durable=True)
            await queue.bind(self._exchange, routing_key=f"{self.options.prefix}.#")
        except (*_TRANSIENT, aio_pika.exceptions.AMQPError) as exc:
            await self.close()
            raise brokers.BrokerUnavailable(CHANNEL, f"cannot connect: {_said(exc)}") from exc

    async def publish(self, messages: Sequence[brokers.Outgoing]) -> list[brokers.Outcome]:
        """Every message at once on the confirming channel; each confirmed, refused or
        unanswered."""
        exchange = self._exchange
        if exchange is None or self._connection is None or self._connection.is_closed:
            raise brokers.BrokerUnavailable(CHANNEL, "not connected")
        return list(await asyncio.gather(*(self._one(exchange, m) for m in messages)))

    async def _one(
        self, exchange: aio_pika.abc.AbstractExchange, message: brokers.Outgoing
    ) -> brokers.Outcome:
        routing_key = f"{self.options.prefix}.{message.subject}"
        sent_id = amqp_message_id(message.message_id)
        try:
            sent = aio_pika.Message(
                message.body,
                message_id=sent_id,
                headers={}
                if sent_id == message.message_id
                else {WHOLE_ID_HEADER: message.message_id},
                content_type="application/json",
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            )
            await exchange.publish(
                sent, routing_key, mandatory=True, timeout=self.options.timeout_s
            )
        except aiormq.exceptions.PublishError:
            return brokers.Unconfirmed(
                reason=f"no queue is bound to take {routing_key}: the relay's queue "
                f"{self.options.queue} is gone, declared again on connecting"
            )
        except aiormq.exceptions.DeliveryError as exc:  # a nack: may be this message's alone
            return brokers.Refused(reason=f"the broker refused it: {_said(exc)}")
        except _TRANSIENT as exc:
            return brokers.Unconfirmed(reason=_said(exc))
        except Exception as exc:  # this message's alone (a field the protocol cannot carry)
            return brokers.Refused(reason=f"{type(exc).__name__}: {_said(exc)}")
        return brokers.Confirmed()

    async def close(self) -> None:
        """Close the connection, if any."""
        connection, self._connection, self._exchange = self._connection, None, None
        if connection is not None and not connection.is_closed:
            try:
                await asyncio.wait_for(connection.close(), self.options.timeout_s)
            except (*_TRANSIENT, aio_pika.exceptions.AMQPError):
                pass


def amqp_message_id(message_id: str) -> str:
    """``message_id`` as AMQP carries it: itself within 255 bytes, else ``sha256:`` and the
    hex digest of its UTF-8 bytes (stable: a consumer's inbox drops a republish by it)."""
    raw = message_id.encode()
    return (
        message_id if len(raw) <= MESSAGE_ID_BYTES else f"sha256:{hashlib.sha256(raw).hexdigest()}"
    )


def _said(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]


__all__ = ["CHANNEL", "WHOLE_ID_HEADER", "RabbitMQ", "RabbitOptions", "amqp_message_id"]
