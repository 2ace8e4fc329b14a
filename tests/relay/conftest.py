"""One broker of each kind for the relay's tests (started once in a test process, restarted by
the tests that break them; tests/conftest.py hands both modules using them to one process), and
what the tests read back from them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import aio_pika
import nats
import pytest

from payhooks.relay.nats import JetStream, NatsOptions
from payhooks.relay.rabbitmq import WHOLE_ID_HEADER, RabbitMQ, RabbitOptions
from tests.brokers import NatsServer, RabbitServer


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path_factory.mktemp("nats"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def rabbit_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitServer]:
    server = RabbitServer(tmp_path_factory.mktemp("rabbitmq"))
    server.start()
    yield server
    server.stop()


def unique() -> str:
    return uuid.uuid4().hex[:10]


def jetstream(server: NatsServer, **more: float) -> JetStream:
    """A relay's broker on a stream and subjects of the test's own."""
    name = unique()
    return JetStream(NatsOptions(url=server.url, stream=f"T{name}", prefix=f"t{name}", **more))


def rabbitmq(server: RabbitServer) -> RabbitMQ:
    name = unique()
    options = RabbitOptions(url=server.url, exchange=f"x{name}", queue=f"q{name}",
                            prefix=f"t{name}")  # fmt: skip
    return RabbitMQ(options)


@dataclass(frozen=True, slots=True, kw_only=True)
class Received:
    """A message as a consumer finds it: where, under which id, saying what."""

    subject: str
    message_id: str
    body: bytes
    whole_id: str | None = None
    """The event's whole id, where its ``message_id`` is a digest of it (RabbitMQ's header)."""


def stored(broker: JetStream) -> list[Received]:
    """Every message of the broker's stream, in the stream's order."""

    async def read() -> list[Received]:
        client = await nats.connect(broker.options.url)
        try:
            js = client.jetstream()
            state = (await js.stream_info(broker.options.stream)).state
            found = []
            for seq in range(state.first_seq, state.last_seq + 1):
                msg = await js.get_msg(broker.options.stream, seq)
                ident = (msg.headers or {}).get("Nats-Msg-Id", "")
                found.append(Received(subject=msg.subject, message_id=ident, body=msg.data or b""))
            return found if state.messages else []
        finally:
            await client.close()

    return asyncio.run(read())


def queued(broker: RabbitMQ) -> list[Received]:
    """Every message waiting in the relay's queue, in its order (taken off it)."""

    async def read() -> list[Received]:
        connection = await aio_pika.connect(broker.options.url)
        try:
            channel = await connection.channel()
            queue = await channel.get_queue(broker.options.queue)
            found = []
            while (msg := await queue.get(no_ack=True, fail=False)) is not None:
                whole = (msg.headers or {}).get(WHOLE_ID_HEADER)
                found.append(Received(subject=msg.routing_key or "",
                                      message_id=msg.message_id or "", body=msg.body,
                                      whole_id=None if whole is None else str(whole)))  # fmt: skip
            return found
        finally:
            await connection.close()

    return asyncio.run(read())
