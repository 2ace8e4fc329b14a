"""The ``payhooks`` command run in the test's own process (typer's runner): fast, and on the
test's database, for tests that put it beside Django's commands and the console's actions."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

from payhooks.cli.commands import app
from tests.factories import KEYS


def payhooks_command(url: str, home: Path, *args: str, **env: str) -> Result:
    """``payhooks *args`` with the gateways' test secrets and ``DATABASE_URL`` set to ``url``."""
    given = {**KEYS.env(), "DATABASE_URL": url, "PAYHOOKS_HOME": str(home), **env}
    return in_process(list(args), given)


def in_process(args: list[str], env: Mapping[str, str]) -> Result:
    """``payhooks *args`` with ``env`` over this process's environment. payhooks' loggers,
    which a command sets to JSON lines of its own, and the signal handlers a daemon sets are
    put back as they were for the tests after it."""
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        with payhooks_logging_kept():
            return CliRunner().invoke(app, args, env=dict(env))
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


@contextmanager
def payhooks_logging_kept() -> Iterator[None]:
    """payhooks' loggers as they were before a command in process set them to JSON lines."""
    logger = logging.getLogger("payhooks")
    kept = (logger.handlers[:], logger.level, logger.propagate)
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate = kept
