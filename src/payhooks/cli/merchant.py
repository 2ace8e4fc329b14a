"""The merchant's commands: a merchant's own app operated on its own database, each a thin
shell over one operation of the core (reconcile, confirm, settlements, alerts, purge, parked,
replay, resolve, operators, the console, refunds). Without ``--hooks`` or ``--database-url`` a
command works on the host's own database (``common.Host``: the reference service's)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from payhooks.cli.common import (
    DatabaseUrl,
    Every,
    Once,
    Port,
    Settings,
    app,
    exit_with,
    fail,
    host,
    import_hooks,
    libpq,
    needing,
    on_connection,
    print_json,
    progress,
    repeat,
    run,
    settings,
    stop_on_signals,
    with_connection,
)
from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.operations import parked as parking
from payhooks.operations import retention as policy
from payhooks.operations.alarms import in_utc
from payhooks.plumbing import db
from payhooks.plumbing.errors import NotFound, PayhooksError

if TYPE_CHECKING:
    from payhooks.gateways._gateway import ApiCredentials
    from payhooks.operations.notifier import Tally as AlertTally
    from payhooks.reconcile import Tally
    from payhooks.reconcile.parts import Deliver
    from payhooks.reconcile.settling import Tally as SettlingTally
    from payhooks.refunding.sending import Tally as RefundTally

HOOKS_HELP = (
    "Your app's handler, as module:attribute (payhooks.Hooks or payhooks.fastapi.AsyncHooks)"
)


@app.command()
def reconcile(
    ctx: typer.Context,
    older_than_s: Annotated[
        int | None,
        typer.Option(
            min=0, help="Ask about checkouts older than this; default PAYHOOKS_RECONCILE_AFTER_S."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Checkouts asked about, at most.")] = 100,
    hooks: Annotated[
        str | None,
        typer.Option(
            help=f"{HOOKS_HELP}: reconcile your app's database through it, not the reference "
            "shop's."
        ),
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="The database: your app's with --hooks, else the reference shop's; default "
            "DATABASE_URL.",
            callback=libpq,
        ),
    ] = None,
) -> None:
    """Ask the gateways about checkouts with no payment, and apply what they report (one pass)."""
    host(ctx).configure_logs()
    found = settings(ctx)
    if not found.reconciled():
        ids = ", ".join(gateway.status_api.id_variable for gateway in GATEWAYS.values())
        run(lambda: fail(
            f"no gateway API credentials are set ({ids} and their secrets): reconciliation is off"
        ))  # fmt: skip
    if hooks is None:
        tally = host(ctx).reconcile(found, limit, older_than_s, database_url)
    else:
        url = _app_url(found, database_url, "--hooks")
        handler = run(lambda: import_hooks(hooks, in_django="`manage.py payhooks_reconcile`"))
        tally = run(lambda: reconcile_app(found, url, handler, limit, older_than_s, erring=True))
    off = ", ".join(p.value for p in found.reconciliation_off())
    typer.echo(tally.summary() + (f"; off for {off}" if off else ""))
    credentialed = found.reconciled()
    if hooks is not None:
        waiting = _waiting(url, credentialed)
    elif _unaskable(credentialed):
        waiting = with_connection(ctx, lambda conn: _unasked(conn, credentialed), database_url)
    else:
        waiting = {}
    for provider, count in waiting.items():  # the pass confirms callbacks too: not theirs
        typer.echo(f"payhooks: {_unconfirmed(provider, count)}", err=True)
    if tally.failures:
        typer.echo(f"payhooks: {tally.trouble()}; each is asked again later", err=True)
    if tally.failures or waiting:
        raise typer.Exit(1)


def reconcile_app(
    settings: Settings,
    url: str,
    handler: Any,
    limit: int,
    after_s: int | None,
    *,
    confirm_only: bool = False,
    erring: bool = False,
) -> Tally:
    """A pass over a merchant app's expected checkouts, through the app's own handler (imported
    once, before any pass: a handler that cannot be imported is bad configuration)."""
    from payhooks.reconcile import running

    connect = running.connecting(url)
    return running.reconcile_once(
        connect,
        _delivering(url, handler),
        settings.reconciled(),
        after_s=settings.reconcile_after_s if after_s is None else after_s,
        window_s=settings.reconcile_window_s,
        limit=limit,
        timeout_s=settings.reconcile_timeout_ms / 1000,
        confirm_only=confirm_only,
        erring=erring,
    )


def _delivering(url: str, handler: Any) -> Deliver:
    """What a pass finds delivered through the app's handler (``AsyncHooks`` awaited)."""
    from payhooks.reconcile import running

    if getattr(handler, "is_async", False):
        from payhooks.aio import reconcile as async_reconcile

        return async_reconcile.delivering(url, handler)
    return running.delivering(running.connecting(url), handler)


