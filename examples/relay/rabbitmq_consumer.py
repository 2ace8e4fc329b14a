"""A fulfilment service on RabbitMQ: ships each paid order once, however often the broker
delivers its event (docs/operations.md, "The relay").

    pip install 'payhooks[rabbitmq]'
    FULFILMENT_DATABASE_URL=postgresql://... RABBITMQ_URL=amqp://guest:guest@127.0.0.1:5672/ \\
        python examples/relay/rabbitmq_consumer.py

It reads the relay's queue (``payhooks.events``; a queue of its own bound to the ``payhooks``
exchange works the same): each message is claimed in the inbox by its ``message_id`` and
applied in one transaction, then acknowledged. RabbitMQ keeps a relay's republish as a second
message, and requeues one whose consumer died before acknowledging it: the inbox answers both
seen; so does the broker's redelivery of a message whose ack it never got (it restarted
between the commit and the ack), and the consumer goes on.
"""

from __future__ import annotations

import asyncio
import json
import os

import aio_pika
import psycopg

from payhooks.relay import inbox

CONSUMER = "fulfilment"
SCHEMA = "CREATE TABLE IF NOT EXISTS shipments (order_id text NOT NULL, message_id text NOT NULL)"


def ship(event: dict[str, object], message_id: str):
    """What this service does with a paid order: one shipment."""

    def apply(conn: psycopg.Connection) -> None:
        if event["kind"] == "payment_captured" and event["order_id"]:
            conn.execute(
                "INSERT INTO shipments (order_id, message_id) VALUES (%s, %s)",
                (event["order_id"], message_id),
            )

    return apply


async def consume(conn: psycopg.Connection, url: str, queue_name: str) -> None:
    connection = await aio_pika.connect_robust(url)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=10)
    queue = await channel.declare_queue(queue_name, durable=True)
    async with queue.iterator() as messages:
        async for message in messages:
            message_id = message.message_id or ""
            inbox.once(conn, CONSUMER, message_id, ship(json.loads(message.body), message_id))
            try:
                await message.ack()  # after the commit: a crash before it requeues
            except (aio_pika.exceptions.AMQPError, aio_pika.exceptions.ChannelInvalidStateError):
                # The broker went away between the commit and the ack: it delivers the message
                # again once the connection is back, and the inbox answers it seen.
                continue


def main() -> None:
    with psycopg.connect(os.environ["FULFILMENT_DATABASE_URL"], autocommit=True) as conn:
        inbox.install(conn)
        conn.execute(SCHEMA)
        asyncio.run(consume(conn, os.environ.get("RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/"),
                            os.environ.get("RABBITMQ_QUEUE", "payhooks.events")))  # fmt: skip


if __name__ == "__main__":
    main()
