"""The outbound queue: every email, alert and chat notice payhooks sends, one row each in
``payhooks_outbox`` (docs/design.md, "The outbox").

A message is enqueued in the caller's transaction, beside what it reports, so it exists if and
only if that commits; ``dedupe_key`` makes enqueueing idempotent (one order never queues two
confirmation emails) and is the email's stable Message-ID. It is sent after commit, one at a
time, by whoever holds its row: the reference worker holds a message under a row lock other
workers skip (``hold_next``) for as long as its SMTP call lasts; the notifier leases an
alert's notice (``lease_next``: its next attempt pushed past the call). Each outcome is one
write on that row alone (``mark_sent``, ``retry_later``, ``give_up``), counting the attempt,
so one message that fails backs off by itself and never holds back the others.

Two kinds of rows share the queue. An alert's notices (``alert_key`` set) go to a channel
(``email``, ``webhook``) and are pruned a while after they end (``prune``). An application's
own messages (``alert_key`` NULL: a customer's email, an alert to the operators' address) are
emails; the ones given up are dead letters, listed (``failed``) and queued again (``revive``)
by a person, and the sent ones are deleted by retention. A payment event on its way to a broker
(kind ``event``, on the channel ``nats`` or ``rabbitmq``) is queued by the claim
(``payhooks.intake.relaying``) and published by the relay (``payhooks.relay``); the senders
above never see one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from psycopg.rows import class_row

from payhooks.plumbing.db import Connection


class MessageKind(StrEnum):
    """An application's own messages; an alert's notices are of a ``NoticeKind``."""

    EMAIL = "email"
    """To the ``recipient`` it names."""
    ALERT = "alert"
    """To the operators' address, read when it is sent (``recipient`` stays empty)."""


