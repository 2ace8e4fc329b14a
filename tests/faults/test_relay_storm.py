"""The storm with a consumer on each broker the deployment relays to: every paid cart's capture
applied once on NATS JetStream and on RabbitMQ, through relays SIGKILLed, brokers restarted and
consumers crashing between their commit and their acknowledgement."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psycopg
import pytest
from rich.console import Console

from payhooks.operations import outbox
from payhooks.sim.consumers import Brokers, Consumer, ConsumerOptions, Fault
from payhooks.sim.gateway import Gateway
from payhooks.sim.storm import StormOptions, report, run_storm
from tests.acceptance.conftest import PAYHOOKS
from tests.brokers import NatsServer, RabbitServer
from tests.factories import KEYS
from tests.faults.conftest import TOKEN
from tests.faults.test_faults import uncommitted, violations

# 100 simulated seconds a real second, the stories spread over 15 s: the faults, one every two
# seconds in turn, land while the deliveries go on.
OPTIONS = StormOptions(carts=60, concurrency=8, time_scale=100.0, spread_s=1500.0, seed=11)


class RelayProcess:
    """`payhooks relay CHANNEL` on the deployment's database, SIGKILLed and started again."""

    def __init__(self, channel: str, env: dict[str, str], log: Path) -> None:
        self.channel, self.env, self.log = channel, env, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [PAYHOOKS, "relay", self.channel], env=self.env, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def kill_and_restart(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture
def brokers(tmp_path):
    nats_server = NatsServer(tmp_path / "nats")
    rabbit = RabbitServer(tmp_path / "rabbitmq")
    nats_server.start()
    rabbit.start()
    yield nats_server, rabbit
    nats_server.stop()
    rabbit.stop()


def test_every_paid_carts_capture_is_applied_once_on_each_broker_through_faults(
    database_url, server_on, brokers, tmp_path
):
    nats_server, rabbit = brokers
    with psycopg.connect(database_url, autocommit=True) as conn:
        for channel in outbox.CHANNELS:
            outbox.add_channel(conn, channel)
    env = {**os.environ, "DATABASE_URL": database_url, "PAYHOOKS_HOME": str(tmp_path),
           "PAYHOOKS_RELAY_NATS_URL": nats_server.url,
           "PAYHOOKS_RELAY_RABBITMQ_URL": rabbit.url}  # fmt: skip
    relays = [RelayProcess(c, env, tmp_path / f"relay-{c}.log") for c in outbox.CHANNELS]
    for relay in relays:
        relay.start()
    consumers = [
        Consumer(ConsumerOptions(broker="nats", url=nats_server.url, database_url=database_url,
                                 crash_every=7), log=tmp_path / "consumer-nats.log"),
        Consumer(ConsumerOptions(broker="rabbitmq", url=rabbit.url, database_url=database_url,
                                 crash_every=5), log=tmp_path / "consumer-rabbitmq.log"),
    ]  # fmt: skip
    faults = [
        Fault(name="relay SIGKILLed and restarted (nats)", act=relays[0].kill_and_restart),
        Fault(name="relay SIGKILLed and restarted (rabbitmq)", act=relays[1].kill_and_restart),
        Fault(name="nats-server restarted", act=nats_server.restart),
        Fault(name="RabbitMQ restarted", act=rabbit.restart),
    ]
    watching = Brokers(consumers=consumers, database_url=database_url, faults=faults,
                       fault_every_s=2.0)  # fmt: skip
    server = server_on(database_url)
    try:
        result = run_storm(server.base, TOKEN, Gateway(KEYS), OPTIONS, brokers=watching)
    finally:
        for relay in relays:
            relay.stop()
    console = Console(width=120)
    for table in report(result):  # the counts, in the test's output
        console.print(table)
    assert violations(result) == []
    assert uncommitted(database_url, result) == []
    assert all(fault.times >= 1 for fault in faults), [(f.name, f.times) for f in faults]
    names = {check.name for check in result.checks}
    assert "every paid cart's capture applied once via nats" in names
    assert "every paid cart's capture applied once via rabbitmq" in names
    for found, consumer in zip(result.consumed, consumers, strict=True):
        applied = sum(len(orders) for orders in found.applied.values())
        assert consumer.crashes >= 1 and found.received > applied  # redeliveries dropped
