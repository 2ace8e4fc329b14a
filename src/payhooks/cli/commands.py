"""The payhooks command: a thin shell over the library."""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.intake import idempotency
from payhooks.operations import retention as policy
from payhooks.plumbing import db
from payhooks.plumbing.errors import DatabaseUnavailable, NotFound, PayhooksError
from payhooks.service import database, logs, outbox
from payhooks.service.config import Settings

if TYPE_CHECKING:
    from payhooks.reconcile import Tally
    from payhooks.service.worker import WorkerOptions
    from payhooks.sim.gateway import GatewaySecrets

app = typer.Typer(help="Exactly-once effects for retried payment webhooks.", no_args_is_help=True)
T = TypeVar("T")
log = logging.getLogger("payhooks.cli")
_verbose = False


def _settings() -> Settings:
    return _run(lambda: Settings.from_env(os.environ))


def _run(action: Callable[[], T]) -> T:
    """One clear line and a non-zero exit on a known error; tracebacks only with -v."""
    import httpx
    import psycopg

    try:
        return action()
    except (PayhooksError, OSError, ValueError, httpx.HTTPError) as exc:
        _exit_with(exc, str(exc) or type(exc).__name__)
    except psycopg.Error as exc:
        hint = (
            " (payhooks' tables are not all there: the reference service runs `payhooks "
            "migrate`; your own app runs `payhooks.migrate(conn)`, as `payhooks console` does)"
            if exc.sqlstate == "42P01"
            else ""
        )
        _exit_with(exc, f"database error {exc.sqlstate}: {str(exc).splitlines()[0]}{hint}")


def _passing(action: Callable[[], T], *, once: bool, command: str) -> T | None:
    """One pass of a daemon (``--every``): the database away (or its connection dropped) is
    logged (``daemon_pass_failed``) and the next pass tries again, as the reference worker
    does; None for the pass lost. With ``--once`` any error exits 1, as every command's."""
    import psycopg

    if once:
        return _run(action)
    try:
        return action()
    except (psycopg.OperationalError, psycopg.InterfaceError, DatabaseUnavailable) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("daemon_pass_failed", extra={"command": command, "error": reason[:200]})
        return None


def _exit_with(exc: BaseException, reason: str) -> NoReturn:
    if _verbose:
        raise exc
    typer.echo(f"payhooks: {reason}", err=True)
    raise typer.Exit(1)


@contextlib.contextmanager
def _connect(settings: Settings | None = None, url: str | None = None) -> Iterator[db.Connection]:
    """One autocommit connection for a command (to ``url``, else the service's database),
    driver errors translated."""
    settings = settings or _settings()
    url = url or database.database_url(settings)
    with db.translated(), database.connect(url, settings) as conn:
        yield conn


def _with_connection(action: Callable[[db.Connection], T], url: str | None = None) -> T:
    return _run(lambda: _on_connection(action, url))


def _on_connection(action: Callable[[db.Connection], T], url: str | None = None) -> T:
    with _connect(url=url) as conn:
        return action(conn)


def _libpq(url: str | None) -> str | None:
    return None if url is None else db.libpq_url(url)


DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        help="Your app's database (default DATABASE_URL, else the service's); "
        "SQLAlchemy's postgresql+psycopg:// is taken too.",
        callback=_libpq,
    ),
]


Every = Annotated[float, typer.Option(min=0.2, help="Seconds between passes while it runs.")]
Once = Annotated[bool, typer.Option("--once", help="One pass, then exit.")]


def _print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, default=str))


@app.callback()
def main_options(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks.")] = False,
) -> None:
    global _verbose
    _verbose = verbose


def api_token(settings: Settings) -> tuple[str, bool]:
    """PAYHOOKS_API_TOKEN, else one generated once and kept under PAYHOOKS_HOME.

    Written to a private temporary file and renamed into place, so a second process never
    reads a half-written (empty) token; an empty stored token counts as none.
    """
    if settings.api_token:
        return settings.api_token, False
    path = settings.home / "api-token"
    stored = path.read_text().strip() if path.exists() else ""
    if stored:
        return stored, False
    settings.home.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    scratch = path.with_name(f".api-token.{os.getpid()}")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    os.replace(scratch, path)
    return token, True