QUEUED_KINDS = frozenset(("email", "alert", "raised", "repeated", "resolved"))
"""The kinds ``enqueue`` writes: an application's (``MessageKind``) and an alert's notices
(``payhooks.operations.notifier.NoticeKind``). The table takes these and ``event``, which the
claim's own statement queues for the relay."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message to send after commit, queued in the transaction of what it says;
    ``dedupe_key`` makes a second queueing of it a no-op. ``kind`` is a ``MessageKind`` for an
    application's own (the notifier's ``NoticeKind`` for an alert's notices); any other is
    refused here (``ValueError``), not by the table inside the transaction that queues it."""

    kind: str
    dedupe_key: str
    subject: str
    body: str
    recipient: str | None = None
    payload: dict[str, object] = field(default_factory=dict)
    channel: str = "email"
    alert_key: str | None = None
    """The alert (``payhooks_alerts``) a notice speaks for; None for an application's own."""

    def __post_init__(self) -> None:
        if self.kind not in QUEUED_KINDS:
            raise ValueError(
                f"an outbox message's kind is 'email' or 'alert' (MessageKind), not {self.kind!r}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    """A message held or leased for sending; ``attempts`` are the ones before this."""

    id: int
    kind: str
    channel: str
    dedupe_key: str
    alert_key: str | None
    recipient: str | None
    subject: str
    body: str
    attempts: int
    created_at: datetime


_ENQUEUE = """
INSERT INTO payhooks_outbox (kind, channel, dedupe_key, alert_key, recipient, subject, body,
                             payload, created_at, next_attempt_at)
VALUES (%(kind)s, %(channel)s, %(key)s, %(alert)s, %(recipient)s, %(subject)s, %(body)s,
        %(payload)s, coalesce(%(now)s, now()), coalesce(%(now)s, now()))
ON CONFLICT (dedupe_key) DO NOTHING
"""


def enqueue(conn: Connection, message: Message, *, now: datetime | None = None) -> bool:
    """Queue ``message`` in the caller's transaction, unless one with its dedupe key is
    there; whether it was queued. ``now`` is the database's clock unless given."""
    params = {
        "kind": message.kind,
        "channel": message.channel,
        "key": message.dedupe_key,
        "alert": message.alert_key,
        "recipient": message.recipient,
        "subject": message.subject,
        "body": message.body,
        "payload": json.dumps(message.payload),
        "now": now,
    }
    return conn.execute(_ENQUEUE, params).rowcount == 1


_COLUMNS = (
    "id, kind, channel, dedupe_key, alert_key, recipient, subject, body, attempts, created_at"
)
# An application's messages, by the database's clock, each held by one worker's transaction.
_HOLD = f"""
SELECT {_COLUMNS} FROM payhooks_outbox
WHERE sent_at IS NULL AND failed_at IS NULL AND kind <> 'event' AND next_attempt_at <= now()
  AND alert_key IS NULL
ORDER BY next_attempt_at, id
LIMIT 1
FOR UPDATE SKIP LOCKED
"""
# An alert's notices on the channels still working this pass, by the notifier's clock.
_LEASE = f"""
UPDATE payhooks_outbox SET next_attempt_at = %(until)s
WHERE id = (
    SELECT id FROM payhooks_outbox
    WHERE sent_at IS NULL AND failed_at IS NULL AND kind <> 'event'
      AND next_attempt_at <= %(now)s AND alert_key IS NOT NULL AND channel = ANY(%(channels)s)
    ORDER BY next_attempt_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING {_COLUMNS}
"""


def hold_next(conn: Connection) -> Pending | None:
    """Lock one due message in the caller's transaction, skipping rows other workers hold:
    a worker that dies mid-send lets it go at once, and it is sent again."""
    with conn.cursor(row_factory=class_row(Pending)) as cursor:
        return cursor.execute(_HOLD).fetchone()


def lease_next(
    conn: Connection, now: datetime, until: datetime, channels: Sequence[str]
) -> Pending | None:
    """Lease one due notice on ``channels`` until ``until`` and commit the lease: its sender
    calls the channel outside any transaction, and one killed mid-call leaves it to run out."""
    params = {"now": now, "until": until, "channels": list(channels)}
    with conn.transaction(), conn.cursor(row_factory=class_row(Pending)) as cursor:
        return cursor.execute(_LEASE, params).fetchone()


# When a send ended, not when the transaction holding its row began (``hold_next``: the send
# runs inside it, and a server that hangs takes its whole timeout): ``clock_timestamp()``.
_SENT = """
UPDATE payhooks_outbox
SET sent_at = coalesce(%(now)s, clock_timestamp()), attempts = attempts + 1, last_error = NULL
WHERE id = %(id)s
"""
_RETRY = """
UPDATE payhooks_outbox
SET attempts = attempts + 1, last_error = %(error)s,
    next_attempt_at = coalesce(%(now)s, clock_timestamp()) + make_interval(secs => %(delay)s)
WHERE id = %(id)s
"""
_GIVE_UP = """
UPDATE payhooks_outbox
SET attempts = attempts + 1, last_error = %(error)s,
    failed_at = coalesce(%(now)s, clock_timestamp())
WHERE id = %(id)s
"""


def mark_sent(conn: Connection, message_id: int, *, now: datetime | None = None) -> None:
    """Records that a message was sent: it is never sent again."""
    conn.execute(_SENT, {"id": message_id, "now": now})


def retry_later(
    conn: Connection,
    message_id: int,
    error: str,
    delay_seconds: float,
    *,
    now: datetime | None = None,
) -> None:
    """This attempt failed for now: the row waits ``delay_seconds``, the others do not."""
    params = {"id": message_id, "error": error, "delay": delay_seconds, "now": now}
    conn.execute(_RETRY, params)


_TO_THE_BACK = """
UPDATE payhooks_outbox SET last_error = %(error)s, next_attempt_at = now() WHERE id = %(id)s
"""


def to_the_back(conn: Connection, message_id: int, error: str) -> None:
    """Still due, uncounted, but behind every message due before now: the next is tried."""
    conn.execute(_TO_THE_BACK, {"id": message_id, "error": error})


def give_up(conn: Connection, message_id: int, error: str, *, now: datetime | None = None) -> None:
    """No more attempts: an application's message becomes a dead letter, a notice ends."""
    conn.execute(_GIVE_UP, {"id": message_id, "error": error, "now": now})


dead_letter = give_up


# Notices ended are kept a while (what was said, and when), then deleted a batch per pass.
_PRUNE = """
DELETE FROM payhooks_outbox WHERE id = ANY(ARRAY(
    SELECT id FROM payhooks_outbox
    WHERE alert_key IS NOT NULL AND coalesce(sent_at, failed_at) < %(before)s
    LIMIT 1000))
"""


def prune(conn: Connection, before: datetime) -> int:
    """Delete up to a batch of notices that ended before ``before``; returns how many."""
    return conn.execute(_PRUNE, {"before": before}).rowcount


_FAILED = """
SELECT id, kind, dedupe_key, recipient, subject, attempts, last_error, failed_at
FROM payhooks_outbox WHERE failed_at IS NOT NULL AND alert_key IS NULL AND kind <> 'event'
ORDER BY failed_at
"""
_REVIVE = """
UPDATE payhooks_outbox SET failed_at = NULL, attempts = 0, next_attempt_at = now()
WHERE failed_at IS NOT NULL AND alert_key IS NULL AND kind <> 'event'
  AND (%(id)s::bigint IS NULL OR id = %(id)s)
"""
_COUNTS = """
SELECT count(*) FILTER (WHERE sent_at IS NULL AND failed_at IS NULL) AS pending,
       count(*) FILTER (WHERE sent_at IS NOT NULL) AS sent,
       count(*) FILTER (WHERE failed_at IS NOT NULL) AS failed
FROM payhooks_outbox WHERE alert_key IS NULL AND kind <> 'event'
"""


def failed(conn: Connection) -> list[dict[str, object]]:
    """The dead letters: an application's messages given up on, the oldest first."""
    cursor = conn.execute(_FAILED)
    names = [c.name for c in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def revive(conn: Connection, message_id: int | None = None) -> int:
    """Put dead letters (one, or all) back in the queue; returns how many."""
    return conn.execute(_REVIVE, {"id": message_id}).rowcount


def counts(conn: Connection) -> dict[str, int]:
    """An application's messages waiting, sent and dead-lettered."""
    pending, sent, dead = conn.execute(_COUNTS).fetchone() or (0, 0, 0)
    return {"pending": pending, "sent": sent, "failed": dead}


# --- payment events on their way to a broker (``payhooks.relay``) ---------------------------

CHANNELS = ("nats", "rabbitmq")
"""The brokers a relay publishes payment events to; each is a channel of the queue."""

ADD_CHANNEL = """
INSERT INTO payhooks_relay_channels (channel) VALUES (%(channel)s) ON CONFLICT DO NOTHING
"""
REMOVE_CHANNEL = "DELETE FROM payhooks_relay_channels WHERE channel = %(channel)s"
# The events a removed channel left queued, dropped: only once the channel is gone (a relay
# of a channel still there may be publishing them).
DROP_QUEUED = """
DELETE FROM payhooks_outbox
WHERE kind = 'event' AND channel = %(channel)s AND sent_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM payhooks_relay_channels WHERE channel = %(channel)s)
"""
# The relay's hold on its channel for one batch: a second relay skips it, one killed lets go.
HOLD_CHANNEL = """
SELECT channel FROM payhooks_relay_channels WHERE channel = %(channel)s
FOR NO KEY UPDATE SKIP LOCKED
"""
# Whether the channel is there at all, when the hold found nothing: another relay holds it, or
# ``remove_channel`` removed it.
CHANNEL_THERE = "SELECT 1 FROM payhooks_relay_channels WHERE channel = %(channel)s"
# The channel's unpublished events in the order they were queued (through
# payhooks_outbox_relay), less every event of a payment whose refused one is backing off
# (found through payhooks_outbox_relay_refused, core 25: the few unpublished events tried
# before): it holds back that payment's later events and no other payment's, however many
# such payments there are. Without it, refused events filling the window held back all. Less
# too what the relay set aside (``payhooks.relay.relaying.SetAside``): events published whose
# mark the database refused (``aside``), and the payments of events it could not write their
# wait for (``held``), so they neither fill the window nor let a payment's later event go.
RELAY_WINDOW = """
SELECT id, dedupe_key, subject, body, payload ->> 'message_id', payload ->> 'payment',
       next_attempt_at <= now(), attempts
FROM payhooks_outbox
WHERE channel = %(channel)s AND kind = 'event' AND sent_at IS NULL
  AND id <> ALL(%(aside)s::bigint[])
  AND coalesce(payload ->> 'payment', dedupe_key) <> ALL(%(held)s::text[])
  AND coalesce(payload ->> 'payment', dedupe_key) NOT IN (
      SELECT coalesce(payload ->> 'payment', dedupe_key) FROM payhooks_outbox
      WHERE channel = %(channel)s AND kind = 'event' AND sent_at IS NULL AND attempts > 0
        AND next_attempt_at > now())
ORDER BY id
LIMIT %(window)s
"""
# Each returns the rows it wrote: one a trigger, a rule or a row policy of the app's left
# unwritten (no error) is the relay's to set aside, not to take for marked.
PUBLISHED = """
UPDATE payhooks_outbox SET sent_at = now(), attempts = attempts + 1, last_error = NULL
WHERE id = ANY(%(ids)s)
RETURNING id
"""
REFUSED = """
UPDATE payhooks_outbox
SET attempts = attempts + 1, last_error = %(error)s,
    next_attempt_at = now() + make_interval(secs => %(delay)s)
WHERE id = %(id)s
RETURNING id
"""
_BACKLOG = """
SELECT c.name, c.name IN (SELECT channel FROM payhooks_relay_channels),
       count(o.id), coalesce(extract(epoch FROM now() - min(o.created_at)), 0), min(o.created_at)
FROM unnest(%(channels)s::text[]) AS c (name)
LEFT JOIN payhooks_outbox o
       ON o.channel = c.name AND o.kind = 'event' AND o.sent_at IS NULL
GROUP BY c.name ORDER BY c.name
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Backlog:
    """A relay channel's unpublished payment events: how many, and how long the oldest has
    waited; ``relayed`` while events are being queued for it."""

    channel: str
    relayed: bool
    waiting: int
    oldest_seconds: float
    oldest_at: datetime | None


def backlogs(conn: Connection) -> list[Backlog]:
    """Every channel's backlog, zero where nothing waits (a closed set, for metrics)."""
    return [
        Backlog(
            channel=name, relayed=bool(on), waiting=int(n), oldest_seconds=float(age), oldest_at=at
        )
        for name, on, n, age, at in conn.execute(_BACKLOG, {"channels": list(CHANNELS)})
    ]


def add_channel(conn: Connection, channel: str) -> None:
    """From now on every payment event applied is queued for ``channel`` too."""
    conn.execute(ADD_CHANNEL, {"channel": channel})


def remove_channel(conn: Connection, channel: str) -> bool:
    """No more events are queued for ``channel``; those queued stay for a relay to publish.
    Whether it was there."""
    return conn.execute(REMOVE_CHANNEL, {"channel": channel}).rowcount == 1


def drop_queued(conn: Connection, channel: str) -> int:
    """The events a removed ``channel`` left queued, deleted, never to be published; how many
    (none while the channel is there)."""
    return conn.execute(DROP_QUEUED, {"channel": channel}).rowcount


__all__ = [
    "ADD_CHANNEL",
    "CHANNELS",
    "CHANNEL_THERE",
    "DROP_QUEUED",
    "HOLD_CHANNEL",
    "PUBLISHED",
    "REFUSED",
    "RELAY_WINDOW",
    "REMOVE_CHANNEL",
    "Backlog",
    "Message",
    "MessageKind",
    "Pending",
    "add_channel",
    "backlogs",
    "counts",
    "dead_letter",
    "enqueue",
    "failed",
    "give_up",
    "hold_next",
    "lease_next",
    "mark_sent",
    "prune",
    "remove_channel",
    "retry_later",
    "revive",
]
