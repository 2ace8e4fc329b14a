"""Running payhooks commands as a merchant would: in this process, as the console script calls
them (``invoke``), and, for the commands that serve or keep running, as subprocesses with their
output in a file (``running``)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from payhooks.sim.gateway_api import ApiKeys
from tests.factories import KEYS
from tests.invoking import payhooks_logging_kept

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


def invoke(
    env: dict[str, str], *args: str, input: str = "", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``payhooks *args`` run to its end in this process, as the installed ``payhooks`` script
    runs it (``payhooks.cli.main``) under exactly ``env`` with ``input`` on its stdin, with
    what it writes to stdout and stderr; its exit status as a process's. A command that keeps
    running fails the test. What a command sets for the process (the environment,
    ``payhooks``' log handlers) is put back."""
    from payhooks.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: list[int] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                main()
            code.append(0)
        except SystemExit as exc:
            code.append(exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1)
        except BaseException as exc:  # re-raised in the test's own thread
            failed.append(exc)

    environ, argv, stdin = dict(os.environ), sys.argv, sys.stdin
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [PAYHOOKS, *args]
    sys.stdin = io.StringIO(input)
    try:
        with payhooks_logging_kept():
            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            thread.join(timeout)
            assert not thread.is_alive(), f"payhooks {' '.join(args)} kept running"
    finally:
        os.environ.clear()
        os.environ.update(environ)
        sys.argv, sys.stdin = argv, stdin
    if failed:
        raise failed[0]
    return subprocess.CompletedProcess([PAYHOOKS, *args], code[0], out.getvalue(), err.getvalue())


def wait_until(check: Callable[[], bool], *, timeout: float, what: str) -> None:
    """``check`` asked again until it holds: soon at first (5 ms), then less often (every
    100 ms at most), so a short wait is not rounded up to a tenth of a second."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


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