@app.command()
def migrate() -> None:
    """Apply the database migrations that are not applied yet."""
    applied = _with_connection(database.migrate)
    typer.echo("applied: " + ", ".join(applied) if applied else "database is up to date")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
) -> None:
    """Migrate the database, then serve webhooks and the shop API."""
    import uvicorn

    from payhooks.service.web import create_app

    logs.configure()
    settings = _settings()
    url = _run(lambda: database.database_url(settings))
    _with_connection(database.migrate)
    token, generated = _run(lambda: api_token(settings))
    if generated:
        typer.echo(f"API token (kept in {settings.home / 'api-token'}): {token}", err=True)
    for note in [*settings.secret_notes, *confirmation_warnings(settings)]:
        typer.echo(f"payhooks: warning: {note}", err=True)
    served = ", ".join(sorted(p.value for p in settings.adapters())) or "none"
    typer.echo(f"payhooks serving on http://{host}:{port} (providers: {served})", err=True)
    uvicorn.run(
        create_app(settings, api_token=token, url=url, metrics_token=settings.metrics_token),
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=10,
    )


def worker_options(*, once: bool, batch: int) -> WorkerOptions:
    """Parked deliveries every minute and the purge once a day; ``--once`` makes one pass
    over the outbox and the parked deliveries, and no purge."""
    from payhooks.service.worker import DAY_SECONDS, WorkerOptions

    return WorkerOptions(
        batch=batch, purge_every_seconds=None if once else DAY_SECONDS, parked_every_seconds=60.0
    )


def confirmation_warnings(settings: Settings) -> list[str]:
    """Gateways whose callbacks would wait forever: served, but no API to confirm them."""
    return [
        f"{GATEWAYS[p].title}'s callbacks take effect only as its status API confirms them, "
        f"and its API credentials are not set ({GATEWAYS[p].status_api.id_variable}, "
        f"{GATEWAYS[p].status_api.secret_variable}): its callbacks will wait, applied never"
        for p in settings.unconfirmable()
    ]


def worker_warnings(settings: Settings) -> list[str]:
    """What a worker so configured silently cannot do, one line each."""
    found = [*settings.secret_notes, *confirmation_warnings(settings)]
    if not settings.adapters():
        found.append(
            f"no gateway secret is set ({_webhook_variables()}): this worker "
            "cannot apply parked deliveries"
        )
    if settings.alert_email is None:
        found.append("PAYHOOKS_ALERT_EMAIL is not set: every alert will be dead-lettered")
    off = settings.reconciliation_off()
    if off:
        found.append(
            f"reconciliation is off for {', '.join(p.value for p in off)} (no API credentials): "
            "a payment whose webhook never comes is not recovered there"
        )
    return found


@app.command()
def worker(
    once: Annotated[bool, typer.Option(help="Send what is due, then exit.")] = False,
    batch: Annotated[
        int, typer.Option(min=1, help="Messages per SMTP session; parked deliveries per page.")
    ] = 100,
) -> None:
    """Send the outbox's emails and alerts after commit; purge old records once a day."""
    from payhooks.service.worker import Worker

    logs.configure()
    settings = _settings()
    pool = _run(  # the sender, a purge (two), and reconciliation on its own thread
        lambda: database.open_pool(
            database.database_url(settings), settings, max_size=4, deadline=False
        )
    )
    runner: Worker | None = None
    try:
        runner = _run(lambda: Worker(pool, settings, worker_options(once=once, batch=batch)))
        for warning in worker_warnings(settings):
            typer.echo(f"payhooks: warning: {warning}", err=True)
        if once:
            _run(runner.maybe_retry_parked)
            _run(runner.maybe_reconcile)
            sent = 0
            while (done := _run(runner.drain)) > 0:
                sent += done
            typer.echo(f"handled {sent} outbox message(s)", err=True)
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: runner.stop())
        _run(runner.run)
    finally:
        if runner is not None:
            runner.close()
        pool.close()


