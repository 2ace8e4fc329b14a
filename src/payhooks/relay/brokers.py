"""What the relay asks of a broker: publish a batch, and say of each message whether the broker
confirmed it, refused it, or left it unknown.

The three answers are kept apart because they call for three different things. Confirmed: the
broker has it (JetStream's acknowledgement, RabbitMQ's publisher confirm), and the row is marked
published. Refused: the broker answered no (a stream there that takes no such subject, nothing
bound to take it, a negative confirm): the row is tried again later, backing off alone, and
holds back its payment's later events meanwhile. Unconfirmed: no answer (a timeout, the
connection lost), or no one there to answer (JetStream's 503 while its stream is gone or it is
down): nothing is known, nothing is written, the relay takes the broker for away (the whole
channel waits, then connects again), and the message is published again under the same id,
which the broker (within JetStream's duplicate window) or the consumer's inbox drops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from payhooks.plumbing.errors import PayhooksError


@dataclass(frozen=True, slots=True, kw_only=True)
class Outgoing:
    """One message to publish: its stable id, its subject under the relay's prefix, its body."""

    message_id: str
    subject: str
    body: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmed:
    """The broker has the message; ``duplicate`` when it already had this id (JetStream)."""

    duplicate: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """The broker answered that it will not take the message."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Unconfirmed:
    """No answer: the message may or may not be there."""

    reason: str


Outcome = Confirmed | Refused | Unconfirmed


class BrokerUnavailable(PayhooksError):
    """The broker cannot be reached or set up: the relay waits and connects again."""

    def __init__(self, channel: str, reason: str) -> None:
        super().__init__(f"{channel}: {reason}")
        self.channel = channel
        self.reason = reason


class Broker(Protocol):
    """A connection to one broker, as the relay uses it (``payhooks.relay.nats.JetStream``,
    ``payhooks.relay.rabbitmq.RabbitMQ``)."""

    @property
    def channel(self) -> str:
        """The outbound queue's channel it publishes (``nats``, ``rabbitmq``)."""
        ...

    async def connect(self) -> None:
        """Connect, and make sure what it publishes to exists (a stream, an exchange and its
        queue); ``BrokerUnavailable`` when it cannot."""
        ...

    async def publish(self, messages: Sequence[Outgoing]) -> list[Outcome]:
        """Publish every message at once, each answered in the order given."""
        ...

    async def close(self) -> None:
        """Let go of the connection; safe to call when it is already gone."""
        ...


__all__ = [
    "Broker",
    "BrokerUnavailable",
    "Confirmed",
    "Outcome",
    "Outgoing",
    "Refused",
    "Unconfirmed",
]
