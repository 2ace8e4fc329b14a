"""The storm's consumers: a merchant's other service on each broker, applying every payment event
the relay publishes once, through the inbox (``payhooks.relay.inbox``), while the storm breaks
things around it.

Each consumer is a process of its own (``python -m payhooks.sim.consumers``), restarted by its
``Consumer`` whenever it ends: when its broker went away, and when it crashed on purpose, every
``crash_every`` events, right after committing one and before acknowledging it (the case the
inbox is for: the broker delivers it again). What it applied is written to ``storm_applied``,
which has no unique key of its own, so an event applied twice would show there; every delivery
it received, redeliveries included, to ``storm_received``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from payhooks.relay import inbox

TABLES = """
CREATE TABLE IF NOT EXISTS storm_applied (
    broker text NOT NULL, message_id text NOT NULL, kind text, order_id text,
    applied_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS storm_received (
    broker text NOT NULL, message_id text NOT NULL, received_at timestamptz NOT NULL DEFAULT now());
"""
_RECEIVED = "INSERT INTO storm_received (broker, message_id) VALUES (%s, %s)"
_APPLIED = "INSERT INTO storm_applied (broker, message_id, kind, order_id) VALUES (%s, %s, %s, %s)"
CRASHED = 3
"""The exit status of a consumer that crashed on purpose, between its commit and its ack."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOptions:
    """Where one consumer reads from and writes to."""

    broker: str
    """``nats`` or ``rabbitmq``."""
    url: str
    database_url: str
    stream: str = "PAYHOOKS"
    queue: str = "payhooks.events"
    prefix: str = "payhooks"
    crash_every: int = 0
    """Crash after committing every so many events, before acknowledging it (0: never)."""

    def argv(self) -> list[str]:
        """The consumer process's command line."""
        return [sys.executable, "-m", "payhooks.sim.consumers", self.broker, self.url,
                self.database_url, "--stream", self.stream, "--queue", self.queue,
                "--prefix", self.prefix, "--crash-every", str(self.crash_every)]  # fmt: skip


class Applier:
    """One event received: recorded, claimed in the inbox, applied once, committed; then, on
    the ``crash_every``-th applied, the process ends before the broker hears of it."""

    def __init__(self, conn: psycopg.Connection[Any], options: ConsumerOptions) -> None:
        self.conn = conn
        self.options = options
        self.applied = 0

    def __call__(self, message_id: str, body: bytes) -> None:
        import json

        event = json.loads(body)
        broker = self.options.broker
        self.conn.execute(_RECEIVED, (broker, message_id))

        def apply(conn: psycopg.Connection[Any]) -> None:
            conn.execute(_APPLIED, (broker, message_id, event.get("kind"), event.get("order_id")))

        if inbox.once(self.conn, f"storm-{broker}", message_id, apply):
            self.applied += 1
            if self.options.crash_every and self.applied % self.options.crash_every == 0:
                os._exit(CRASHED)  # committed, not acknowledged: the broker sends it again


async def consume_nats(options: ConsumerOptions, applier: Applier) -> None:
    """A durable pull consumer on the stream; acknowledged after the commit."""
    import nats
    from nats.js.api import ConsumerConfig

    client = await nats.connect(options.url, allow_reconnect=False, max_reconnect_attempts=1)
    js = client.jetstream()
    config = ConsumerConfig(ack_wait=2.0, max_ack_pending=100)
    pull = await js.pull_subscribe(f"{options.prefix}.>", durable="storm", stream=options.stream,
                                   config=config)  # fmt: skip
    while True:
        try:
            messages = await pull.fetch(10, timeout=1)
        except nats.errors.TimeoutError:
            continue
        for message in messages:
            applier((message.headers or {}).get("Nats-Msg-Id", ""), message.data)
            await message.ack()


async def consume_rabbitmq(options: ConsumerOptions, applier: Applier) -> None:
    """The relay's queue, ten unacknowledged at most; acknowledged after the commit."""
    import aio_pika

    connection = await aio_pika.connect(options.url)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=10)
    queue = await channel.declare_queue(options.queue, durable=True)
    async with queue.iterator() as messages:
        async for message in messages:
            applier(message.message_id or "", message.body)
            await message.ack()


