"""The relay: a channel's payment events from the outbound queue to its broker, after commit.

A pass holds the channel's row (``payhooks_relay_channels``, ``FOR NO KEY UPDATE SKIP
LOCKED``) in a transaction of its own: a second relay of the channel skips it, and one killed
lets it go at once, as the reference worker holds an email. It reads the channel's unpublished
events in the order they were queued, takes each payment's first one only (a payment's next
event waits until this one is confirmed: the order they committed in is the order they are
published in), publishes them together, and marks what the broker confirmed, in the same
transaction. A relay killed between the broker's confirm and that commit publishes the same
events again, under the same message ids.

An outage of the broker leaves the queue to grow (``payhooks_relay_backlog``, the
``relay_backlog`` alert); the relay connects again with a growing wait and drains it. An outage
of the database is waited out the same way: nothing is lost, since nothing is marked until
it commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from payhooks.operations.outbox import (
    CHANNEL_THERE,
    HOLD_CHANNEL,
    PUBLISHED,
    REFUSED,
    RELAY_WINDOW,
)
from payhooks.plumbing.db import AsyncConnection
from payhooks.plumbing.errors import DatabaseUnavailable, PayhooksError
from payhooks.relay.brokers import (
    Broker,
    BrokerUnavailable,
    Confirmed,
    Outcome,
    Outgoing,
    Refused,
    Unconfirmed,
)

log = logging.getLogger("payhooks.relay")


class ChannelRemoved(PayhooksError):
    """The relay's channel was removed while it ran (``payhooks relay remove``): no event is
    queued for it any more, so the relay stops rather than wait for a channel that is gone."""

    def __init__(self, channel: str) -> None:
        super().__init__(
            f"{channel}: the channel was removed (payhooks relay remove {channel}) while this "
            f"relay ran; it stops. The events still queued for {channel} stay: start `payhooks "
            f"relay {channel}` again to queue and publish them"
        )
        self.channel = channel


@dataclass(frozen=True, slots=True, kw_only=True)
class RelayOptions:
    """How much a pass publishes and how the relay waits."""

    batch: int = 100
    """Events published together in one pass, each of another payment."""
    window: int = 1000
    """Unpublished events read per pass, in queue order, to find the batch in."""
    every_s: float = 0.5
    """The wait after a pass that found less than a batch."""
    reconnect_s: float = 0.5
    """The first wait after the broker or the database failed; doubled up to ``reconnect_cap_s``."""
    reconnect_cap_s: float = 30.0
    refused_base_s: float = 1.0
    """A refused event's first wait before it is tried again; doubled up to ``refused_cap_s``."""
    refused_cap_s: float = 300.0
    hold_timeout_ms: int = 15_000
    """A pass idle this long inside its transaction (stuck in a publish) has its session ended
    by PostgreSQL, which lets its channel go (``idle_in_transaction_session_timeout``, set
    for the pass's transaction alone, so it holds behind a transaction pooler too)."""

    def refused_delay(self, attempts: int) -> float:
        """The wait before the next try of an event refused ``attempts + 1`` times."""
        return float(min(self.refused_cap_s, self.refused_base_s * 2.0 ** min(attempts, 30)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Queued:
    """An unpublished event as a pass reads it (``RELAY_WINDOW``)."""

    id: int
    dedupe_key: str
    subject: str
    body: str
    message_id: str
    payment: str
    due: bool
    attempts: int

    def outgoing(self) -> Outgoing:
        """What the broker is handed."""
        return Outgoing(message_id=self.message_id, subject=self.subject, body=self.body.encode())


@dataclass(slots=True)
class Tally:
    """What passes did: events the broker confirmed (of them, ``duplicates`` it already
    had), refused, or left unanswered; ``held_elsewhere`` when another relay held the channel."""

    published: int = 0
    duplicates: int = 0
    refused: int = 0
    unconfirmed: int = 0
    held_elsewhere: bool = False
    passes: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        """Count ``other`` in."""
        self.published += other.published
        self.duplicates += other.duplicates
        self.refused += other.refused
        self.unconfirmed += other.unconfirmed
        self.passes += other.passes
        self.errors += other.errors

    def summary(self) -> str:
        """One line for an operator."""
        return (
            f"published {self.published} event(s) ({self.duplicates} the broker already had), "
            f"{self.refused} refused, {self.unconfirmed} unconfirmed"
        )


def next_batch(queued: Sequence[Queued], size: int) -> list[Queued]:
    """Each payment's first unpublished event, when it is due, in queue order, up to
    ``size``: a payment's later event never goes before its earlier one is confirmed."""
    seen: set[str] = set()
    chosen: list[Queued] = []
    for event in queued:
        if event.payment in seen:
            continue
        seen.add(event.payment)
        if event.due:
            chosen.append(event)
            if len(chosen) == size:
                break
    return chosen


def _queued(row: tuple[Any, ...]) -> Queued:
    ident, key, subject, body, message_id, payment, due, attempts = row
    return Queued(
        id=int(ident),
        dedupe_key=str(key),
        subject=str(subject),
        body=str(body),
        message_id=str(message_id),
        payment=str(payment or key),
        due=bool(due),
        attempts=int(attempts),
    )


_BOUNDED = "SELECT set_config('idle_in_transaction_session_timeout', %s, true)"


async def relay_once(conn: AsyncConnection, broker: Broker, options: RelayOptions) -> Tally:
    """One pass on an autocommit connection: hold the channel, publish a batch, mark it.
    ``ChannelRemoved`` when the channel is gone."""
    channel = {"channel": broker.channel}
    tally = Tally(passes=1)
    async with conn.transaction():
        await conn.execute(_BOUNDED, (str(options.hold_timeout_ms),))
        if await (await conn.execute(HOLD_CHANNEL, channel)).fetchone() is None:
            if await (await conn.execute(CHANNEL_THERE, channel)).fetchone() is None:
                raise ChannelRemoved(broker.channel)
            tally.held_elsewhere = True
            return tally
        window = await conn.execute(RELAY_WINDOW, {**channel, "window": options.window})
        chosen = next_batch([_queued(row) for row in await window.fetchall()], options.batch)
        if not chosen:
            return tally
        outcomes = await broker.publish([event.outgoing() for event in chosen])
        await _mark(conn, chosen, outcomes, options, tally)
    return tally


async def _mark(
    conn: AsyncConnection,
    chosen: Sequence[Queued],
    outcomes: Sequence[Outcome],
    options: RelayOptions,
    tally: Tally,
) -> None:
    confirmed = [e.id for e, o in zip(chosen, outcomes, strict=True) if isinstance(o, Confirmed)]
    if confirmed:
        await conn.execute(PUBLISHED, {"ids": confirmed})
    for event, outcome in zip(chosen, outcomes, strict=True):
        if isinstance(outcome, Confirmed):
            tally.published += 1
            tally.duplicates += outcome.duplicate
        elif isinstance(outcome, Refused):
            tally.refused += 1
            delay = options.refused_delay(event.attempts)
            params = {"id": event.id, "error": outcome.reason[:500], "delay": delay}
            await conn.execute(REFUSED, params)
        elif isinstance(outcome, Unconfirmed):
            tally.unconfirmed += 1
            tally.errors.append(outcome.reason)


Connect = Callable[[], Awaitable[AsyncConnection]]


class Relay:
    """The relay of one channel, until ``stop`` is set: passes one after another while each
    publishes something, else every ``options.every_s``; through an outage of the broker or the
    database it waits, longer each time, and connects again. Its channel removed, it stops,
    raising ``ChannelRemoved``."""

    def __init__(self, connect: Connect, broker: Broker, options: RelayOptions) -> None:
        self.connect = connect
        self.broker = broker
        self.options = options
        self.totals = Tally()
        self._conn: AsyncConnection | None = None
        self._broker_up = False
        self._delay = options.reconnect_s
        self.failure: str | None = None
        """Why the last attempt failed (the broker or the database), while it has not passed."""

    async def run(self, stop: asyncio.Event, *, drain: bool = False) -> Tally:
        """Relay until ``stop`` is set; with ``drain``, until a pass finds nothing due, or an
        attempt fails (``failure`` says why)."""
        try:
            while not stop.is_set():
                tally = await self.attempt()
                if tally is None and drain:
                    break
                if tally is None:
                    await _wait(stop, self._backoff())
                    continue
                self._delay = self.options.reconnect_s
                if tally.published or tally.refused:
                    continue  # more may be due: the next events of the payments just published
                if drain and not tally.held_elsewhere:
                    break
                await _wait(stop, self.options.every_s)
        finally:
            await self.close()
        return self.totals

    async def attempt(self) -> Tally | None:
        """One pass, connecting first when needed; None when the broker or the database
        failed (logged, and connected again on the next attempt)."""
        try:
            if not self._broker_up:
                await self.broker.connect()
                self._broker_up = True
            if self._conn is None or self._conn.closed:
                self._conn = await self.connect()
            tally = await relay_once(self._conn, self.broker, self.options)
        except ChannelRemoved:
            log.error("relay_channel_removed", extra={"channel": self.broker.channel})
            raise
        except BrokerUnavailable as exc:
            await self._broker_down(exc.reason)
            return None
        except (
            psycopg.OperationalError,
            psycopg.InterfaceError,
            psycopg.InternalError,
            DatabaseUnavailable,
        ) as exc:
            if isinstance(exc, psycopg.InternalError) and not (self._conn and self._conn.broken):
                raise
            # An InternalError on a broken connection: a server session ended under a pooler
            # (PgBouncer answering BEGIN for a session it had lost). Connected again next time.
            self.failure = f"database: {_line(exc)}"
            log.warning("relay_database_unavailable", extra={"error": _line(exc)})
            await self._drop_database()
            return None
        self.failure = None
        self.totals.add(tally)
        if tally.published or tally.refused or tally.unconfirmed:
            log.info(
                "relay_published",
                extra={"channel": self.broker.channel, "published": tally.published,
                       "duplicates": tally.duplicates, "refused": tally.refused,
                       "unconfirmed": tally.unconfirmed},
            )  # fmt: skip
        if tally.unconfirmed:
            await self._broker_down(tally.errors[-1])
            return None
        return tally

    async def _broker_down(self, reason: str) -> None:
        self.failure = f"{self.broker.channel}: {reason}"
        log.warning(
            "relay_broker_unavailable", extra={"channel": self.broker.channel, "error": reason}
        )
        self._broker_up = False
        with contextlib.suppress(Exception):
            await self.broker.close()

    async def _drop_database(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
        self._conn = None

    def _backoff(self) -> float:
        delay = self._delay
        self._delay = min(self.options.reconnect_cap_s, self._delay * 2)
        return delay

    async def close(self) -> None:
        """Let go of the broker and the database."""
        await self._drop_database()
        self._broker_up = False
        with contextlib.suppress(Exception):
            await self.broker.close()


def connecting(url: str) -> Connect:
    """Autocommit connections to ``url`` for a relay, preparing no statement on the server:
    behind a transaction pooler (PgBouncer) each pass may run on another server session,
    where one prepared before does not exist, and a pass's few statements gain nothing."""

    async def connect() -> AsyncConnection:
        return await psycopg.AsyncConnection.connect(
            url,
            autocommit=True,
            application_name="payhooks-relay",
            connect_timeout=10,
            prepare_threshold=None,
        )

    return connect


def run(connect: Connect, broker: Broker, options: RelayOptions, *, once: bool = False) -> Relay:
    """A relay run until SIGTERM or Ctrl-C (or, ``once``, until nothing is left due or an
    attempt fails), on an event loop of its own; the relay, with its ``totals`` and
    ``failure``."""
    relay = Relay(connect, broker, options)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await relay.run(stop, drain=once)

    asyncio.run(main())
    return relay


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


def _line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


__all__ = [
    "ChannelRemoved",
    "Connect",
    "Queued",
    "Relay",
    "RelayOptions",
    "Tally",
    "connecting",
    "next_batch",
    "relay_once",
    "run",
]