@app.command()
def confirm(
    ctx: typer.Context,
    hooks: Annotated[
        str,
        typer.Option(help=f"{HOOKS_HELP}: what the gateways' APIs confirm reaches it."),
    ],
    database_url: DatabaseUrl = None,
    every: Every = 2.0,
    once: Once = False,
) -> None:
    """Confirm callbacks only a static credential proves, at their gateways' status APIs.

    PhonePe's and Juspay's callbacks, and PayU's unsigned refund callbacks and resent posts,
    are asked about every few seconds until stopped (SIGTERM, Ctrl-C): what the APIs report
    reaches your handler, once; a forged callback is refuted."""
    host(ctx).configure_logs()
    found = settings(ctx)
    url = _app_url(found, database_url, "confirm")
    if not found.reconciled():
        run(lambda: fail("no gateway API credentials are set: nothing can be confirmed"))
    handler = run(lambda: import_hooks(hooks, in_django="`manage.py payhooks_confirm`"))
    credentialed = found.reconciled()
    told: dict[Provider, int] = {}

    def one_pass() -> Tally:
        tally = reconcile_app(found, url, handler, 100, None, confirm_only=True, erring=once)
        waiting = _waiting(url, credentialed)
        if waiting and waiting != told:  # at start, and again as the count changes
            for provider, count in waiting.items():
                typer.echo(f"payhooks: {_unconfirmed(provider, count)}", err=True)
        told.clear()
        told.update(waiting)
        return tally

    repeat(
        one_pass,
        lambda tally: tally.confirmations() if tally.said_anything or once else None,
        every=every, once=once, command="confirm", stopping=stop_on_signals(),
        failed=lambda tally: (
            f"{tally.trouble()}; those callbacks are asked again later" if tally.failures else None
        ),
    )  # fmt: skip
    if once and told:
        raise typer.Exit(1)


def _waiting(url: str, credentialed: Collection[Provider]) -> dict[Provider, int]:
    """The callbacks waiting for a gateway not in ``credentialed``, on the app's database
    (not asked for when every gateway that has such callbacks has its credentials)."""
    from payhooks.reconcile import running

    if not _unaskable(credentialed):
        return {}
    with running.connecting(url)() as conn:
        return _unasked(conn, credentialed)


def _unasked(conn: db.Connection, credentialed: Collection[Provider]) -> dict[Provider, int]:
    from payhooks.intake import confirmations

    return confirmations.unasked(conn, credentialed)


def _unaskable(credentialed: Collection[Provider]) -> bool:
    from payhooks.intake import confirmations

    return bool(confirmations.unaskable(credentialed))


def _app_url(found: Settings, database_url: str | None, needing: str) -> str:
    """The app's database (``--database-url``, else DATABASE_URL), which ``needing`` cannot
    go without."""
    url = database_url or found.database_url or ""
    if not url:
        run(lambda: fail(f"{needing} needs your app's database: --database-url or DATABASE_URL"))
    return url


def _unconfirmed(provider: Provider, count: int) -> str:
    """A gateway's callbacks no pass asks about, and the variables that would."""
    return GATEWAYS[provider].waiting_for_credentials(count, "callback(s) waiting, never confirmed")