def main(argv: list[str] | None = None) -> None:
    """``python -m payhooks.sim.consumers BROKER URL DATABASE_URL``: consume until the broker
    goes away (exit 1) or a crash on purpose (exit 3)."""
    parser = argparse.ArgumentParser(prog="payhooks.sim.consumers")
    for name in ("broker", "url", "database_url"):
        parser.add_argument(name)
    parser.add_argument("--stream", default="PAYHOOKS")
    parser.add_argument("--queue", default="payhooks.events")
    parser.add_argument("--prefix", default="payhooks")
    parser.add_argument("--crash-every", type=int, default=0)
    given = parser.parse_args(argv)
    options = ConsumerOptions(**vars(given))
    with psycopg.connect(options.database_url, autocommit=True) as conn:
        applier = Applier(conn, options)
        consume = consume_nats if options.broker == "nats" else consume_rabbitmq
        asyncio.run(consume(options, applier))


@dataclass(slots=True)
class Consumer:
    """A consumer process kept running (restarted whenever it ends) until ``stop``."""

    options: ConsumerOptions
    log: Path
    crashes: int = 0
    """Ends on purpose, between a commit and its acknowledgement."""
    restarts: int = 0
    """Ends for any other reason (its broker went away)."""
    _process: subprocess.Popen[bytes] | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Run it, and restart it whenever it ends."""
        self._thread = threading.Thread(target=self._keep, daemon=True)
        self._thread.start()

    def _keep(self) -> None:
        while not self._stopping.is_set():
            with self.log.open("ab") as out:
                self._process = subprocess.Popen(
                    self.options.argv(), stdout=out, stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )  # fmt: skip
            code = self._process.wait()
            if self._stopping.is_set():
                return
            if code == CRASHED:
                self.crashes += 1
            else:
                self.restarts += 1
                self._stopping.wait(0.5)

    def stop(self) -> None:
        """Stop it for good."""
        self._stopping.set()
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=30)
        if self._thread is not None:
            self._thread.join(timeout=30)


def prepare(database_url: str) -> None:
    """The consumers' tables and inbox, in their database."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        inbox.install(conn)
        conn.execute(TABLES)


@dataclass(frozen=True, slots=True, kw_only=True)
class Consumed:
    """What one broker's consumer did, read from its database."""

    broker: str
    applied: dict[str, list[str | None]]
    """Each message id applied, with the order each application named (one, if once)."""
    received: int
    """Deliveries received, redeliveries and republishes included."""


def consumed(database_url: str, broker: str) -> Consumed:
    """Read what the consumer of ``broker`` applied and received."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        applied: dict[str, list[str | None]] = {}
        for message_id, order_id in conn.execute(
            "SELECT message_id, order_id FROM storm_applied WHERE broker = %s", (broker,)
        ):
            applied.setdefault(message_id, []).append(order_id)
        row = conn.execute(
            "SELECT count(*) FROM storm_received WHERE broker = %s", (broker,)
        ).fetchone()
    return Consumed(broker=broker, applied=applied, received=int(row[0]) if row else 0)


@dataclass(slots=True, kw_only=True)
class Fault:
    """Something the storm does to the deployment while it delivers: kill its relay, restart a
    broker. ``act`` does it; ``times`` counts it done."""

    name: str
    act: Callable[[], object]
    times: int = 0


@dataclass(slots=True, kw_only=True)
class Brokers:
    """The brokers the deployment relays to, the storm's consumer on each, and the faults to
    inject while it delivers, one every ``fault_every_s``, in turn."""

    consumers: list[Consumer]
    database_url: str
    faults: list[Fault] = field(default_factory=list)
    fault_every_s: float = 3.0
    wait_s: float = 180.0
    """How long the storm waits, after its checks through the API, for every paid cart's
    event to be applied on every broker."""
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """The consumers running, and the faults beginning."""
        prepare(self.database_url)
        for consumer in self.consumers:
            consumer.start()
        self._thread = threading.Thread(target=self._break_things, daemon=True)
        self._thread.start()

    def _break_things(self) -> None:
        turn = 0
        while self.faults and not self._stopping.wait(self.fault_every_s):
            fault = self.faults[turn % len(self.faults)]
            fault.act()
            fault.times += 1
            turn += 1

    def calm(self) -> None:
        """No more faults (the deliveries are done)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=120)

    def wait_for(self, expected: set[str]) -> list[Consumed]:
        """Until every consumer has applied every expected message id, or the wait is over;
        what each did."""
        deadline = time.monotonic() + self.wait_s
        while True:
            found = [consumed(self.database_url, c.options.broker) for c in self.consumers]
            done = all(expected <= set(each.applied) for each in found)
            if done or time.monotonic() > deadline:
                return found
            time.sleep(0.5)

    def stop(self) -> None:
        """The consumers stopped."""
        self.calm()
        for consumer in self.consumers:
            consumer.stop()


if __name__ == "__main__":
    main()
