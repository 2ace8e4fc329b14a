"""The consumer's side: apply each relayed event once, however often the broker delivers it.

A broker delivers at least once: JetStream redelivers a message not acknowledged in time,
RabbitMQ one whose consumer went away before acknowledging it, and a relay killed before it
marked what it published publishes it again (JetStream drops that within its duplicate window,
RabbitMQ never). So a consumer claims the message's id in its own transaction, as payhooks
claims a delivery's key: one insert into ``payhooks_inbox``, and the effect only when it
inserted. The claim and the effect commit together or not at all; acknowledge the message to
the broker after the commit, and a crash between the two redelivers a message the inbox then
answers as seen::

    with psycopg.connect(FULFILMENT_DATABASE_URL, autocommit=True) as conn:
        inbox.install(conn)  # once, or copy SCHEMA into your migrations

    # for each message received (msg.headers["Nats-Msg-Id"], or RabbitMQ's msg.message_id):
    def ship(conn):
        conn.execute("INSERT INTO shipments (order_id) VALUES (%s)", (event["order_id"],))

    inbox.once(conn, "fulfilment", message_id, ship)   # True: applied; False: seen before
    await msg.ack()

The inbox is keyed by consumer as well, so several services may keep theirs in one database.
Nothing here imports a broker's client: the examples (``examples/relay/``) show both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from payhooks.plumbing.db import AsyncConnection, Connection

SCHEMA = """
CREATE TABLE IF NOT EXISTS payhooks_inbox (
    consumer    text        NOT NULL,
    message_id  text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS payhooks_inbox_received ON payhooks_inbox (received_at);
"""
"""The inbox's table, in the consumer's own database."""

CLAIM = """
INSERT INTO payhooks_inbox (consumer, message_id) VALUES (%s, %s)
ON CONFLICT DO NOTHING RETURNING 1
"""
_PRUNE = """
DELETE FROM payhooks_inbox WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM payhooks_inbox WHERE received_at < %s LIMIT 10000))
"""


def install(conn: Connection) -> None:
    """Create the inbox's table where it is missing."""
    conn.execute(SCHEMA)


def claim(conn: Connection, consumer: str, message_id: str) -> bool:
    """Inside the caller's open transaction: True the first time ``consumer`` sees
    ``message_id`` (apply it, then commit), False after (a twin waits on the first one's
    uncommitted row, and answers False once it commits)."""
    return conn.execute(CLAIM, (consumer, message_id)).fetchone() is not None


async def claim_async(conn: AsyncConnection, consumer: str, message_id: str) -> bool:
    """``claim`` on an async connection."""
    return await (await conn.execute(CLAIM, (consumer, message_id))).fetchone() is not None


def once(
    conn: Connection, consumer: str, message_id: str, apply: Callable[[Connection], object]
) -> bool:
    """Claim and apply in one transaction of its own: whether it was applied now. An error
    in ``apply`` rolls the claim back too: leave the message unacknowledged, to come again."""
    with conn.transaction():
        if not claim(conn, consumer, message_id):
            return False
        apply(conn)
    return True


async def once_async(
    conn: AsyncConnection,
    consumer: str,
    message_id: str,
    apply: Callable[[AsyncConnection], Awaitable[object]],
) -> bool:
    """``once`` on an async connection."""
    async with conn.transaction():
        if not await claim_async(conn, consumer, message_id):
            return False
        await apply(conn)
    return True


def prune(conn: Connection, before: datetime) -> int:
    """Delete up to 10,000 entries received before ``before``; how many. Keep them longer than
    a message can come again: a redelivery waits for an acknowledgement that never came, and
    a republish for a relay that was down; weeks, not minutes."""
    return conn.execute(_PRUNE, (before,)).rowcount


__all__ = ["CLAIM", "SCHEMA", "claim", "claim_async", "install", "once", "once_async", "prune"]
