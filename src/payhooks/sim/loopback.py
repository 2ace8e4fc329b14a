"""An ASGI app under uvicorn on a loopback port, in a background thread: how the demo runs the
real service and how the gateways' status-API double is served to whoever asks it."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

START_WAIT_S = 15


class Prompt(Protocol):
    """A server ``served`` runs: started in its thread, told to stop."""

    started: bool
    ready: threading.Event

    def run(self, sockets: list[socket.socket] | None = None) -> None: ...

    def stop(self) -> None: ...


@contextlib.contextmanager
def served(
    app: ASGIApp, *, name: str, grace_s: int, not_started: Exception, port: int = 0
) -> Iterator[str]:
    """``app`` on ``port`` of 127.0.0.1 (a free one by default) until the block ends, its
    thread named ``name``; its base URL is yielded once it answers. ``not_started`` is raised
    when it does not start within ``START_WAIT_S``. An answer still under way when the block
    ends is waited for ``grace_s`` seconds, then cut. The server is told to stop, not left to
    notice at uvicorn's next tick (``_prompt``)."""
    import uvicorn

    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    except OSError:  # the port another's: the caller says so, and no socket is left open
        sock.close()
        raise
    bound = int(sock.getsockname()[1])
    server = _prompt()(
        uvicorn.Config(app, log_config=None, log_level="error", access_log=False,
                       timeout_graceful_shutdown=grace_s)
    )  # fmt: skip
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_WAIT_S
    while not server.ready.wait(0.02) and thread.is_alive() and time.monotonic() < deadline:
        pass
    try:
        if not server.started:
            raise not_started
        yield f"http://127.0.0.1:{bound}"
    finally:
        server.stop()
        thread.join(timeout=10)
        sock.close()


@functools.cache
def _prompt() -> Callable[[uvicorn.Config], Prompt]:
    """uvicorn's server, stopped by an event rather than at its next tick: its loop looks every
    100 ms, and its shutdown pauses 100 ms, then waits in steps of 100 ms. Made on first use:
    uvicorn is imported only by what serves."""
    import uvicorn

    class Server(uvicorn.Server):
        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self.ready = threading.Event()
            self.stopping: asyncio.Event | None = None
            self.loop: asyncio.AbstractEventLoop | None = None

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            self.stopping = asyncio.Event()
            self.loop = asyncio.get_running_loop()
            await super().startup(sockets)
            self.ready.set()

        async def main_loop(self) -> None:
            assert self.stopping is not None
            counter = 0
            while not await self.on_tick(counter):
                counter = (counter + 1) % 864_000
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), 0.1)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            """uvicorn's shutdown, its waits in steps of 5 ms: listening stops, each
            connection is told to close after its response, the answers under way end (the
            grace period at most, then cut), then the lifespan's shutdown runs."""
            for listening in self.servers:
                listening.close()
            for sock in sockets or []:
                sock.close()
            for connection in list(self.server_state.connections):
                connection.shutdown()
            state, loop = self.server_state, asyncio.get_running_loop()
            deadline = loop.time() + (self.config.timeout_graceful_shutdown or 0)
            while (state.connections or state.tasks) and loop.time() < deadline:
                await asyncio.sleep(0.005)
            for task in state.tasks:
                task.cancel(msg="cut: the grace period ended")
            for listening in self.servers:
                await listening.wait_closed()
            await self.lifespan.shutdown()

        def stop(self) -> None:
            self.should_exit = True
            if self.loop is not None and self.stopping is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed: it has stopped
                    self.loop.call_soon_threadsafe(self.stopping.set)

    return Server