@app.command()
def settlements(
    ctx: typer.Context,
    start: Annotated[
        str | None,
        typer.Option("--from", help="The first day to fetch, YYYY-MM-DD (India's days)."),
    ] = None,
    end: Annotated[str | None, typer.Option("--to", help="The last day, included.")] = None,
    unsettled: Annotated[
        bool, typer.Option("--unsettled", help="Print the captures flagged unsettled (JSON).")
    ] = False,
    unmatched: Annotated[
        bool,
        typer.Option("--unmatched", help="Print the lines naming no known payment (JSON)."),
    ] = False,
    unreadable: Annotated[
        bool,
        typer.Option(
            "--unreadable", help="Print the report lines payhooks could not read, kept (JSON)."
        ),
    ] = False,
    catch_up: Annotated[
        bool,
        typer.Option(
            "--catch-up",
            help=(
                "Fetch each gateway from the day after its last day read whole (at least the "
                "last 3 days) up to today, in ranges of at most 31 days: run it daily from cron."
            ),
        ),
    ] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Fetch the gateways' settlement reports, record them once and flag what is unsettled.

    For the days --from to --to (at most 31): each payout and the payments, refunds and
    adjustments it covered, with fees and tax, recorded once and matched to your payments; then
    flag the captures not settled within their gateway's cycle and
    PAYHOOKS_SETTLEMENT_MARGIN_HOURS; a line it cannot read is kept, and the rest recorded. With
    --catch-up instead of the days, fetch what each gateway has not read whole yet, up to today.
    With --unsettled, --unmatched or --unreadable (one, without --from and --to), print what is
    flagged or kept instead."""
    from payhooks.settlements import listing

    asked = {"unsettled": unsettled, "unmatched": unmatched, "unreadable": unreadable}
    if catch_up:
        _catch_up(ctx, asked, start, end, database_url)
        return
    try:
        named = listing.list_asked(asked, start, end)
    except ValueError as exc:
        typer.echo(f"payhooks: {exc}", err=True)
        raise typer.Exit(2) from None  # a usage error, as the command line parser's are
    if named is not None:
        found = with_connection(ctx, lambda conn: listing.flag_list(conn, named), database_url)
        print_json(found)
        return
    from payhooks.reconcile.settling import days_named

    host(ctx).configure_logs()
    days = run(lambda: days_named(start, end))
    tally = run(lambda: fetch_settlements(ctx, settings(ctx), days, database_url))
    typer.echo(tally.summary())
    if tally.failures:
        typer.echo(f"payhooks: {tally.trouble()}; fetch those days again later", err=True)
        raise typer.Exit(1)


def _catch_up(
    ctx: typer.Context,
    asked: Mapping[str, bool],
    start: str | None,
    end: str | None,
    database_url: str | None,
) -> None:
    """``payhooks settlements --catch-up``: each range's summary; exit 1 naming a gateway
    whose report failed (the next run starts again from its last day read whole)."""
    from payhooks.settlements import listing

    try:
        listing.catch_up_alone(asked, start, end)
    except ValueError as exc:
        typer.echo(f"payhooks: {exc}", err=True)
        raise typer.Exit(2) from None
    host(ctx).configure_logs()
    tallies = run(lambda: catch_up_settlements(ctx, settings(ctx), database_url))
    for tally in tallies:
        typer.echo(tally.summary())
    trouble = "; ".join(tally.trouble() for tally in tallies if tally.failures)
    if trouble:
        typer.echo(
            f"payhooks: {trouble}; run it again later: it starts from the last day read whole",
            err=True,
        )
        raise typer.Exit(1)


def catch_up_settlements(
    ctx: typer.Context, found: Settings, url: str | None
) -> list[SettlingTally]:
    """A catch-up (``payhooks.reconcile.settling.catching_up``) on the app's database
    (``url``, else the host's), with the gateways' API credentials the environment gives."""
    from payhooks.reconcile import settling

    return settling.catch_up_once(*_settling(ctx, found, url), **_bounds(found))


def fetch_settlements(
    ctx: typer.Context, found: Settings, days: tuple[date, date], url: str | None
) -> SettlingTally:
    """A fetch on the app's database (``url``, else the host's), with the gateways' API
    credentials the environment gives."""
    from payhooks.reconcile import settling

    return settling.fetch_once(*_settling(ctx, found, url), *days, **_bounds(found))


def _settling(
    ctx: typer.Context, found: Settings, url: str | None
) -> tuple[Callable[[], Any], Mapping[Provider, ApiCredentials]]:
    """Where a settlements fetch connects, and the gateways' API credentials it asks with."""
    credentials = found.reconciled()
    if not credentials:
        raise ValueError("no gateway API credentials are set: no settlement report can be asked")
    return (lambda: host(ctx).connect(url)), credentials


def _bounds(found: Settings) -> dict[str, Any]:
    return {
        "timeout_s": found.reconcile_timeout_ms / 1000,
        "margin": timedelta(hours=found.settlement_margin_hours),
    }


@app.command()
def alerts(
    ctx: typer.Context,
    database_url: DatabaseUrl = None,
    every: Every = 60.0,
    once: Once = False,
) -> None:
    """Tell people what is wrong, by email and chat webhook, every minute until stopped.

    Stop it with SIGTERM or Ctrl-C. What it tells: a gateway answered 5xx, forged signatures,
    reconciliation refused or not running, parked deliveries, refunds refused. Each alert is
    sent once however many hosts run this, said again at most every
    PAYHOOKS_ALERT_REPEAT_MINUTES, and resolved. With --once it exits 1 when a notice could
    not be sent or a condition could not be read."""
    host(ctx).configure_logs()
    found = settings(ctx)
    url = _app_url(found, database_url, "alerts")
    notifier = run(lambda: host(ctx).alert_notifier(found))
    if not notifier.channels:
        run(lambda: fail(
            "no alert channel is set: PAYHOOKS_ALERT_WEBHOOK_URL, or PAYHOOKS_SMTP_URL and "
            "PAYHOOKS_ALERT_EMAIL"
        ))  # fmt: skip

    def said(tally: AlertTally) -> str | None:
        told = once or tally.raised or tally.repeated or tally.resolved or tally.failed
        return tally.summary() if told else None

    repeat(
        lambda: on_connection(ctx, lambda conn: notifier.tick(conn, datetime.now(UTC)), url),
        said, every=every, once=once, command="alerts", stopping=stop_on_signals(),
        failed=lambda tally: tally.trouble(),
    )  # fmt: skip


@app.command()
def purge(
    ctx: typer.Context,
    older_than_days: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=policy.MAX_RETENTION_DAYS,
            help="Window to keep; default PAYHOOKS_RETENTION_DAYS "
            f"({policy.DEFAULT_RETENTION_DAYS}).",
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="Count what would go; delete nothing.")] = False,
    force: Annotated[
        bool, typer.Option(help=f"Allow a window shorter than {policy.MIN_RETENTION_DAYS} days.")
    ] = False,
    batch_rows: Annotated[int, typer.Option(min=1, help="Rows per delete transaction.")] = 5000,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="Your app's database: purge the core's tables there, not the reference "
            "service's; SQLAlchemy's postgresql+psycopg:// is taken too.",
            callback=libpq,
        ),
    ] = None,
) -> None:
    """Delete delivery records older than the retention window, in small batches."""
    host(ctx).configure_logs()  # a record kept is logged with its key and why, as JSON
    days = older_than_days if older_than_days is not None else settings(ctx).retention_days
    forced = force or dry_run  # a count deletes nothing: any window may be counted
    run(lambda: policy.check_window(days, force=forced))
    options = {"force": forced, "batch_rows": batch_rows}
    if database_url is None:
        result = with_connection(ctx, lambda conn: host(ctx).purge(conn, days, dry_run, options))
    else:
        result = run(lambda: purge_app(database_url, days, dry_run, options))
    typer.echo(
        f"{result.counted(dry_run=dry_run)} older than {days} days "
        f"(before {result.cutoff:%Y-%m-%d %H:%M}){result.kept_said()}"
    )
    if result.refused:
        exit_with(PayhooksError(result.refusals()), result.refusals())