@app.command()
def reconcile(
    older_than_s: Annotated[
        int | None,
        typer.Option(
            help="Ask about checkouts older than this; default PAYHOOKS_RECONCILE_AFTER_S."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Checkouts asked about, at most.")] = 100,
    hooks: Annotated[
        str | None,
        typer.Option(
            help="Your app's handler, as module:attribute (payhooks.Hooks or "
            "payhooks.fastapi.AsyncHooks): reconcile your app's database through it, not "
            "the reference shop's."
        ),
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="With --hooks: your app's database; default DATABASE_URL.", callback=_libpq
        ),
    ] = None,
) -> None:
    """Ask the gateways about checkouts with no payment, and apply what they report (one pass)."""
    logs.configure()
    settings = _settings()
    if not settings.reconciled():
        ids = ", ".join(found.status_api.id_variable for found in GATEWAYS.values())
        _run(lambda: _fail(
            f"no gateway API credentials are set ({ids} and their secrets): reconciliation is off"
        ))  # fmt: skip
    if hooks is None:
        tally = _reconcile_shop(settings, limit, older_than_s)
    else:
        url = database_url or settings.database_url or ""
        if not url:
            _run(lambda: _fail("--hooks needs your app's database: --database-url or DATABASE_URL"))
        handler = _run(lambda: _import(hooks))
        tally = _run(lambda: _reconcile_app(settings, url, handler, limit, older_than_s))
    off = ", ".join(p.value for p in settings.reconciliation_off())
    typer.echo(tally.summary() + (f"; off for {off}" if off else ""))
    if tally.failures:
        typer.echo(f"payhooks: {_failed(tally)}; those checkouts are asked again later", err=True)
        raise typer.Exit(1)


def _failed(tally: Tally) -> str:
    errors, unapplied = sum(tally.api_errors.values()), sum(tally.unapplied.values())
    said = [f"{errors} gateway API error(s)"] if errors else []
    return ", ".join(
        [*said, *([f"{unapplied} payment(s) the handler failed on"] if unapplied else [])]
    )


def _reconcile_shop(settings: Settings, limit: int, after_s: int | None) -> Tally:
    """A pass over the reference shop's checkouts, through its state machine."""
    from payhooks.service import application
    from payhooks.service import reconcile as reconciliation

    pool = _run(
        lambda: database.open_pool(
            database.database_url(settings), settings, max_size=2, deadline=False
        )
    )
    try:
        with reconciliation.http_client(settings.reconcile_timeout_ms / 1000) as http:
            runner = application.reconciler(pool, settings, http, limit=limit, after_s=after_s)
            return _run(runner.run)
    finally:
        pool.close()


def _reconcile_app(
    settings: Settings,
    url: str,
    handler: Any,
    limit: int,
    after_s: int | None,
    *,
    confirm_only: bool = False,
) -> Tally:
    """A pass over a merchant app's expected checkouts, through the app's own handler (imported
    once, before any pass: a handler that cannot be imported is bad configuration)."""
    from payhooks.reconcile import running

    connect = running.connecting(url)
    if getattr(handler, "is_async", False):
        from payhooks.aio import reconcile as async_reconcile

        deliver = async_reconcile.delivering(url, handler)
    else:
        deliver = running.delivering(connect, handler)
    return running.reconcile_once(
        connect,
        deliver,
        settings.reconciled(),
        after_s=settings.reconcile_after_s if after_s is None else after_s,
        window_s=settings.reconcile_window_s,
        limit=limit,
        timeout_s=settings.reconcile_timeout_ms / 1000,
        confirm_only=confirm_only,
    )


@app.command()
def confirm(
    hooks: Annotated[
        str,
        typer.Option(
            help="Your app's handler, as module:attribute (payhooks.Hooks or "
            "payhooks.fastapi.AsyncHooks): what the gateways' APIs confirm reaches it."
        ),
    ],
    database_url: DatabaseUrl = None,
    every: Every = 2.0,
    once: Once = False,
) -> None:
    """Confirm the callbacks PhonePe and Juspay sent (only a static credential proves them),
    and PayU's unsigned refund callbacks and resent posts, at their status APIs, every few
    seconds until stopped (SIGTERM, Ctrl-C): what the APIs report reaches your handler, once;
    a forged callback is refuted."""
    logs.configure()
    settings = _settings()
    url = database_url or settings.database_url or ""
    if not url:
        _run(lambda: _fail("confirm needs your app's database: --database-url or DATABASE_URL"))
    if not settings.reconciled():
        _run(lambda: _fail("no gateway API credentials are set: nothing can be confirmed"))
    handler = _run(lambda: _import(hooks))
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    while True:
        tally = _passing(
            lambda: _reconcile_app(settings, url, handler, 100, None, confirm_only=True),
            once=once, command="confirm",
        )  # fmt: skip
        if tally is None:
            pass
        elif sum(tally.confirmed.values()) or sum(tally.refuted.values()) or once:
            typer.echo(
                f"{sum(tally.confirmed.values())} callback(s) confirmed by the API, "
                f"{sum(tally.refuted.values())} refuted, "
                f"{sum(tally.applied.values())} payment event(s) applied"
            )
        if once or stopping.wait(every):
            return


@app.command()
def alerts(
    database_url: DatabaseUrl = None,
    every: Every = 60.0,
    once: Once = False,
) -> None:
    """Tell people what is wrong, by email and chat webhook, every minute until stopped
    (SIGTERM, Ctrl-C): a gateway answered 5xx, forged signatures, reconciliation refused or
    not running, parked deliveries, refunds refused. Each alert is sent once however many
    hosts run this, said again at most every PAYHOOKS_ALERT_REPEAT_MINUTES, and resolved."""
    from datetime import UTC, datetime

    from payhooks.service import alerting

    logs.configure()
    settings = _settings()
    url = database_url or settings.database_url or ""
    if not url:
        _run(lambda: _fail("alerts needs your app's database: --database-url or DATABASE_URL"))
    notifier = _run(lambda: alerting.notifier(settings, shop=False))
    if not notifier.channels:
        _run(lambda: _fail(
            "no alert channel is set: PAYHOOKS_ALERT_WEBHOOK_URL, or PAYHOOKS_SMTP_URL and "
            "PAYHOOKS_ALERT_EMAIL"
        ))  # fmt: skip
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    while True:
        tally = _passing(
            lambda: _on_connection(lambda conn: notifier.tick(conn, datetime.now(UTC)), url),
            once=once, command="alerts",
        )  # fmt: skip
        if tally is None:
            pass
        elif once or tally.raised or tally.repeated or tally.resolved or tally.failed:
            typer.echo(tally.summary())
        if once or stopping.wait(every):
            return


def _import(target: str) -> Any:
    """``module:attribute``, imported from the current directory too, as uvicorn does. Whatever
    the module raises on import (a missing module, a setting it reads, a syntax error) is a
    ``ValueError`` naming it: the command's one-line cause."""
    import importlib

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--hooks takes module:attribute (myshop.webhooks:hooks), not {target!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"--hooks {target}: cannot import {module_name} ({exc})") from None
    except Exception as exc:  # the app's own module failed while it was imported
        reason = f"{type(exc).__name__}: {exc}"
        raise ValueError(f"--hooks {target}: importing {module_name} failed ({reason})") from exc
    found = getattr(module, attribute, None)
    if found is None or not callable(found):
        raise ValueError(f"{module_name} has no handler named {attribute!r}")
    if inspect.iscoroutinefunction(found):
        raise ValueError(
            f"--hooks {target} is an async function: register it on a "
            "payhooks.fastapi.AsyncHooks and name that"
        )
    return found


@app.command()
def purge(
    older_than_days: Annotated[
        int | None, typer.Option(help="Window to keep; default PAYHOOKS_RETENTION_DAYS (90).")
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="Count what would go; delete nothing.")] = False,
    force: Annotated[bool, typer.Option(help="Allow a window shorter than 15 days.")] = False,
    batch_rows: Annotated[int, typer.Option(help="Rows per delete transaction.")] = 5000,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="Your app's database: purge the core's tables there, not the reference "
            "service's; SQLAlchemy's postgresql+psycopg:// is taken too.",
            callback=_libpq,
        ),
    ] = None,
) -> None:
    """Delete delivery records older than the retention window, in small batches."""
    days = older_than_days if older_than_days is not None else _settings().retention_days
    _run(lambda: policy.check_window(days, force=force))
    options = {"force": force, "batch_rows": batch_rows}
    if database_url is None:
        result = _with_connection(lambda conn: _purge_shop(conn, days, dry_run, options))
    else:
        result = _run(lambda: _purge_app(database_url, days, dry_run, options))
    verb = "would delete" if dry_run else "deleted"
    count = result.expired if dry_run else result.deleted
    typer.echo(
        f"{verb} {count} record(s) older than {days} days (before {result.cutoff:%Y-%m-%d %H:%M})"
    )


