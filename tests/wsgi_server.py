"""A WSGI app under real gunicorn, as merchants deploy Django and Flask: a subprocess on a
loopback port, stopped when the block ends."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from tests.conftest import free_port


@contextmanager
def gunicorn_serving(app: str, *, cwd: Path, env: Mapping[str, str]) -> Iterator[str]:
    """``gunicorn app`` (``module:callable``) run from ``cwd``; yields its base URL."""
    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", app,
        "--bind", f"127.0.0.1:{port}", "--workers", "1", "--log-level", "warning",
    ]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=cwd, env=dict(env), stderr=log)
        try:
            _wait_listening(port, process, log)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=30)


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise AssertionError(f"gunicorn exited: {log.read().decode(errors='replace')}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("gunicorn did not start listening")