def purge_app(url: str, days: int, dry_run: bool, options: Mapping[str, Any]) -> policy.Purge:
    """A merchant app's purge: the core's tables alone."""
    import psycopg

    # No server-side prepared statement: behind a transaction pooler one made on another
    # server session fails (the purge runs each statement a few times; preparing buys nothing).
    with db.translated(), psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        planned = policy.plan(conn, days)
        if dry_run:
            return planned
        with progress(planned.expired) as advance:
            done = policy.purge(conn, days, on_batch=advance, planned=planned, **options)
    return purged(done, "on that database")


def purged(done: policy.Purge | None, where: str) -> policy.Purge:
    if done is None:
        raise PayhooksError(f"another purge is running ({where}); try later")
    return done


@app.command()
def parked(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """List deliveries that matched no checkout and wait to be applied."""
    rows = with_connection(ctx, lambda conn: parking.waiting(conn, limit=10_000), database_url)
    if as_json:
        print_json([{**asdict(r), "received_at": r.received_at.isoformat()} for r in rows])
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} parked")
    for name in ("provider", "delivery key", "event", "received at"):
        table.add_column(name, overflow="fold")  # a key folded, never cut with an ellipsis
    for r in rows:
        table.add_row(r.provider, r.event_id, r.event_type, r.received_at.isoformat())
    # Never cut a key to the width of a pipe or cron's mail (80): it is what `replay` takes.
    Console(width=None if sys.stdout.isatty() else 10_000).print(table)


