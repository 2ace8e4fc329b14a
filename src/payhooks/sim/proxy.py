"""A loopback TCP proxy in front of PostgreSQL that a test or a benchmark cuts and restores:
the database going away as its clients see it (a failover, a restart, a partition ended by a
reset), without stopping a server others share."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class Proxy:
    """``cut()`` resets every open connection and refuses new ones (nothing listens on the
    port); ``restore()`` listens again on the same port. ``url`` is ``target`` through it.
    ``connect_delay_s``: how long each new connection waits before it reaches the server (a
    loaded or distant database)."""

    connect_delay_s: float = 0.0

    def __init__(self, target: str) -> None:
        parts = conninfo_to_dict(target)
        self._upstream = (str(parts.get("host") or "127.0.0.1"), int(parts.get("port") or 5432))
        self.port = free_port()
        self.url = make_conninfo(target, host="127.0.0.1", port=str(self.port))
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._accepting.start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._accepting is not None:
            self._accepting.join(timeout=5)
        with self._lock:
            dropped, self._open = self._open, set()
        for sock in dropped:
            _reset(sock)

    def close(self) -> None:
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut: the listener was shut down
            if self.connect_delay_s:  # each in a thread of its own, to wait side by side
                threading.Thread(target=self._bridge, args=(client,), daemon=True).start()
            else:  # at once, so that a cut finds every connection already joined
                self._bridge(client)

    def _bridge(self, client: socket.socket) -> None:
        """``client`` joined to the server, after ``connect_delay_s``; reset if the server
        cannot be reached."""
        if self.connect_delay_s:
            time.sleep(self.connect_delay_s)
        try:
            server = _connect(*self._upstream)
        except OSError:
            _reset(client)
            return
        server.settimeout(None)
        with self._lock:
            self._open.update((client, server))
        for source, sink in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        for sock in (source, sink):
            with self._lock:
                self._open.discard(sock)
            _reset(sock)


def _connect(host: str, port: int) -> socket.socket:
    """The server over TCP, or over its Unix socket when ``host`` is a directory (as libpq
    reads a host starting with ``/``: the embedded server listens only there)."""
    if not host.startswith("/"):
        return socket.create_connection((host, port), timeout=5)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.settimeout(5)
    try:
        server.connect(f"{host}/.s.PGSQL.{port}")
    except OSError:
        server.close()
        raise
    return server


def free_port() -> int:
    """A loopback port free now (another process may take it before it is bound)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _reset(sock: socket.socket) -> None:
    """Closed with a TCP reset, as a peer that vanished leaves it. A pump blocked reading the
    socket would keep it open past ``close()``: shutting its reading side down wakes it first."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


__all__ = ["Proxy", "free_port"]
