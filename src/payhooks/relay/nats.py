"""NATS JetStream as the relay's broker (the ``nats`` extra: nats-py).

Each event is published to ``<prefix>.<gateway>.<kind>`` with the header ``Nats-Msg-Id`` set
to its message id, and counts as published once JetStream acknowledges it (stored in the
stream). JetStream drops a second message of one id within the stream's duplicate window
(``duplicate_window``, two minutes by default): the republish of a relay killed before it
marked what it published is dropped there, and past the window by the consumer's inbox
(``payhooks.relay.inbox``).

On connecting, the stream is created when there is none of its name (file storage, the
subjects ``<prefix>.>``, the duplicate window asked for); one that exists is used as it is.

JetStream answers a publish nothing takes with a 503, "no responders". That is a refusal of
the event only when the stream is there and takes no such subject (a stream of the merchant's
own, narrower than ``<prefix>.>``). The stream gone, or JetStream not answering, is an outage:
the relay waits, and its next connection makes the stream again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig

from payhooks.relay import brokers

CHANNEL = "nats"


@dataclass(frozen=True, slots=True, kw_only=True)
class NatsOptions:
    """Where and how the relay publishes to JetStream."""

    url: str = "nats://127.0.0.1:4222"
    stream: str = "PAYHOOKS"
    prefix: str = "payhooks"
    duplicate_window_s: float = 120.0
    timeout_s: float = 5.0
    """How long a publish waits for JetStream's acknowledgement, and a connection for the
    server."""


class JetStream:
    """The relay's connection to JetStream (``payhooks.relay.brokers.Broker``)."""

    channel = CHANNEL

    def __init__(self, options: NatsOptions) -> None:
        self.options = options
        self._client: Client | None = None
        self._js: JetStreamContext | None = None

    async def connect(self) -> None:
        """Connect once (no reconnecting behind the relay's back: the relay reconnects), and
        make sure the stream is there."""
        await self.close()
        try:
            client = await asyncio.wait_for(
                nats.connect(
                    servers=[self.options.url],
                    connect_timeout=self.options.timeout_s,
                    allow_reconnect=False,
                    max_reconnect_attempts=1,  # 0 would try the one server for ever
                    reconnect_time_wait=0.1,
                    error_cb=_quiet,
                    name="payhooks-relay",
                ),
                2 * self.options.timeout_s + 1,
            )
        except (OSError, TimeoutError, nats.errors.Error) as exc:
            raise brokers.BrokerUnavailable(CHANNEL, f"cannot connect: {_said(exc)}") from exc
        self._client = client
        self._js = client.jetstream(timeout=self.options.timeout_s)
        await self._ensure_stream(self._js)

    async def _ensure_stream(self, js: JetStreamContext) -> None:
        name = self.options.stream
        try:
            await js.stream_info(name)
            return
        except nats.js.errors.NotFoundError:
            pass
        except (TimeoutError, nats.errors.Error) as exc:
            raise brokers.BrokerUnavailable(CHANNEL, f"stream {name}: {_said(exc)}") from exc
        config = StreamConfig(
            name=name,
            subjects=[f"{self.options.prefix}.>"],
            storage=StorageType.FILE,
            duplicate_window=self.options.duplicate_window_s,
        )
        try:
            await js.add_stream(config)
        except (TimeoutError, nats.errors.Error) as exc:
            raise brokers.BrokerUnavailable(
                CHANNEL, f"cannot create stream {name}: {_said(exc)}"
            ) from exc

    async def publish(self, messages: Sequence[brokers.Outgoing]) -> list[brokers.Outcome]:
        """Every message at once; each acknowledged, refused or unanswered."""
        if self._js is None or self._client is None or not self._client.is_connected:
            raise brokers.BrokerUnavailable(CHANNEL, "not connected")
        js = self._js
        answers = await asyncio.gather(*(self._one(js, m) for m in messages))
        unheard = [subject for subject in answers if isinstance(subject, str)]
        taken = await self._taken(js) if unheard else ()
        return [_unheard(a, taken) if isinstance(a, str) else a for a in answers]

    async def _one(self, js: JetStreamContext, message: brokers.Outgoing) -> brokers.Outcome | str:
        """The broker's answer; the subject when no one answered (503, no responders)."""
        subject = f"{self.options.prefix}.{message.subject}"
        try:
            ack = await js.publish(
                subject,
                message.body,
                timeout=self.options.timeout_s,
                stream=self.options.stream,
                headers={"Nats-Msg-Id": message.message_id},
            )
        except (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError):
            return subject
        except nats.js.errors.APIError as exc:
            if exc.code is not None and exc.code >= 500:  # JetStream's state, not this event's:
                return brokers.Unconfirmed(reason=f"JetStream: {_said(exc)}")  # a full stream, say
            return brokers.Refused(reason=f"JetStream refused it: {_said(exc)}")
        except (TimeoutError, OSError, nats.errors.Error) as exc:
            return brokers.Unconfirmed(reason=_said(exc))
        return brokers.Confirmed(duplicate=bool(ack.duplicate))

    async def _taken(self, js: JetStreamContext) -> Sequence[str] | brokers.Unconfirmed:
        """The subjects the stream takes, asked once a publish met no responders; the outage
        when JetStream cannot say: the stream gone, or JetStream not answering."""
        name = self.options.stream
        try:
            info = await js.stream_info(name)
        except nats.js.errors.NotFoundError:
            return brokers.Unconfirmed(reason=f"no responders: stream {name} is gone")
        except (TimeoutError, OSError, nats.errors.Error) as exc:
            return brokers.Unconfirmed(
                reason=f"no responders, and JetStream does not answer: {_said(exc)}"
            )
        return info.config.subjects or ()

    async def close(self) -> None:
        """Close the connection, if any."""
        client, self._client, self._js = self._client, None, None
        if client is not None and not client.is_closed:
            with contextlib.suppress(OSError, TimeoutError, nats.errors.Error):
                await client.close()


def _unheard(subject: str, taken: Sequence[str] | brokers.Unconfirmed) -> brokers.Outcome:
    """A publish of ``subject`` no one answered: refused when the stream is there and takes no
    such subject; else an outage, which the whole channel waits out."""
    if isinstance(taken, brokers.Unconfirmed):
        return taken
    if any(_matches(pattern, subject) for pattern in taken):
        return brokers.Unconfirmed(reason=f"no responders for {subject}: JetStream does not answer")
    return brokers.Refused(reason=f"no stream takes {subject}")


def _matches(pattern: str, subject: str) -> bool:
    """NATS' subject matching: ``*`` is one token, ``>`` the rest (one token or more)."""
    wanted, given = pattern.split("."), subject.split(".")
    for n, token in enumerate(wanted):
        if token == ">":
            return len(given) > n
        if n >= len(given) or token not in ("*", given[n]):
            return False
    return len(wanted) == len(given)


async def _quiet(exc: Exception) -> None:
    """The client's own report of a connection error: the relay says it once, in its log."""


def _said(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]


__all__ = ["CHANNEL", "JetStream", "NatsOptions"]
