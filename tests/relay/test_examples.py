"""examples/relay/: the fulfilment service on each broker, run as written, ships each paid
order once: through a republish RabbitMQ keeps (the relay's, after a kill before its mark)
and through the consumer killed and started again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg

from payhooks.operations import outbox
from tests.acceptance.conftest import wait_until
from tests.relay.conftest import jetstream, rabbitmq
from tests.relay.test_relay import drain, paid

EXAMPLES = Path(__file__).parents[2] / "examples" / "relay"


def started(script: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        argv = [sys.executable, str(EXAMPLES / script)]
        return subprocess.Popen(
            argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )


def shipped(conn: psycopg.Connection) -> list[str]:
    try:
        return [r[0] for r in conn.execute("SELECT order_id FROM shipments ORDER BY order_id")]
    except psycopg.errors.UndefinedTable:
        return []


def killed(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def orders(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT id FROM orders ORDER BY id")]


def test_the_rabbitmq_consumer_ships_each_order_once_through_a_republish(
    database_url, conn, rabbit_server, tmp_path
):
    broker = rabbitmq(rabbit_server)
    outbox.add_channel(conn, "rabbitmq")
    paid(conn, 3)
    drain(database_url, broker)
    conn.execute("UPDATE payhooks_outbox SET sent_at = NULL WHERE kind = 'event'")
    drain(database_url, broker)  # the same three again, under the same ids: RabbitMQ keeps both
    env = {"FULFILMENT_DATABASE_URL": database_url, "RABBITMQ_URL": broker.options.url,
           "RABBITMQ_QUEUE": broker.options.queue}  # fmt: skip
    consumer = started("rabbitmq_consumer.py", env, tmp_path / "consumer.log")
    try:
        wait_until(lambda: len(shipped(conn)) == 3, timeout=60, what="three shipments")
        wait_until(
            lambda: conn.execute("SELECT count(*) FROM payhooks_inbox").fetchone()[0] == 3,
            timeout=60, what="the inbox",
        )  # fmt: skip
        killed(consumer)
        paid(conn, 1)
        drain(database_url, broker)
        consumer = started("rabbitmq_consumer.py", env, tmp_path / "consumer.log")
        wait_until(lambda: len(shipped(conn)) == 4, timeout=60, what="the fourth shipment")
    finally:
        killed(consumer)
    assert shipped(conn) == orders(conn)


def test_the_nats_consumer_ships_each_order_once_and_resumes_where_it_stopped(
    database_url, conn, nats_server, tmp_path
):
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    paid(conn, 3)
    drain(database_url, broker)
    env = {"FULFILMENT_DATABASE_URL": database_url, "NATS_URL": broker.options.url,
           "NATS_STREAM": broker.options.stream,
           "NATS_SUBJECTS": f"{broker.options.prefix}.>"}  # fmt: skip
    consumer = started("nats_consumer.py", env, tmp_path / "consumer.log")
    try:
        wait_until(lambda: len(shipped(conn)) == 3, timeout=60, what="three shipments")
        killed(consumer)
        paid(conn, 2)
        drain(database_url, broker)
        consumer = started("nats_consumer.py", env, tmp_path / "consumer.log")
        wait_until(lambda: len(shipped(conn)) == 5, timeout=60, what="five shipments")
    finally:
        killed(consumer)
    assert shipped(conn) == orders(conn)
