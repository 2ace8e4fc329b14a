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
from payhooks.plumbing.db import AsyncConnection, first_line, row_refused
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
    message_id: str | None
    """None when the row's payload lost it: such an event is refused, never published."""
    payment: str
    due: bool
    attempts: int

    def outgoing(self) -> Outgoing:
        """What the broker is handed."""
        assert self.message_id is not None  # refused before a publish (``_unnamed``)
        return Outgoing(message_id=self.message_id, subject=self.subject, body=self.body.encode())


@dataclass(slots=True)
class Tally:
    """What passes did: events the broker confirmed (of them, ``duplicates`` it already
    had), refused, or left unanswered, and those confirmed that the database would not mark;
    ``held_elsewhere`` when another relay held the channel."""

    published: int = 0
    duplicates: int = 0
    refused: int = 0
    unconfirmed: int = 0
    unmarked: int = 0
    """Events whose row the database would not write (set aside): confirmed by the broker
    and not marked, or refused and their wait not written."""
    held_elsewhere: bool = False
    passes: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        """Count ``other`` in."""
        self.published += other.published
        self.duplicates += other.duplicates
        self.refused += other.refused
        self.unconfirmed += other.unconfirmed
        self.unmarked += other.unmarked
        self.passes += other.passes
        self.errors += other.errors

    def summary(self) -> str:
        """One line for an operator."""
        return (
            f"published {self.published} event(s) ({self.duplicates} the broker already had), "
            f"{self.refused} refused, {self.unconfirmed} unconfirmed"
            + (f", {self.unmarked} set aside (their row not written)" if self.unmarked else "")
        )


@dataclass(slots=True)
class SetAside:
    """Events whose row the database would not write, left out of a relay's later passes
    (``RELAY_WINDOW``) until it starts again, each logged as ``relay_mark_failed``."""

    published: dict[int, str] = field(default_factory=dict)
    """By id, their dedupe keys: the broker confirmed them, their mark was refused. The
    payment's later events may go: the broker has this one, in its order."""
    held: dict[str, str] = field(default_factory=dict)
    """By payment, the dedupe key of its event never published (refused by the broker, or
    with no message id) whose wait could not be written: the payment's later events wait."""

    def __bool__(self) -> bool:
        return bool(self.published or self.held)

    def said(self) -> str:
        """Why the relay has not passed, naming the events (the first five)."""
        keys = [*self.published.values(), *self.held.values()]
        named = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
        return (
            f"database: the row of {len(keys)} event(s) could not be written ({named}); set "
            "aside until the relay starts again (relay_mark_failed in the log)"
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
        message_id=None if message_id is None else str(message_id),
        payment=str(payment or key),
        due=bool(due),
        attempts=int(attempts),
    )


_BOUNDED = "SELECT set_config('idle_in_transaction_session_timeout', %s, true)"


async def relay_once(
    conn: AsyncConnection, broker: Broker, options: RelayOptions, aside: SetAside | None = None
) -> Tally:
    """One pass on an autocommit connection: hold the channel, publish a batch, mark it.
    ``ChannelRemoved`` when the channel is gone. An event whose row the database will not
    write is set aside in ``aside`` (the relay's, for its life) and left out of later passes.
    Deferred constraints are checked as each statement ends, not at the commit, so that a row's
    refusal is that row's."""
    aside = SetAside() if aside is None else aside
    channel = {"channel": broker.channel}
    tally = Tally(passes=1)
    async with conn.transaction():
        await conn.execute(_BOUNDED, (str(options.hold_timeout_ms),))
        await conn.execute(_IMMEDIATE)
        if await (await conn.execute(HOLD_CHANNEL, channel)).fetchone() is None:
            if await (await conn.execute(CHANNEL_THERE, channel)).fetchone() is None:
                raise ChannelRemoved(broker.channel)
            tally.held_elsewhere = True
            return tally
        params = {**channel, "window": options.window, "aside": list(aside.published),
                  "held": list(aside.held)}  # fmt: skip
        window = await conn.execute(RELAY_WINDOW, params)
        chosen = next_batch([_queued(row) for row in await window.fetchall()], options.batch)
        for event in chosen:
            if event.message_id is None:
                await _refuse(conn, event, _UNNAMED, options, tally, aside)
        chosen = [event for event in chosen if event.message_id is not None]
        if not chosen:
            return tally
        outcomes = await broker.publish([event.outgoing() for event in chosen])
        await _mark(conn, chosen, outcomes, options, tally, aside)
    return tally


_IMMEDIATE = "SET CONSTRAINTS ALL IMMEDIATE"
_UNNAMED = "its payload holds no message id: not published (a consumer could not tell copies)"