NO_SHOP = (
    "without --hooks, replay applies the reference shop's handler, and this database holds "
    "none of its tables: replay into your app through its handler, --hooks module:attribute "
    "(your Hooks), with its PAYHOOKS_ webhook secrets set"
)


def _core_table(missing: Exception) -> bool:
    """The table a statement found missing is payhooks' own (``processed_webhooks``,
    ``payhooks_*``), not the reference shop's."""
    said = str(getattr(getattr(missing, "diag", None), "message_primary", "") or "")
    name = said.split('"')[1] if said.count('"') >= 2 else ""
    return name == "processed_webhooks" or name.startswith("payhooks_")


@app.command()
def replay(
    ctx: typer.Context,
    event_id: Annotated[str, typer.Argument(help="The delivery key, as `payhooks parked` shows.")],
    provider: Annotated[
        Provider | None, typer.Option(help="When two gateways share a key.")
    ] = None,
    hooks: Annotated[
        str | None,
        typer.Option(
            help="Your app's handler, as module:attribute: replay into your app's database "
            "through it (the webhook secrets are read from the PAYHOOKS_ variables). A Django "
            "app replays with manage.py payhooks_replay."
        ),
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Run a stored delivery again through the same ingest path (same transaction, same keys)."""
    import psycopg

    from payhooks.operations import replays

    found = settings(ctx)
    in_django = "`manage.py payhooks_replay KEY` or the admin's replay action"
    handler = None if hooks is None else run(lambda: import_hooks(hooks, in_django=in_django))
    url = None if handler is None else _app_url(found, database_url, "--hooks")

    def action(conn: db.Connection) -> dict[str, Any]:
        key = provider.value if provider else None
        if handler is None:
            try:
                receipt = host(ctx).replay(conn, event_id, key)
            except psycopg.errors.UndefinedTable as exc:
                if _core_table(exc):  # payhooks' own: not migrated; said as any database error
                    raise
                exit_with(exc, f"{NO_SHOP} ({exc.diag.message_primary})")
        else:
            from payhooks.applying import through

            apply = through(handler, str(url))
            try:
                receipt = replays.replay(
                    conn, found.adapters(), apply, event_id=event_id, provider=key
                )
            except (PayhooksError, psycopg.Error):  # said by run(), the unset secret named
                raise
            except Exception as exc:  # the merchant's handler: one line, as any error (-v: all)
                exit_with(exc, f"your handler raised {type(exc).__name__}: {exc} (nothing kept)")
        return {
            "status": receipt.outcome.value,
            "event_id": receipt.event.event_id,
            "order_id": receipt.order_id,
        }

    print_json(with_connection(ctx, action, database_url))


@app.command()
def resolve(
    ctx: typer.Context,
    event_id: Annotated[str, typer.Argument(help="The delivery's key (parked, or waiting).")],
    provider: Annotated[Provider, typer.Option(help="Its gateway.")],
    note: Annotated[str, typer.Option(help="How it was settled: refunded, written off, ...")],
    database_url: DatabaseUrl = None,
) -> None:
    """Settle a parked delivery outside payhooks, keeping your note.

    A payment parked for its amount (refunded in the gateway's dashboard), or one its handler
    parked that will never apply (a refund or a dispute of a payment never taken): recorded
    ignored, keeping your note. A callback waiting for its gateway's API that the API will never
    settle: recorded refuted, nothing applied, keeping your note. To apply a payment as paid
    instead, correct the expectation and replay it."""
    from payhooks.intake.expectations import NotAMismatch
    from payhooks.intake.expectations import resolve as settle

    def action(conn: db.Connection) -> None:
        try:
            settle(conn, provider, event_id, note)
        except NotAMismatch as exc:
            raise ValueError(str(exc)) from None

    with_connection(ctx, action, database_url)
    typer.echo(f"resolved {provider.value} {event_id}: {note}")


operator_app = typer.Typer(
    help="Console operators: who may log in to /console.", no_args_is_help=True
)
app.add_typer(operator_app, name="operator")


@operator_app.command("add")
def operator_add(
    ctx: typer.Context,
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
    from payhooks.operations import operators

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    added = with_connection(
        ctx, lambda conn: operators.add_operator(conn, name, password, read_only=read_only),
        database_url,
    )  # fmt: skip
    said = "added" if added else "has a new password"
    role = {True: " (read-only)", False: " (can act)", None: ""}[read_only]
    typer.echo(f"operator {name} {said}{role}")


@operator_app.command("remove")
def operator_remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The operator to remove.")],
    database_url: DatabaseUrl = None,
) -> None:
    """Remove an operator; their sessions end at once."""
    from payhooks.operations import operators

    if not with_connection(ctx, lambda conn: operators.remove_operator(conn, name), database_url):
        exit_with(NotFound("operator", name), f"operator {name!r} not found")
    typer.echo(f"operator {name} removed")


@operator_app.command("list")
def operator_list(ctx: typer.Context, database_url: DatabaseUrl = None) -> None:
    """The operators who may log in to the console."""
    from payhooks.operations import operators

    for operator in with_connection(ctx, operators.operators, database_url):
        role = "\tread-only" if operator.read_only else ""
        typer.echo(f"{operator.name}\tadded {in_utc(operator.created_at)}{role}")


@app.command("console")
def console_command(
    ctx: typer.Context,
    hooks: Annotated[
        str,
        typer.Option(
            help=f"{HOOKS_HELP}: parked deliveries replay through it. The webhook secrets are "
            "read from the PAYHOOKS_ variables, as `payhooks replay` reads them."
        ),
    ],
    database_url: DatabaseUrl = None,
    host_address: Annotated[
        str, typer.Option("--host", help="Address to listen on.")
    ] = "127.0.0.1",
    port: Port = 8100,
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
    """Serve the operator console for your app at /console, on your app's database.

    For Flask, or any app that cannot mount it; payhooks' own tables are migrated first."""
    needing("the console", "console", "cli,console", "uvicorn", "payhooks.console")
    import uvicorn

    from payhooks.console import console_app
    from payhooks.plumbing.schema import migrate as migrate_core

    host(ctx).configure_logs()
    found = settings(ctx)
    url = _app_url(found, database_url, "the console")
    handler = run(lambda: import_hooks(hooks, in_django="the Django admin (Payment webhooks)"))
    applied = with_connection(ctx, migrate_core, url)
    if applied:
        typer.echo(f"payhooks: applied {', '.join(applied)}", err=True)
    served = found.adapters()
    names = ", ".join(sorted(p.value for p in served)) or "none"
    typer.echo(
        f"payhooks console on http://{host_address}:{port}{root_path.rstrip('/')}/console "
        f"(gateways: {names}); "
        "add operators with `payhooks operator add NAME --database-url ...`",
        err=True,
    )

    def fetch(start: date, end: date) -> SettlingTally:
        return fetch_settlements(ctx, found, (start, end), url)

    uvicorn.run(
        console_app(
            url,
            adapters=served.values(),
            hooks=handler,
            timezone=found.console_timezone,
            fetch_settlements=fetch if found.reconciled() else None,
        ),
        host=host_address,
        port=port,
        log_level="warning",
        root_path=root_path,
        proxy_headers=True,
        forwarded_allow_ips=forwarded_allow_ips,
    )


refunds_app = typer.Typer(
    help="Refunds sent to the gateways exactly once (payhooks.refunds).", no_args_is_help=True
)
app.add_typer(refunds_app, name="refunds")


def _app_database(ctx: typer.Context, database_url: str | None, command: str) -> str:
    url = database_url or settings(ctx).database_url or ""
    if not url:
        run(lambda: fail(f"{command} needs a database: --database-url or DATABASE_URL"))
    return url


_NO_DJANGO_REFUNDS = (
    "`payhooks refunds send` without --hooks: the gateway's refund webhook reaches a Django "
    "app's REFUND_PROCESSED handlers"
)


@refunds_app.command("send")
def refunds_send(
    ctx: typer.Context,
    database_url: DatabaseUrl = None,
    every: Every = 2.0,
    once: Once = False,
    hooks: Annotated[
        str | None,
        typer.Option(
            help=f"{HOOKS_HELP}: each refund the gateway says processed reaches its "
            "REFUND_PROCESSED handler, as the refund webhook would."
        ),
    ] = None,
) -> None:
    """Send the refund intents due to their gateways, each exactly once, until stopped.

    Each under its idempotency key, every few seconds until stopped (SIGTERM, Ctrl-C): a call
    that timed out, an answer lost or a sender killed mid-call is asked again with the same key,
    and refunds once. The intents of a gateway whose API credentials are not set wait, unsent:
    each such gateway is named on standard error (at start, and again as their count changes);
    with --once it exits 1. With --hooks, a refund made is also delivered to the app's hooks
    (once, beside its webhook), so the app records it even if that webhook never comes."""
    from payhooks.reconcile import refunding, running

    host(ctx).configure_logs()
    url = _app_database(ctx, database_url, "refunds send")
    found = settings(ctx)
    credentials = found.reconciled()
    if not credentials:
        run(lambda: fail("no gateway API credentials are set: no refund can be sent"))
    deliver = None
    if hooks is not None:
        handler = run(lambda: import_hooks(hooks, in_django=_NO_DJANGO_REFUNDS))
        deliver = _delivering(url, handler)
    stopping = stop_on_signals()
    connect = running.connecting(url)
    timeout_s = found.reconcile_timeout_ms / 1000
    told: dict[Provider, int] = {}

    def one_pass() -> RefundTally:
        tally = refunding.send_once(connect, credentials, timeout_s=timeout_s,
                                    stop=stopping.is_set, deliver=deliver, erring=once)  # fmt: skip
        waiting = refunding.unsendable(connect, credentials)
        if waiting and waiting != told:
            for provider, count in waiting.items():
                typer.echo(f"payhooks: {_unsent(provider, count)}", err=True)
        told.clear()
        told.update(waiting)
        return tally

    def said(tally: RefundTally) -> str | None:
        moved = any(
            sum(getattr(tally, n).values())
            for n in ("sent", "refused", "incomplete", "retried", "spent")
        )
        return tally.summary() if once or moved else None

    repeat(one_pass, said, every=every, once=once, command="refunds send", stopping=stopping,
           failed=lambda tally: tally.trouble())  # fmt: skip
    if once and told:
        raise typer.Exit(1)


def _unsent(provider: Provider, count: int) -> str:
    """A gateway's intents no pass sends, and the variables that would send them."""
    return GATEWAYS[provider].waiting_for_credentials(count, "refund intent(s) waiting, not sent")


@refunds_app.command("list")
def refunds_list(
    ctx: typer.Context,
    payment_id: Annotated[str, typer.Argument(help="The gateway's payment id.")],
    provider: Annotated[Provider, typer.Option(help="The gateway.")],
    database_url: DatabaseUrl = None,
) -> None:
    """Print a payment's refund intents as JSON.

    Each with its amount, state, the gateway's refund id, attempts and the last error."""
    import dataclasses

    import psycopg

    from payhooks.refunding import refunds

    url = _app_database(ctx, database_url, "refunds list")

    def read() -> list[dict[str, Any]]:
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            return [dataclasses.asdict(r) for r in refunds.of_payment(conn, provider, payment_id)]

    print_json(run(read))


@refunds_app.command("cancel")
def refunds_cancel(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="The intent's idempotency key (ph..., as listed).")],
    provider: Annotated[Provider, typer.Option(help="The gateway.")],
    reason: Annotated[str, typer.Option(help="Why it is cancelled (kept with it).")],
    by: Annotated[str, typer.Option(help="Who cancels it (kept with it).")],
    not_at_gateway: Annotated[
        bool,
        typer.Option(
            "--not-at-gateway",
            help="You looked in the gateway's dashboard and it does not have the refund "
            "(needed once it was sent: an answer lost may hide a refund the gateway made).",
        ),
    ] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Cancel a refund intent stuck `requested`, making its amount refundable again.

    For a gateway that keeps failing its call: the intent is never sent afterwards. Refused
    while a sender is calling the gateway with it, once the gateway has it, and, once it was
    sent (attempts above 0), unless --not-at-gateway says the dashboard shows no such
    refund. Prints the intent as JSON."""
    import dataclasses

    import psycopg

    from payhooks.refunding import refunds

    url = _app_database(ctx, database_url, "refunds cancel")

    def cancel() -> dict[str, Any]:
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            done = refunds.cancel(conn, provider, key, reason=reason, cancelled_by=by,
                                  not_at_gateway=not_at_gateway)  # fmt: skip
            return dataclasses.asdict(done)

    print_json(run(cancel))


__all__ = [
    "catch_up_settlements",
    "fetch_settlements",
    "operator_app",
    "purged",
    "reconcile_app",
    "refunds_app",
]


relay_app = typer.Typer(
    help="Relay payment events to a message broker after commit, each once in effect.",
    no_args_is_help=True,
)
app.add_typer(relay_app, name="relay")


@relay_app.command("nats")
def relay_nats(ctx: typer.Context, database_url: DatabaseUrl = None, once: Once = False) -> None:
    """Publish every payment event applied to NATS JetStream, until stopped.

    To PAYHOOKS_RELAY_NATS_URL, in each payment's order, under its message id (Nats-Msg-Id);
    stop it with SIGTERM or Ctrl-C. From its first start on, every event applied is queued for
    it."""
    found = settings(ctx)
    nats = run(lambda: _client("nats", "payhooks.relay.nats"))
    options = nats.NatsOptions(
        url=found.relay_nats_url, stream=found.relay_nats_stream,
        prefix=found.relay_subject_prefix,
        duplicate_window_s=float(found.relay_nats_duplicate_window_s),
        timeout_s=found.relay_publish_timeout_ms / 1000,
    )  # fmt: skip
    _relay(ctx, found, nats.JetStream(options), database_url, once)


@relay_app.command("rabbitmq")
def relay_rabbitmq(
    ctx: typer.Context, database_url: DatabaseUrl = None, once: Once = False
) -> None:
    """Publish every payment event applied to RabbitMQ, until stopped.

    To PAYHOOKS_RELAY_RABBITMQ_URL, in each payment's order, persistent, confirmed, under its
    message id; stop it with SIGTERM or Ctrl-C. From its first start on, every event applied is
    queued for it."""
    found = settings(ctx)
    rabbitmq = run(lambda: _client("rabbitmq", "payhooks.relay.rabbitmq"))
    options = rabbitmq.RabbitOptions(
        url=found.relay_rabbitmq_url, exchange=found.relay_rabbitmq_exchange,
        queue=found.relay_rabbitmq_queue, prefix=found.relay_subject_prefix,
        timeout_s=found.relay_publish_timeout_ms / 1000,
    )  # fmt: skip
    _relay(ctx, found, rabbitmq.RabbitMQ(options), database_url, once)


@relay_app.command("status")
def relay_status(ctx: typer.Context, database_url: DatabaseUrl = None) -> None:
    """Print each broker's channel as JSON: queued or not, how many wait, the oldest's age."""
    from dataclasses import asdict

    from payhooks.operations import outbox

    found = with_connection(ctx, outbox.backlogs, database_url)
    print_json([asdict(backlog) for backlog in found])


@relay_app.command("remove")
def relay_remove(
    ctx: typer.Context,
    channel: Annotated[str, typer.Argument(help="nats or rabbitmq.")],
    drop_queued: Annotated[
        bool, typer.Option(help="Also delete the events queued for it: never to be published.")
    ] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Stop queueing payment events for a broker.

    A relay of it still running stops, saying so (exit 1). The events already queued stay, for a
    relay to publish, unless --drop-queued."""
    from payhooks.operations import outbox

    if channel not in outbox.CHANNELS:
        run(lambda: fail(f"the channels are {', '.join(outbox.CHANNELS)}, not {channel!r}"))
    removed = with_connection(ctx, lambda conn: outbox.remove_channel(conn, channel), database_url)
    if drop_queued:
        gone = with_connection(ctx, lambda conn: outbox.drop_queued(conn, channel), database_url)
        typer.echo(f"{channel}: {gone} queued event(s) dropped, never to be published")
    left = with_connection(ctx, outbox.backlogs, database_url)
    waiting = next(b.waiting for b in left if b.channel == channel)
    said = "no longer queued" if removed else "was not queued"
    typer.echo(f"{channel}: payment events {said}; {waiting} queued event(s) left unpublished")


def _client(extra: str, module: str) -> Any:
    """The broker's module, or the extra to install for it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PayhooksError(
            f"the {extra} relay needs its client library: pip install 'payhooks[{extra}]' "
            f"({exc.name} is missing)"
        ) from exc


def _relay(
    ctx: typer.Context, found: Settings, broker: Any, database_url: str | None, once: bool
) -> None:
    from payhooks.operations import outbox
    from payhooks.relay import relaying

    host(ctx).configure_logs()
    url = host(ctx).database(database_url)
    with_connection(ctx, lambda conn: outbox.add_channel(conn, broker.channel), url)
    hold_ms = 2 * found.relay_publish_timeout_ms + 5000  # a publish, and a connection's time
    options = relaying.RelayOptions(batch=found.relay_batch, hold_timeout_ms=hold_ms)
    relay = run(lambda: relaying.run(relaying.connecting(url), broker, options, once=once))
    if once or relay.totals.passes:
        typer.echo(relay.totals.summary())
    if once and relay.failure is not None:
        exit_with(PayhooksError(relay.failure), relay.failure)
