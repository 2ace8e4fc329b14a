"""Running payhooks commands as a merchant would: subprocesses with their output in a file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from payhooks.sim.gateway_api import ApiKeys
from tests.factories import KEYS

PAYHOOKS = str(Path(sys.executable).parent / "payhooks")


@dataclass
class Process:
    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=15)


@contextmanager
def running(args: list[str], env: dict[str, str], log: Path) -> Iterator[Process]:
    """``payhooks *args`` in the background; SIGTERM (then wait) when the block ends."""
    with log.open("ab") as out:
        popen = subprocess.Popen([PAYHOOKS, *args], env=env, stdout=out, stderr=subprocess.STDOUT)
    process = Process(popen=popen, log=log)
    try:
        yield process
    finally:
        if process.alive():
            popen.terminate()
            popen.wait(timeout=30)


def wait_until(check: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        **KEYS.env(),
        # Reconciliation configured, against a port nothing listens on: a fresh database has
        # no checkout old enough to be asked about, so nothing is ever sent there.
        **ApiKeys().env("http://127.0.0.1:9"),
        "DATABASE_URL": database_url,
        "PAYHOOKS_API_TOKEN": "acceptance",
        "PAYHOOKS_HOME": str(tmp_path),
        "PAYHOOKS_ALERT_EMAIL": "ops@example.com",
        "PAYHOOKS_MAIL_FROM": "shop@example.com",
    }
