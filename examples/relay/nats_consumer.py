"""A fulfilment service on NATS JetStream: ships each paid order once, however often the broker
delivers its event (docs/operations.md, "The relay").

    pip install 'payhooks[nats]'
    FULFILMENT_DATABASE_URL=postgresql://... NATS_URL=nats://127.0.0.1:4222 \\
        python examples/relay/nats_consumer.py

A durable pull consumer on the relay's stream (``PAYHOOKS``), subjects ``payhooks.>``: each
message is claimed in the inbox by its ``Nats-Msg-Id`` and applied in one transaction, then
acknowledged, one message out at a time (``max_ack_pending=1``: a payment's events in order).
Killed between the commit and the ack, it is sent the message again after ``ack_wait`` and the
inbox answers it seen.
"""

from __future__ import annotations

import asyncio
import json
import os

import nats
import psycopg
from nats.js.api import ConsumerConfig

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


async def consume(conn: psycopg.Connection, url: str, stream: str, subjects: str) -> None:
    client = await nats.connect(url)
    js = client.jetstream()
    pull = await js.pull_subscribe(
        subjects,
        durable=CONSUMER,
        stream=stream,
        # One message out at a time: one left unacknowledged (apply raised, the service died)
        # comes again after ack_wait, before any later one, so a payment's events are applied
        # in the stream's order. JetStream's default (1,000 out) hands the later ones out first.
        config=ConsumerConfig(ack_wait=5.0, max_ack_pending=1),
    )
    while True:
        try:
            messages = await pull.fetch(10, timeout=1)
        except TimeoutError:  # nothing came: nats-py raises its own or asyncio's, both this
            continue
        for message in messages:
            message_id = (message.headers or {})["Nats-Msg-Id"]
            inbox.once(conn, CONSUMER, message_id, ship(json.loads(message.data), message_id))
            await message.ack()  # after the commit: a crash before it redelivers


def main() -> None:
    with psycopg.connect(os.environ["FULFILMENT_DATABASE_URL"], autocommit=True) as conn:
        inbox.install(conn)
        conn.execute(SCHEMA)
        asyncio.run(consume(conn, os.environ.get("NATS_URL", "nats://127.0.0.1:4222"),
                            os.environ.get("NATS_STREAM", "PAYHOOKS"),
                            os.environ.get("NATS_SUBJECTS", "payhooks.>")))  # fmt: skip


if __name__ == "__main__":
    main()
