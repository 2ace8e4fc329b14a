"""Message brokers of the tests' own: a nats-server with JetStream and a RabbitMQ node, each on
a free loopback port with its data in a folder of its own, so a test can stop and restart one
without touching the machine's services (or another test's). The binaries come from the
system's packages (``nats-server``, ``rabbitmq-server``), which ``scripts/test`` installs when
they are missing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import free_port

NATS_SERVER = shutil.which("nats-server", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
"""The server itself, not Debian's /usr/sbin wrapper (which runs it as the rabbitmq user,
with the machine's node name and configuration)."""


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def wait_for(check, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.05)


class Server:
    """A broker process on a fixed port: stopped (SIGTERM, as a service manager stops it)
    and started again on the same port with the same data."""

    name = "broker"

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        home.mkdir(parents=True, exist_ok=True)

    def command(self) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        raise NotImplementedError

    start_timeout = 30.0

    def start(self) -> None:
        argv, env = self.command()
        with (self.home / "server.log").open("ab") as log:
            self.process = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_for(self.ready, timeout=self.start_timeout, what=f"{self.name} on {self.port}")

    def ready(self) -> bool:
        assert self.process is not None and self.process.poll() is None, self.log()
        return listening(self.port)

    def log(self) -> str:
        return (self.home / "server.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        wait_for(lambda: not listening(self.port), timeout=30, what=f"{self.name} gone")

    def restart(self) -> None:
        self.stop()
        self.start()


class NatsServer(Server):
    """nats-server with JetStream, storing under its folder."""

    name = "nats-server"
    start_timeout = 15.0

    def command(self) -> tuple[list[str], dict[str, str]]:
        assert NATS_SERVER, "nats-server is not installed (scripts/test installs it)"
        argv = [NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.port), "-js",
                "-sd", str(self.home / "jetstream")]  # fmt: skip
        return argv, dict(os.environ)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


class RabbitServer(Server):
    """A RabbitMQ node of its own (its node name, ports, configuration, cookie and data)."""

    name = "rabbitmq-server"
    start_timeout = 60.0

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.dist_port = free_port()
        (home / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        (home / "enabled_plugins").write_text("[].\n")
        (home / "env.conf").write_text("")

    def command(self) -> tuple[list[str], dict[str, str]]:
        assert Path(RABBITMQ_SERVER).exists(), "rabbitmq-server is not installed"
        env = {
            **os.environ,
            "HOME": str(self.home),  # its own Erlang cookie
            "RABBITMQ_CONF_ENV_FILE": str(self.home / "env.conf"),
            "RABBITMQ_NODENAME": f"payhooks-test-{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(self.home / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.home / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(self.home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.home / "log"),
            "RABBITMQ_LOGS": "-",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }
        return [RABBITMQ_SERVER], env

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"