def _purge_shop(
    conn: db.Connection, days: int, dry_run: bool, options: dict[str, Any]
) -> policy.Purge:
    """The reference service's purge: the core's records and its own."""
    from payhooks.service import application

    planned = policy.plan(conn, days)
    if dry_run:
        return planned
    with _connect() as holder, _progress(planned.expired) as advance:
        done = application.purge(
            conn, days, holder=holder, on_batch=advance, planned=planned, **options
        )
    return _purged(done, "the worker's daily one?")


def _purge_app(url: str, days: int, dry_run: bool, options: dict[str, Any]) -> policy.Purge:
    """A merchant app's purge: the core's tables alone."""
    import psycopg

    with db.translated(), psycopg.connect(url, autocommit=True) as conn:
        planned = policy.plan(conn, days)
        if dry_run:
            return planned
        with _progress(planned.expired) as advance:
            done = policy.purge(conn, days, on_batch=advance, planned=planned, **options)
    return _purged(done, "on that database")


def _purged(done: policy.Purge | None, where: str) -> policy.Purge:
    if done is None:
        raise PayhooksError(f"another purge is running ({where}); try later")
    return done


@contextlib.contextmanager
def _progress(total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal; silence elsewhere."""
    if not sys.stderr.isatty():
        yield lambda _: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("purging", total=total)
        yield lambda done: bar.advance(task, done)


@app.command()
def parked(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """List deliveries that matched no checkout and wait to be applied."""
    rows = _with_connection(idempotency.parked, database_url)
    listed = [
        {
            "provider": r.provider,
            "event_id": r.event_id,
            "event_type": r.event_type,
            "received_at": r.processed_at.isoformat(),
            "body_bytes": len(r.body),
        }
        for r in rows
    ]
    if as_json:
        _print_json(listed)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("provider", "delivery key", "event", "received at", title=f"{len(rows)} parked")
    for r in rows:
        table.add_row(r.provider, r.event_id, r.event_type, r.processed_at.isoformat())
    Console().print(table)


@app.command()
def replay(
    event_id: Annotated[str, typer.Argument(help="The delivery key, as `payhooks parked` shows.")],
    provider: Annotated[
        Provider | None, typer.Option(help="When two gateways share a key.")
    ] = None,
    hooks: Annotated[
        str | None,
        typer.Option(
            help="Your app's handler, as module:attribute: replay into your app's database "
            "through it (the webhook secrets are read from the PAYHOOKS_ variables)."
        ),
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Run a stored delivery again through the same ingest path (same transaction, same keys)."""
    from payhooks.service import application

    settings = _settings()
    handler = None if hooks is None else _run(lambda: _import(hooks))
    url = database_url or settings.database_url
    if handler is not None and not url:
        _run(lambda: _fail("--hooks needs your app's database: --database-url or DATABASE_URL"))

    def action(conn: db.Connection) -> dict[str, Any]:
        key = provider.value if provider else None
        if handler is None:
            receipt = application.replay(conn, settings.adapters(), event_id=event_id, provider=key)
        else:
            from payhooks.applying import through

            received = application.received_stored(conn, settings.adapters(), event_id, key)
            receipt = through(handler, str(url))(conn, received)
        return {
            "status": receipt.outcome.value,
            "event_id": receipt.event.event_id,
            "order_id": receipt.order_id,
        }

    _print_json(_with_connection(action, database_url))


@app.command()
def resolve(
    event_id: Annotated[str, typer.Argument(help="The delivery key parked for its amount.")],
    provider: Annotated[Provider, typer.Option(help="Its gateway.")],
    note: Annotated[str, typer.Option(help="How it was settled: refunded, written off, ...")],
    database_url: DatabaseUrl = None,
) -> None:
    """Settle a payment parked for its amount outside payhooks (refunded in the gateway's
    dashboard): its delivery is recorded ignored, the mismatch keeps your note. To apply it as
    paid instead, correct the expectation and replay it."""
    from payhooks.intake.expectations import NotAMismatch
    from payhooks.intake.expectations import resolve as settle

    def action(conn: db.Connection) -> None:
        try:
            settle(conn, provider, event_id, note)
        except NotAMismatch as exc:
            raise ValueError(str(exc)) from None

    _with_connection(action, database_url)
    typer.echo(f"resolved {provider.value} {event_id}: {note}")


@app.command("outbox")
def outbox_command(
    failed: Annotated[bool, typer.Option("--failed", help="List dead-lettered messages.")] = False,
    retry: Annotated[int | None, typer.Option(help="Queue this dead letter again.")] = None,
    retry_all: Annotated[bool, typer.Option(help="Queue every dead letter again.")] = False,
) -> None:
    """Inspect the outbox: counts, dead letters; send dead letters again."""
    if retry is not None or retry_all:
        revived = _with_connection(lambda conn: outbox.revive(conn, retry))
        typer.echo(f"queued {revived} message(s) again")
        raise typer.Exit(0 if revived or retry_all else 1)
    if failed:
        _print_json(_with_connection(outbox.failed))
        return
    _print_json(_with_connection(outbox.counts))


@app.command()
def storm(
    urls: Annotated[
        list[str],
        typer.Argument(
            help="The payhooks deployment, e.g. https://staging:8000; several hosts of it: "
            "deliveries round-robin over them, setup and checks through the first.",
            metavar="URL",
        ),
    ],
    token: Annotated[
        str | None, typer.Option(help="API token; default PAYHOOKS_API_TOKEN.")
    ] = None,
    carts: Annotated[int, typer.Option(help="Carts to buy and pay for.")] = 200,
    stock_per_sku: Annotated[
        int, typer.Option(help="Opening stock of each of the 10 SKUs (low: backorders).")
    ] = 1_000_000,
    duplicate_rate: Annotated[float, typer.Option(help="Share of events sent twice.")] = 0.3,
    reorder_rate: Annotated[float, typer.Option(help="Share of stories sent out of order.")] = 0.3,
    failed_attempt_rate: Annotated[float, typer.Option(help="Stories with a failed try.")] = 0.2,
    double_payment_rate: Annotated[float, typer.Option(help="Carts paid twice.")] = 0.05,
    refund_rate: Annotated[float, typer.Option(help="Razorpay payments refunded.")] = 0.1,
    concurrency: Annotated[int, typer.Option(help="Deliveries in flight at once.")] = 16,
    time_scale: Annotated[
        float, typer.Option(help="Simulated seconds per real second for retry schedules.")
    ] = 3600.0,
    seed: Annotated[int | None, typer.Option(help="Seed, to replay the same storm.")] = None,
    silent_rate: Annotated[
        float, typer.Option(help="Carts whose webhooks are never sent (needs --gateway-api-port).")
    ] = 0.0,
    gateway_api_port: Annotated[
        int | None,
        typer.Option(help="Serve the gateways' status APIs on 127.0.0.1:PORT for reconciliation."),
    ] = None,
) -> None:
    """Throw a retrying, duplicating, reordering gateway at a deployment; verify every
    invariant through its API. Exits 1 if any is violated. Point it at staging, not live."""
    from payhooks.sim.storm import StormOptions

    settings = _settings()
    api_key = _run(lambda: _storm_token(settings, token))
    options = StormOptions(
        carts=carts, stock_per_sku=stock_per_sku, providers=_storm_providers(settings),
        duplicate_rate=duplicate_rate, reorder_rate=reorder_rate,
        failed_attempt_rate=failed_attempt_rate, double_payment_rate=double_payment_rate,
        refund_rate=refund_rate, concurrency=concurrency, time_scale=time_scale, seed=seed,
        silent_rate=silent_rate,
    )  # fmt: skip
    if silent_rate and gateway_api_port is None:
        _run(lambda: _fail("--silent-rate needs --gateway-api-port (the deployment reconciles)"))
    targets = [url.rstrip("/") for url in urls]
    ok = _storm(targets, api_key, options, settings, gateway_api_port)
    left = [GATEWAYS[p].title for p in settings.adapters() if p not in options.providers]
    if left:
        typer.echo(
            f"{', '.join(left)} not stormed: their callbacks take effect as their status API "
            "confirms them, which a storm against a deployment cannot stand in for"
        )
    raise typer.Exit(0 if ok else 1)


def _webhook_variables() -> str:
    """Each gateway's webhook settings: "PAYHOOKS_PAYU_MERCHANT_KEY with PAYHOOKS_PAYU_SALTS"."""
    return ", ".join(
        " with ".join(secret.variable for secret in found.secrets) for found in GATEWAYS.values()
    )


def _storm_token(settings: Settings, token: str | None) -> str:
    if not (token or settings.api_token):
        raise PayhooksError("pass --token or set PAYHOOKS_API_TOKEN")
    return str(token or settings.api_token)


def _storm_providers(settings: Settings) -> tuple[Provider, ...]:
    """The served gateways whose webhooks take effect as they come: one whose callbacks its
    status API must confirm (PhonePe, Juspay) is left out (``_left_out`` says so at the end)."""
    providers = tuple(p for p in settings.adapters() if not GATEWAYS[p].confirmed_by_api)
    if not providers:
        _run(lambda: _fail(f"set the deployment's gateway secrets ({_webhook_variables()})"))
    return providers


def _storm(
    url: list[str], token: str, options: Any, settings: Settings, api_port: int | None
) -> bool:
    from rich.console import Console

    from payhooks.sim.gateway import Gateway
    from payhooks.sim.gateway_api import GatewayApi, serving
    from payhooks.sim.storm import report, run_storm

    gateway = Gateway(_current_secrets(settings), now=int(time.time()))
    books = GatewayApi(_api_keys(settings))
    with (
        serving(books, port=api_port or 0) as api_url,
        _storm_progress(Console(stderr=True)) as progress,
    ):
        if api_port is not None:
            typer.echo(f"gateway status APIs on {api_url}", err=True)
        result = _run(lambda: run_storm(url, token, gateway, options, progress, books=books))
    for table in report(result):
        Console().print(table)
    return result.ok


def _current_secrets(settings: Settings) -> GatewaySecrets:
    """Each configured gateway's first (current) secret, read as the server reads it: a
    JSON-listed secret holding a comma signs the same here as there."""
    from payhooks.sim.gateway import GatewaySecrets

    found = {
        provider: [settings.first_secret(secret.variable) for secret in gateway.secrets]
        for provider, gateway in GATEWAYS.items()
    }
    return GatewaySecrets().given(found)


def _api_keys(settings: Settings) -> Any:
    """The API credentials the deployment reconciles with (the defaults where unset)."""
    from payhooks.sim.gateway_api import ApiKeys

    found = {provider: (api.id, api.secret) for provider, api in settings.reconciled().items()}
    return ApiKeys().given(found)


def _fail(reason: str) -> None:
    raise PayhooksError(reason)


@contextlib.contextmanager
def _storm_progress(console: Any) -> Iterator[Callable[[str, int, int | None], None]]:
    from rich.progress import Progress

    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, advance: int, total: int | None) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], advance=advance, total=total)

        yield progress


