"""The ``payhooks`` command run in the test's own process (typer's runner): fast, and on the
test's database, for tests that put it beside Django's commands and the console's actions."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

from payhooks.cli.commands import app
from tests.factories import KEYS


def payhooks_command(url: str, home: Path, *args: str, **env: str) -> Result:
    """``payhooks *args`` with the gateways' test secrets and ``DATABASE_URL`` set to ``url``.
    payhooks' loggers, which a command sets to JSON lines of its own, are put back as they
    were for the tests after it."""
    given = {**KEYS.env(), "DATABASE_URL": url, "PAYHOOKS_HOME": str(home), **env}
    with payhooks_logging_kept():
        return CliRunner().invoke(app, list(args), env=given)


@contextmanager
def payhooks_logging_kept() -> Iterator[None]:
    """payhooks' loggers as they were before a command in process set them to JSON lines."""
    logger = logging.getLogger("payhooks")
    kept = (logger.handlers[:], logger.level, logger.propagate)
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate = kept
