"""The one ``payhooks`` command: the merchant's commands (``payhooks.cli.merchant``, which
stand on the core alone), the reference service's (``payhooks.cli.service``) and the
simulators' (``payhooks.cli.sim``), joined on one typer app, with the service as the host the
merchant's commands take their settings, logs and default database from."""

from __future__ import annotations

from typing import Annotated

import typer

from payhooks.cli import merchant, service, sim
from payhooks.cli.common import Host, app, set_verbose
from payhooks.cli.merchant import operator_app, reconcile_app, refunds_app
from payhooks.cli.service import (
    ServiceHost,
    api_token,
    confirmation_warnings,
    worker_options,
    worker_warnings,
)
from payhooks.cli.sim import demo, storm


@app.callback()
def main_options(
    ctx: typer.Context,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks.")] = False,
) -> None:
    set_verbose(verbose)
    ctx.obj = service_host()


def service_host() -> Host:
    """The reference service hosts the merchant's commands (checked against ``Host``)."""
    return ServiceHost()


# The order `payhooks --help` lists them in: the service's first, as a newcomer runs them.
ORDER = [
    "migrate", "serve", "worker", "reconcile", "confirm", "settlements", "alerts", "purge",
    "parked", "replay", "resolve", "outbox", "storm", "console", "trace", "demo",
]  # fmt: skip


def _name(callback: object) -> str:
    return str(getattr(callback, "__name__", ""))


app.registered_commands.sort(key=lambda c: ORDER.index(c.name or _name(c.callback)))


def main() -> None:
    app(prog_name="payhooks")


__all__ = [
    "api_token",
    "app",
    "confirmation_warnings",
    "demo",
    "main",
    "merchant",
    "operator_app",
    "reconcile_app",
    "refunds_app",
    "service",
    "sim",
    "storm",
    "worker_options",
    "worker_warnings",
]


if __name__ == "__main__":
    main()
