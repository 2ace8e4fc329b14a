"""Real PostgreSQL for every test: DATABASE_URL when set, else an embedded server.

Each test gets its own database cloned from a migrated template (fast, isolated).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import pytest
import uvicorn
from hypothesis import settings
from psycopg.conninfo import make_conninfo

from payhooks import db
from payhooks.service import database
from payhooks.service.config import Settings
from payhooks.service.web import create_app
from payhooks.sim.proxy import Proxy

# No timing thresholds in tests: hypothesis's default 200 ms deadline per example fails a
# correct property on a busy two-core machine (CI runs two workers). Examples stay bounded by
# their count.
settings.register_profile("payhooks", deadline=None)
settings.load_profile("payhooks")

T = TypeVar("T")
R = TypeVar("R")


@pytest.fixture(scope="session")
def admin_url() -> Iterator[str]:
    """The embedded server's folder is not under pytest's own temporary root: another pytest
    session starting meanwhile resets that root to 0700, and the server, which runs as a user
    of its own, would lose its data directory mid-run."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    home = Path(tempfile.mkdtemp(prefix="payhooks-test-pg-"))
    try:
        yield database.embedded_url(home)
    finally:
        database.stop_embedded(home)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def template_db(admin_url: str) -> Iterator[str]:
    name = f"payhooks_tpl_{uuid.uuid4().hex[:10]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    with psycopg.connect(make_conninfo(admin_url, dbname=name), autocommit=True) as conn:
        database.migrate(conn)
    yield name
    _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(admin_url: str, template_db: str) -> Iterator[str]:
    name = f"payhooks_t_{uuid.uuid4().hex[:12]}"
    _admin(admin_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield make_conninfo(admin_url, dbname=name)
    _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def conn(database_url: str) -> Iterator[db.Connection]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def proxy(database_url: str) -> Iterator[Proxy]:
    """The test's database behind a loopback proxy the test cuts and restores: the database
    gone away (every connection reset, new ones refused) and back."""
    made = Proxy(database_url)
    yield made
    made.close()


def _admin(url: str, sql: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.encode())


DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Service:
    """A real payhooks app served by uvicorn on a loopback port, for HTTP-level tests."""

    base_url: str
    token: str
    database_url: str

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url, timeout=10, headers={"authorization": f"Bearer {self.token}"}
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving_app(app: Any) -> Iterator[str]:
    """Any ASGI app under real uvicorn on a loopback port, until the block ends; yields its
    base URL. The app's lifespan opens and closes what it holds."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the app did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serving(settings: Settings, url: str) -> Iterator[Service]:
    token = "test-token"
    with serving_app(create_app(settings, api_token=token, url=url)) as base_url:
        yield Service(base_url=base_url, token=token, database_url=url)


@pytest.fixture
def service(database_url: str) -> Iterator[Service]:
    from tests.factories import SETTINGS

    with serving(SETTINGS, database_url) as running:
        yield running


class Inbox:
    """A real SMTP server on loopback (aiosmtpd) that keeps what it receives.

    Recipients containing ``reject`` get a permanent 550, ``later`` a temporary 451;
    ``delay`` seconds are spent on each message, to catch a worker mid-batch.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.messages: list[EmailMessage] = []
        self.delay = delay
        self._lock = threading.Lock()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if "reject" in address:
            return "550 no such mailbox"
        if "later" in address:
            return "451 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.delay:
            await asyncio.sleep(self.delay)
        with self._lock:
            self.messages.append(message_from_bytes(envelope.content, policy=default))
        return "250 OK"

    def ids(self) -> list[str]:
        with self._lock:
            return [m["Message-ID"] for m in self.messages]


@contextmanager
def smtp_server(inbox: Inbox, port: int | None = None) -> Iterator[int]:
    from aiosmtpd.controller import Controller

    port = port or free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    box = Inbox()
    with smtp_server(box) as port:
        yield box, port


def released_together(
    items: list[T], prepare: Callable[[T], Any], act: Callable[[Any, T], R]
) -> list[R]:
    """Each item on its own thread: ``prepare(item)`` (a context manager, e.g. a connection)
    is entered first, then all threads are released at once by a barrier to ``act``. Results
    come back in completion order; any thread's exception fails the calling test."""
    barrier = threading.Barrier(len(items))
    results: list[R] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(item: T) -> None:
        try:
            with prepare(item) as resource:
                barrier.wait()
                result = act(resource, item)
            with lock:
                results.append(result)
        except BaseException as exc:  # reported below, in the test's own thread
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=run, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert errors == []
    return results
