"""The payhooks command: a thin shell over the library."""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from payhooks import db
from payhooks.config import Settings
from payhooks.errors import PayhooksError

app = typer.Typer(help="Exactly-once effects for retried payment webhooks.", no_args_is_help=True)
T = TypeVar("T")
_verbose = False


def _settings() -> Settings:
    return Settings.from_env(os.environ)


def _run(action: Callable[[], T]) -> T:
    """One clear line and a non-zero exit on a known error; tracebacks only with -v."""
    try:
        return action()
    except (PayhooksError, OSError) as exc:
        if _verbose:
            raise
        typer.echo(f"payhooks: {exc}", err=True)
        raise typer.Exit(1) from None


@app.callback()
def main_options(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks.")] = False,
) -> None:
    global _verbose
    _verbose = verbose


def api_token(settings: Settings) -> tuple[str, bool]:
    """PAYHOOKS_API_TOKEN, else one generated once and kept under PAYHOOKS_HOME."""
    if settings.api_token:
        return settings.api_token, False
    path = settings.home / "api-token"
    if path.exists():
        return path.read_text().strip(), False
    settings.home.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    path.touch(mode=0o600)
    path.write_text(token + "\n")
    return token, True


@app.command()
def migrate() -> None:
    """Apply the database migrations that are not applied yet."""

    def action() -> list[str]:
        import psycopg

        with (
            db.translated(),
            psycopg.connect(db.database_url(_settings()), autocommit=True) as conn,
        ):
            return db.migrate(conn)

    applied = _run(action)
    typer.echo("applied: " + ", ".join(applied) if applied else "database is up to date")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
) -> None:
    """Migrate the database, then serve webhooks and the shop API."""
    import psycopg
    import uvicorn

    from payhooks.web import create_app

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = _settings()
    url = _run(lambda: db.database_url(settings))

    def prepare() -> None:
        with db.translated(), psycopg.connect(url, autocommit=True) as conn:
            db.migrate(conn)

    _run(prepare)
    token, generated = _run(lambda: api_token(settings))
    if generated:
        typer.echo(f"API token (kept in {settings.home / 'api-token'}): {token}", err=True)
    served = ", ".join(sorted(p.value for p in settings.adapters())) or "none"
    typer.echo(f"payhooks serving on http://{host}:{port} (providers: {served})", err=True)
    uvicorn.run(
        create_app(settings, api_token=token, url=url),
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=10,
    )


@app.command()
def trace(
    ident: Annotated[str, typer.Argument(help="Order id, payment id or delivery key.")],
) -> None:
    """Print every webhook event behind an order, payment or delivery key, as JSON."""
    import psycopg

    from payhooks.trace import trace as run_trace

    def action() -> dict[str, object]:
        with (
            db.translated(),
            psycopg.connect(db.database_url(_settings()), autocommit=True) as conn,
        ):
            return run_trace(conn, ident)

    typer.echo(json.dumps(_run(action), indent=2, default=str))


@app.command()
def demo(
    keep: Annotated[Path | None, typer.Option(help="Keep the demo's data in this folder.")] = None,
) -> None:
    """Run the service on an embedded database and throw a misbehaving gateway at it."""
    from payhooks.demo import run_demo

    ok = _run(lambda: run_demo(keep))
    raise typer.Exit(0 if ok else 1)


def main() -> None:
    app(prog_name="payhooks")


if __name__ == "__main__":
    main()
