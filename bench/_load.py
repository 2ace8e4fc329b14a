"""Shared bench plumbing: a database, a `payhooks serve` process, and a bounded load loop."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
from psycopg.conninfo import make_conninfo

from payhooks.service import database as service_db
from payhooks.sim.gateway import Delivery, GatewaySecrets

KEYS = GatewaySecrets()
PAYHOOKS = str(Path(sys.executable).parent / "payhooks")


@contextmanager
def database() -> Iterator[str]:
    """A fresh, migrated database: on DATABASE_URL's server when set, else embedded."""
    with tempfile.TemporaryDirectory(prefix="payhooks-bench-") as folder:
        admin = os.environ.get("DATABASE_URL") or service_db.embedded_url(Path(folder))
        name = f"payhooks_bench_{os.getpid()}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        url = make_conninfo(admin, dbname=name)
        with psycopg.connect(url, autocommit=True) as conn:
            service_db.migrate(conn)
        try:
            yield url
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def service(url: str, **env: str) -> Iterator[str]:
    with servers(url, 1, **env) as started:
        yield started[0].base


@dataclass(frozen=True)
class Server:
    base: str
    pid: int


@contextmanager
def servers(
    url: str, count: int, command: list[str] | None = None, **env: str
) -> Iterator[list[Server]]:
    """``count`` processes of ``command`` (`payhooks serve`) on loopback ports, all ready.

    ``command`` is given ``--port N``; it must answer ``GET /readyz`` once it is ready.
    """
    environment = {
        **os.environ,
        **KEYS.env(),
        "DATABASE_URL": url,
        "PAYHOOKS_API_TOKEN": "bench",
        **env,
    }
    processes: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        for _ in range(count):
            port = free_port()
            process = subprocess.Popen(
                [*(command or [PAYHOOKS, "serve"]), "--port", str(port)],
                env=environment,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            processes.append((process, f"http://127.0.0.1:{port}"))
        for _, base in processes:
            _wait_ready(base)
        yield [Server(base=base, pid=process.pid) for process, base in processes]
    finally:
        for process, _ in processes:
            process.terminate()
        for process, _ in processes:
            process.wait(timeout=30)


def _wait_ready(base: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)


@dataclass
class Run:
    latencies: list[float]
    statuses: dict[int, int]
    seconds: float

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000

    def summary(self) -> str:
        if not self.latencies:
            return "no deliveries (the run ended before the first answer)"
        return (
            f"{len(self.latencies)} deliveries in {self.seconds:.1f} s "
            f"({len(self.latencies) / self.seconds:.0f}/s), p50 {self.percentile(50):.1f} ms, "
            f"p99 {self.percentile(99):.1f} ms, "
            f"mean {statistics.fmean(self.latencies) * 1000:.1f} ms, "
            f"statuses {dict(sorted(self.statuses.items()))}"
        )


def load(
    base: str, deliveries: Iterator[Delivery], *, workers: int, until: Callable[[], bool]
) -> Run:
    """``workers`` threads post deliveries back to back until ``until()`` or they run out."""
    lock = threading.Lock()
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    def next_delivery() -> Delivery | None:
        with lock:
            return next(deliveries, None)

    def run() -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            while not until() and (delivery := next_delivery()) is not None:
                started = time.perf_counter()
                status = client.post(
                    delivery.path, content=delivery.body, headers=delivery.headers
                ).status_code
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    statuses[status] = statuses.get(status, 0) + 1

    started = time.perf_counter()
    threads = [threading.Thread(target=run) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Run(latencies=latencies, statuses=statuses, seconds=time.perf_counter() - started)


class Http:
    """One keep-alive HTTP/1.1 connection with the least client work per request.

    httpx spends more CPU per request than the server's own webhook path; on a two-core machine
    that CPU is taken from the system under test, so the throughput benchmark uses this instead.
    """

    def __init__(self, base: str) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = f"{host}:{port}".encode()
        self.buffer = b""

    def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        lines = [f"{method} {path} HTTP/1.1", f"content-length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        head = "\r\n".join(lines).encode() + b"\r\nhost: " + self.host + b"\r\n\r\n"
        self.sock.sendall(head + body)
        return self._response()

    def _response(self) -> tuple[int, bytes]:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self._fill()
        head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, body

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()


Operation = Callable[[Http], int]


def drive(
    bases: list[str],
    operations: Iterator[Operation],
    *,
    workers: int,
    until: Callable[[], bool],
    pace: float | None = None,
) -> Run:
    """Like ``load``, over ``Http``: worker ``i`` keeps one connection to ``bases[i % len]``.

    An operation may be one request or several (a whole purchase); its latency is measured
    from its first byte sent to its last byte received, and it reports one status. With
    ``pace`` (operations per second) operations start on a fixed schedule instead, and their
    latency counts from their scheduled start, so a stalled server is not hidden by a client
    that waited for it.
    """
    lock = threading.Lock()
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    schedule = iter(range(1 << 62))
    origin = time.perf_counter()

    def next_operation() -> tuple[Operation | None, float]:
        with lock:
            operation = next(operations, None)
            if pace is None:
                return operation, time.perf_counter()
            due = origin + next(schedule) / pace
        time.sleep(max(0.0, due - time.perf_counter()))
        return operation, due

    def run(base: str) -> None:
        client = Http(base)
        try:
            while not until():
                operation, started = next_operation()
                if operation is None:
                    break
                status = operation(client)
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    statuses[status] = statuses.get(status, 0) + 1
        finally:
            client.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(bases[i % len(bases)],)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Run(latencies=latencies, statuses=statuses, seconds=time.perf_counter() - started)


def post(delivery: Delivery) -> Operation:
    """The operation that posts one webhook delivery."""
    return lambda client: client.request("POST", delivery.path, delivery.body, delivery.headers)[0]