async def _mark(
    conn: AsyncConnection,
    chosen: Sequence[Queued],
    outcomes: Sequence[Outcome],
    options: RelayOptions,
    tally: Tally,
    aside: SetAside,
) -> None:
    confirmed = [e for e, o in zip(chosen, outcomes, strict=True) if isinstance(o, Confirmed)]
    marked = await _marked(conn, confirmed)
    for event, outcome in zip(chosen, outcomes, strict=True):
        if isinstance(outcome, Confirmed) and event.id in marked:
            tally.published += 1
            tally.duplicates += outcome.duplicate
        elif isinstance(outcome, Confirmed):
            tally.unmarked += 1
            aside.published[event.id] = event.dedupe_key
        elif isinstance(outcome, Refused):
            await _refuse(conn, event, outcome.reason, options, tally, aside)
        elif isinstance(outcome, Unconfirmed):
            tally.unconfirmed += 1
            tally.errors.append(outcome.reason)


async def _refuse(
    conn: AsyncConnection,
    event: Queued,
    reason: str,
    options: RelayOptions,
    tally: Tally,
    aside: SetAside,
) -> None:
    """The event's wait before it is tried again, in a savepoint. One whose row the database
    will not write is logged and held with its payment: never published, it holds back the
    payment's later events as its wait would."""
    tally.refused += 1
    delay = options.refused_delay(event.attempts)
    try:
        async with conn.transaction():
            params = {"id": event.id, "error": reason[:500], "delay": delay}
            written = await (await conn.execute(REFUSED, params)).fetchall()
    except psycopg.DatabaseError as exc:
        if _lost(conn, exc):
            raise
        written, why = [], _line(exc)
    else:
        why = _UNWRITTEN
    if not written:
        _refused_write(event, why)
        tally.unmarked += 1
        aside.held[event.payment] = event.dedupe_key


def _refused_write(event: Queued, why: str) -> None:
    log.error(
        "relay_mark_failed", extra={"id": event.id, "dedupe_key": event.dedupe_key, "error": why}
    )


_UNWRITTEN = "the database wrote no row (a trigger, a rule or a row policy left it as it was)"


async def _marked(conn: AsyncConnection, confirmed: Sequence[Queued]) -> set[int]:
    """The ids of ``confirmed`` marked published: all in one statement, or, when the database
    refuses that (a row's trigger or constraint), each in a savepoint of its own, a row it
    refuses logged (``relay_mark_failed``) and left unmarked. A lost connection is no row's
    fault: it ends the pass, as ever."""
    ids = [event.id for event in confirmed]
    if not ids:
        return set()
    try:
        async with conn.transaction():
            rows = await (await conn.execute(PUBLISHED, {"ids": ids})).fetchall()
    except psycopg.DatabaseError as exc:
        if _lost(conn, exc):
            raise
    else:
        marked = {int(row[0]) for row in rows}
        for event in confirmed:
            if event.id not in marked:
                _refused_write(event, _UNWRITTEN)
        return marked
    marked = set()
    for event in confirmed:
        try:
            async with conn.transaction():
                one = await (await conn.execute(PUBLISHED, {"ids": [event.id]})).fetchall()
        except psycopg.DatabaseError as exc:
            if _lost(conn, exc):
                raise
            _refused_write(event, _line(exc))
            continue
        if not one:
            _refused_write(event, _UNWRITTEN)
            continue
        marked.add(event.id)
    return marked


def _lost(conn: AsyncConnection, exc: psycopg.DatabaseError) -> bool:
    """An error not of one row (``row_refused``): the connection or the server gone, a
    pooler's, a bug. It ends the pass, as ever."""
    return not row_refused(conn, exc)


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
        self.set_aside = SetAside()
        """Events whose row the database would not write: left out of later passes."""

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
                if tally.published or tally.refused or tally.unmarked:
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
            tally = await relay_once(self._conn, self.broker, self.options, self.set_aside)
        except ChannelRemoved:
            log.error("relay_channel_removed", extra={"channel": self.broker.channel})
            raise
        except BrokerUnavailable as exc:
            await self._broker_down(exc.reason)
            return None
        except (psycopg.Error, DatabaseUnavailable) as exc:
            # An InternalError on a broken connection: a server session ended under a pooler
            # (PgBouncer answering BEGIN for a session it had lost). Connected again next time.
            # Any other error of a statement is no outage, but waited out and logged all the
            # same: a daemon that exits on one stops relaying every channel event after it.
            away = isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
            if away or isinstance(exc, DatabaseUnavailable) or (self._conn and self._conn.broken):
                log.warning("relay_database_unavailable", extra={"error": _line(exc)})
            else:
                log.exception("relay_failed", extra={"channel": self.broker.channel})
            self.failure = f"database: {_line(exc)}"
            await self._drop_database()
            return None
        self.failure = None
        if self.set_aside:  # it has not passed: those events stay unmarked
            self.failure = self.set_aside.said()
        self.totals.add(tally)
        if tally.published or tally.refused or tally.unconfirmed or tally.unmarked:
            log.info(
                "relay_published",
                extra={"channel": self.broker.channel, "published": tally.published,
                       "duplicates": tally.duplicates, "refused": tally.refused,
                       "unconfirmed": tally.unconfirmed, "unmarked": tally.unmarked},
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
    return first_line(exc)[:200]


__all__ = [
    "ChannelRemoved",
    "Connect",
    "Queued",
    "Relay",
    "RelayOptions",
    "SetAside",
    "Tally",
    "connecting",
    "next_batch",
    "relay_once",
    "run",
]
