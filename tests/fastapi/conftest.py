"""A merchant's FastAPI app served by real uvicorn on a loopback port, driven over HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import uvicorn
from fastapi import FastAPI

from tests.conftest import free_port


@dataclass(frozen=True, slots=True, kw_only=True)
class Served:
    base_url: str

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=30)


@contextmanager
def served(app: FastAPI) -> Iterator[Served]:
    """Serve until the block ends; the app's lifespan opens and closes its pool."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the app did not start"
    try:
        yield Served(base_url=f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