operator_app = typer.Typer(
    help="Console operators: who may log in to /console.", no_args_is_help=True
)
app.add_typer(operator_app, name="operator")


@operator_app.command("add")
def operator_add(
    name: Annotated[str, typer.Argument(help="Lower-case letters, digits, '.', '_' or '-'.")],
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
    read_only: Annotated[
        bool | None,
        typer.Option(
            "--read-only/--can-act",
            help="Read-only: may look at every console page and act on none. Without either, "
            "a new operator can act and an existing one keeps their role.",
            show_default=False,
        ),
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Add an operator, or give one a new password (which ends their sessions)."""
    from payhooks.console import auth

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    added = _with_connection(
        lambda conn: auth.add_operator(conn, name, password, read_only=read_only), database_url
    )
    said = "added" if added else "has a new password"
    role = {True: " (read-only)", False: " (can act)", None: ""}[read_only]
    typer.echo(f"operator {name} {said}{role}")


@operator_app.command("remove")
def operator_remove(
    name: Annotated[str, typer.Argument(help="The operator to remove.")],
    database_url: DatabaseUrl = None,
) -> None:
    """Remove an operator; their sessions end at once."""
    from payhooks.console import auth

    if not _with_connection(lambda conn: auth.remove_operator(conn, name), database_url):
        _exit_with(NotFound("operator", name), f"operator {name!r} not found")
    typer.echo(f"operator {name} removed")


@operator_app.command("list")
def operator_list(database_url: DatabaseUrl = None) -> None:
    """The operators who may log in to the console."""
    from payhooks.console import auth

    for operator in _with_connection(auth.operators, database_url):
        role = "\tread-only" if operator.read_only else ""
        typer.echo(f"{operator.name}\tadded {operator.created_at:%Y-%m-%d %H:%M} UTC{role}")


@app.command("console")
def console_command(
    hooks: Annotated[
        str,
        typer.Option(
            help="Your app's handler, as module:attribute (payhooks.Hooks or "
            "payhooks.fastapi.AsyncHooks): parked deliveries replay through it. The webhook "
            "secrets are read from the PAYHOOKS_ variables, as `payhooks replay` reads them."
        ),
    ],
    database_url: DatabaseUrl = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8100,
    root_path: Annotated[
        str, typer.Option(help="The path a reverse proxy serves it under (/ops: /ops/console).")
    ] = "",
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="The proxy addresses whose X-Forwarded-For and -Proto are believed (the "
            "client address the login limit counts, https for the Origin check and the cookie)."
        ),
    ] = None,
) -> None:
    """Serve the operator console for your app (Flask, or any app that cannot mount it) at
    /console, on your app's database: payhooks' own tables are migrated first."""
    try:
        import uvicorn

        from payhooks.console import console_app
    except ImportError as exc:
        missing = exc.name or "a module"
        _run(lambda: _fail(
            f"the console needs the console extra ({missing} is not installed): "
            "pip install 'payhooks[cli,console]'"
        ))  # fmt: skip
    from payhooks.plumbing.schema import migrate as migrate_core

    logs.configure()
    settings = _settings()
    url = database_url or settings.database_url or ""
    if not url:
        _run(lambda: _fail("the console needs your app's database: --database-url or DATABASE_URL"))
    handler = _run(lambda: _import(hooks))
    applied = _with_connection(migrate_core, url)
    if applied:
        typer.echo(f"payhooks: applied {', '.join(applied)}", err=True)
    served = settings.adapters()
    names = ", ".join(sorted(p.value for p in served)) or "none"
    typer.echo(
        f"payhooks console on http://{host}:{port}{root_path.rstrip('/')}/console "
        f"(gateways: {names}); "
        "add operators with `payhooks operator add NAME --database-url ...`",
        err=True,
    )
    uvicorn.run(
        console_app(
            url,
            adapters=served.values(),
            hooks=handler,
            timezone=settings.console_timezone,
        ),
        host=host,
        port=port,
        log_level="warning",
        root_path=root_path,
        proxy_headers=True,
        forwarded_allow_ips=forwarded_allow_ips,
    )


@app.command()
def trace(
    ident: Annotated[str, typer.Argument(help="Order id, payment id or delivery key.")],
) -> None:
    """Print every webhook event behind an order, payment or delivery key, as JSON."""
    from payhooks.service.trace import trace as run_trace

    _print_json(_with_connection(lambda conn: run_trace(conn, ident)))


@app.command()
def demo(
    keep: Annotated[Path | None, typer.Option(help="Keep the demo's data in this folder.")] = None,
) -> None:
    """Run the service on an embedded database and throw a misbehaving gateway at it."""
    from payhooks.sim.demo import run_demo

    ok = _run(lambda: run_demo(keep))
    raise typer.Exit(0 if ok else 1)


def main() -> None:
    app(prog_name="payhooks")


if __name__ == "__main__":
    main()


refunds_app = typer.Typer(
    help="Refunds sent to the gateways exactly once (payhooks.refunds).", no_args_is_help=True
)
app.add_typer(refunds_app, name="refunds")


@refunds_app.command("send")
def refunds_send(
    database_url: DatabaseUrl = None,
    every: Every = 2.0,
    once: Once = False,
) -> None:
    """Send the refund intents due to their gateways, each under its idempotency key, every
    few seconds until stopped (SIGTERM, Ctrl-C): a call that timed out, an answer lost or a
    sender killed mid-call is asked again with the same key, and refunds once."""
    from payhooks.reconcile import refunding, running

    logs.configure()
    settings = _settings()
    url = database_url or settings.database_url or ""
    if not url:
        _run(lambda: _fail("refunds send needs a database: --database-url or DATABASE_URL"))
    found = settings.reconciled()
    if not found:
        _run(lambda: _fail("no gateway API credentials are set: no refund can be sent"))
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    connect = running.connecting(url)
    timeout_s = settings.reconcile_timeout_ms / 1000
    while True:
        tally = _passing(
            lambda: refunding.send_once(connect, found, timeout_s=timeout_s, stop=stopping.is_set),
            once=once, command="refunds send",
        )  # fmt: skip
        if tally is None:
            pass
        elif once or any(sum(getattr(tally, n).values()) for n in ("sent", "refused", "retried")):
            typer.echo(tally.summary())
        if once or stopping.wait(every):
            return


@refunds_app.command("list")
def refunds_list(
    payment_id: Annotated[str, typer.Argument(help="The gateway's payment id.")],
    provider: Annotated[str, typer.Option(help="The gateway: razorpay, cashfree, ...")],
    database_url: DatabaseUrl = None,
) -> None:
    """A payment's refund intents as JSON: amount, state, the gateway's refund id, attempts
    and the last error."""
    import dataclasses

    import psycopg

    from payhooks.refunding import refunds

    url = database_url or _settings().database_url or ""
    if not url:
        _run(lambda: _fail("refunds list needs a database: --database-url or DATABASE_URL"))

    def read() -> list[dict[str, Any]]:
        with psycopg.connect(url, autocommit=True) as conn:
            return [dataclasses.asdict(r) for r in refunds.of_payment(conn, provider, payment_id)]

    _print_json(_run(read))


@refunds_app.command("cancel")
def refunds_cancel(
    key: Annotated[str, typer.Argument(help="The intent's idempotency key (ph..., as listed).")],
    provider: Annotated[str, typer.Option(help="The gateway: razorpay, cashfree, ...")],
    reason: Annotated[str, typer.Option(help="Why it is cancelled (kept with it).")],
    by: Annotated[str, typer.Option(help="Who cancels it (kept with it).")],
    database_url: DatabaseUrl = None,
) -> None:
    """Cancel a refund intent stuck ``requested`` (a gateway that keeps failing its call): it
    is never sent afterwards, and its amount is refundable again. Refused while a sender is
    calling the gateway with it, and once the gateway has it. Prints the intent as JSON."""
    import dataclasses

    import psycopg

    from payhooks.refunding import refunds

    url = database_url or _settings().database_url or ""
    if not url:
        _run(lambda: _fail("refunds cancel needs a database: --database-url or DATABASE_URL"))

    def cancel() -> dict[str, Any]:
        with psycopg.connect(url, autocommit=True) as conn:
            done = refunds.cancel(conn, provider, key, reason=reason, cancelled_by=by)
            return dataclasses.asdict(done)

    _print_json(_run(cancel))
