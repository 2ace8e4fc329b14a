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

from payhooks import db
from payhooks.gateway import Delivery, GatewaySecrets

KEYS = GatewaySecrets()
PAYHOOKS = str(Path(sys.executable).parent / "payhooks")


@contextmanager
def database() -> Iterator[str]:
    """A fresh, migrated database: on DATABASE_URL's server when set, else embedded."""
    with tempfile.TemporaryDirectory(prefix="payhooks-bench-") as folder:
        admin = os.environ.get("DATABASE_URL") or db.embedded_url(Path(folder))
        name = f"payhooks_bench_{os.getpid()}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        url = make_conninfo(admin, dbname=name)
        with psycopg.connect(url, autocommit=True) as conn:
            db.migrate(conn)
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
    port = free_port()
    environment = {
        **os.environ,
        **KEYS.env(),
        "DATABASE_URL": url,
        "PAYHOOKS_API_TOKEN": "bench",
        **env,
    }
    process = subprocess.Popen(
        [PAYHOOKS, "serve", "--port", str(port)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


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
