"""An ASGI app under uvicorn on a loopback port, in a background thread: how the demo runs the
real service and how the gateways' status-API double is served to whoever asks it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp

START_WAIT_S = 15


@contextlib.contextmanager
def served(
    app: ASGIApp, *, name: str, grace_s: int, not_started: Exception, port: int = 0
) -> Iterator[str]:
    """``app`` on ``port`` of 127.0.0.1 (a free one by default) until the block ends, its
    thread named ``name``; its base URL is yielded once it answers. ``not_started`` is raised
    when it does not start within ``START_WAIT_S``. An answer still under way when the block
    ends is waited for ``grace_s`` seconds, then cut."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    bound = int(sock.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, log_level="error", access_log=False,
                       timeout_graceful_shutdown=grace_s)
    )  # fmt: skip
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_WAIT_S
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        if not server.started:
            raise not_started
        yield f"http://127.0.0.1:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
