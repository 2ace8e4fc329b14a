"""What every ``payhooks`` command shares: the one typer app, a known error said in one line
(a traceback only with ``-v``), the daemon's pass that outlives a database blip, the common
options, and what the merchant's commands take from the host they run in (``Host``)."""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Protocol, TypeVar

import typer

from payhooks.gateways import GATEWAYS
from payhooks.plumbing import db
from payhooks.plumbing.errors import DatabaseUnavailable, PayhooksError, ProviderNotConfigured

if TYPE_CHECKING:
    from payhooks.events import Provider
    from payhooks.gateways import Adapter, ApiCredentials
    from payhooks.intake.ingest import Receipt
    from payhooks.operations.notifier import Notifier
    from payhooks.operations.retention import Purge
    from payhooks.reconcile import Tally

app = typer.Typer(help="Exactly-once effects for retried payment webhooks.", no_args_is_help=True)
T = TypeVar("T")
log = logging.getLogger("payhooks.cli")
_verbose = False


class Settings(Protocol):
    """The settings a merchant's command reads (the environment, read once by the host)."""

    @property
    def database_url(self) -> str | None: ...
    @property
    def retention_days(self) -> int: ...
    @property
    def reconcile_after_s(self) -> int: ...
    @property
    def reconcile_window_s(self) -> int: ...
    @property
    def reconcile_timeout_ms(self) -> int: ...
    @property
    def settlement_margin_hours(self) -> int: ...
    @property
    def console_timezone(self) -> str: ...
    @property
    def relay_nats_url(self) -> str: ...
    @property
    def relay_nats_stream(self) -> str: ...
    @property
    def relay_nats_duplicate_window_s(self) -> int: ...
    @property
    def relay_rabbitmq_url(self) -> str: ...
    @property
    def relay_rabbitmq_exchange(self) -> str: ...
    @property
    def relay_rabbitmq_queue(self) -> str: ...
    @property
    def relay_subject_prefix(self) -> str: ...
    @property
    def relay_batch(self) -> int: ...
    @property
    def relay_publish_timeout_ms(self) -> int: ...
    def reconciled(self) -> dict[Provider, ApiCredentials]: ...
    def reconciliation_off(self) -> list[Provider]: ...
    def adapters(self) -> dict[Provider, Adapter]: ...


class Host(Protocol):
    """Where the command runs: how the environment is read, logs configured, a command's
    connection made (to ``url``, else the host's own database), the alert channels set up,
    and what its own database's reconcile, purge and replay are (``--hooks`` and
    ``--database-url`` name the merchant's instead)."""

    def settings(self) -> Settings: ...
    def configure_logs(self) -> None: ...
    def connect(
        self, url: str | None = None
    ) -> contextlib.AbstractContextManager[db.Connection]: ...
    def database(self, url: str | None = None) -> str:
        """The database a command works on: ``url``, else the host's own."""
        ...

    def alert_notifier(self, settings: Settings) -> Notifier: ...
    def reconcile(
        self, settings: Settings, limit: int, after_s: int | None, url: str | None = None
    ) -> Tally: ...
    def purge(
        self, conn: db.Connection, days: int, dry_run: bool, options: Mapping[str, Any]
    ) -> Purge: ...
    def replay(self, conn: db.Connection, event_id: str, provider: str | None) -> Receipt: ...


def host(ctx: typer.Context) -> Host:
    """The host the front door put on the context (``payhooks.cli.commands``)."""
    found: Host = ctx.find_root().obj
    return found


def settings(ctx: typer.Context) -> Settings:
    return run(host(ctx).settings)


def run(action: Callable[[], T]) -> T:
    """One clear line and a non-zero exit on a known error; tracebacks only with -v."""
    import httpx
    import psycopg

    try:
        return action()
    except ProviderNotConfigured as exc:
        exit_with(exc, f"{exc}{_unset(exc.provider)}")
    except DatabaseUnavailable as exc:
        exit_with(exc, f"{exc}{_why(exc)}")
    except (PayhooksError, OSError, ValueError, httpx.HTTPError) as exc:
        exit_with(exc, str(exc) or type(exc).__name__)
    except psycopg.Error as exc:
        hint = (
            " (payhooks' tables are not all there: the reference service runs `payhooks "
            "migrate`; your own app `payhooks migrate --core` or `payhooks.migrate(conn)`, as "
            "`payhooks console` does)"
            if exc.sqlstate == "42P01"
            else ""
        )
        exit_with(exc, f"database error {exc.sqlstate}: {str(exc).splitlines()[0]}{hint}")


_LIBPQ_SAID = (
    "Connection refused",
    "timeout expired",
    "No route to host",
    "Network is unreachable",
    "Name or service not known",
    "server closed the connection unexpectedly",
)
"""libpq's own words worth an operator's line; anything else it says may quote the URL as
given (a password holding ``@`` is read as part of the host and named back)."""


def _why(exc: DatabaseUnavailable) -> str:
    """Why, for the operator's terminal (never an HTTP answer): the server's own refusal
    (``FATAL: database "x" does not exist``, ``password authentication failed for user``),
    else one of libpq's plain reasons (``Connection refused``); never the driver's text
    whole, which may quote part of the URL."""
    said = " ".join(str(exc.__cause__ or "").split())
    if (fatal := re.search(r"FATAL:\s*(.+)", said)) is not None:
        return f" (the server: {fatal.group(1)[:300]})"
    known = next((words for words in _LIBPQ_SAID if words in said), None)
    return f" ({known})" if known else ""


def _unset(provider: str) -> str:
    """What to set for a gateway the command found no secret of (the commands read them from
    the environment)."""
    found = next((g for g in GATEWAYS.values() if g.provider.value == provider), None)
    if found is None:
        return ""
    return ": set " + " and ".join(secret.variable for secret in found.secrets)


def passing(action: Callable[[], T], *, once: bool, command: str) -> T | None:
    """One pass of a daemon (``--every``): the database away (or its connection dropped) is
    logged (``daemon_pass_failed``) and the next pass tries again, as the reference worker
    does; None for the pass lost. With ``--once`` any error exits 1, as every command's."""
    import psycopg

    if once:
        return run(action)
    try:
        return action()
    except (psycopg.OperationalError, psycopg.InterfaceError, DatabaseUnavailable) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("daemon_pass_failed", extra={"command": command, "error": reason[:200]})
        return None


def repeat(
    one_pass: Callable[[], T],
    said: Callable[[T], str | None],
    *,
    every: float,
    once: bool,
    command: str,
    stopping: threading.Event,
    failed: Callable[[T], str | None] = lambda _: None,
) -> None:
    """A daemon: a pass (``passing``) every ``every`` seconds until ``stopping`` is set, or one
    pass with ``--once``; what a pass ``said`` is printed (None: nothing worth a line). With
    ``--once``, a pass that ``failed`` (its reason) exits 1, the reason on stderr."""
    while True:
        tally = passing(one_pass, once=once, command=command)
        told = None if tally is None else said(tally)
        if told is not None:
            typer.echo(told)
        trouble = None if tally is None or not once else failed(tally)
        if trouble is not None:
            typer.echo(f"payhooks: {trouble}", err=True)
            raise typer.Exit(1)
        if once or stopping.wait(every):
            return


def exit_with(exc: BaseException, reason: str) -> NoReturn:
    if _verbose:
        raise exc
    typer.echo(f"payhooks: {reason}", err=True)
    raise typer.Exit(1)


def fail(reason: str) -> None:
    raise PayhooksError(reason)


def needing(what: str, extra: str, install: str, *modules: str) -> None:
    """The ``modules`` a command needs from ``extra`` imported, or one line saying ``what``
    needs that extra and ``pip install 'payhooks[install]'``, exit 1: a module missing, or a
    library failing its own check for one as it is imported (FastAPI refuses forms without
    python-multipart with a ``RuntimeError``). The module not found is named, else the
    library's reason."""
    import importlib
    import warnings

    for module in modules:
        silenced = logging.root.manager.disable
        logging.disable(logging.CRITICAL)  # a library's own log line of it (FastAPI's): ours only
        try:
            with warnings.catch_warnings():  # nor its import's warnings (platformdirs' of an
                warnings.simplefilter("ignore")  # unset XDG_RUNTIME_DIR): whether it is there
                importlib.import_module(module)
        except Exception as exc:  # a missing transitive module is not always an ImportError
            if isinstance(exc, ImportError) and exc.name:
                reason = f"{exc.name} is not installed"
            else:  # the library's own words (FastAPI's: python-multipart is to be installed)
                reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].strip()
            exit_with(
                exc, f"{what} needs the {extra} extra ({reason}): pip install 'payhooks[{install}]'"
            )
        finally:
            logging.disable(silenced)


def with_connection(
    ctx: typer.Context, action: Callable[[db.Connection], T], url: str | None = None
) -> T:
    return run(lambda: on_connection(ctx, action, url))


def on_connection(
    ctx: typer.Context, action: Callable[[db.Connection], T], url: str | None = None
) -> T:
    with host(ctx).connect(url) as conn:
        return action(conn)


def set_verbose(verbose: bool) -> None:
    global _verbose
    _verbose = verbose


def libpq(url: str | None) -> str | None:
    """``--database-url`` as libpq reads it, or refused in DATABASE_URL's fixed words before
    the command runs: the driver's own quote the value, password and all."""
    if url is None:
        return None
    found = db.readable_url(url)
    if found is None:
        reason = f"--database-url {db.URL_SYNTAX}"
        exit_with(ValueError(reason), reason)
    return found


DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        help="Your app's database (default DATABASE_URL, else the service's); "
        "SQLAlchemy's postgresql+psycopg:// is taken too.",
        callback=libpq,
    ),
]
Port = Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")]
"""A TCP port: the kernel takes one past 65535 modulo 65536 (70000 listens on 4464)."""
Every = Annotated[float, typer.Option(min=0.2, help="Seconds between passes while it runs.")]
Once = Annotated[bool, typer.Option("--once", help="One pass, then exit.")]


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, default=str))


def webhook_variables() -> str:
    """Each gateway's webhook settings: "PAYHOOKS_PAYU_MERCHANT_KEY with PAYHOOKS_PAYU_SALTS"."""
    return ", ".join(
        " with ".join(secret.variable for secret in found.secrets) for found in GATEWAYS.values()
    )


def import_hooks(target: str, *, in_django: str) -> Any:
    """``module:attribute``, imported from the current directory too, as uvicorn does. Whatever
    the module raises on import (a missing module, a setting it reads, a syntax error) is a
    ``ValueError`` naming it: the command's one-line cause. So is a registry no handler is
    registered on, through which every delivery would be recorded ``ignored``, never to be
    applied again; and Django's registry, or a module needing Django set up: their handlers
    run inside Django, by ``in_django`` (``manage.py payhooks_replay KEY``), never here."""
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
        if type(exc).__module__.startswith("django."):
            raise ValueError(
                f"--hooks {target}: importing {module_name} needs Django set up "
                f"({type(exc).__name__}): a Django app's handlers {_in_django(in_django)}"
            ) from exc
        reason = f"{type(exc).__name__}: {exc}"
        raise ValueError(f"--hooks {target}: importing {module_name} failed ({reason})") from exc
    found = getattr(module, attribute, None)
    if found is None:
        raise ValueError(f"{module_name} has no handler named {attribute!r}")
    if not callable(found):
        raise ValueError(
            f"--hooks {target} names a {type(found).__name__}, not a payhooks.Hooks (or "
            "AsyncHooks) registry or a handler function"
        )
    if inspect.iscoroutinefunction(found):
        raise ValueError(
            f"--hooks {target} is an async function: register it on a "
            "payhooks.fastapi.AsyncHooks and name that"
        )
    _refuse_unrunnable(target, found, in_django)
    return found


def _refuse_unrunnable(target: str, found: object, in_django: str) -> None:
    """Django's registry (``payhooks.django.hooks``): outside Django it is empty, the app fills
    it in ``ready()``, and filled, its handlers write through the ORM on Django's connection,
    outside the transaction of a claim made here. Any other registry with no handler at all."""
    from payhooks.intake.hooks import Registry

    django_app = sys.modules.get("payhooks.django")
    if django_app is not None and found is getattr(django_app, "hooks", None):
        raise ValueError(
            f"--hooks {target} is the Django app's registry, whose handlers {_in_django(in_django)}"
        )
    if isinstance(found, Registry) and not found.kinds():
        raise ValueError(
            f"--hooks {target} has no handler registered: every delivery would be recorded "
            "ignored through it, never to be applied (are its handlers registered when "
            "its module is imported?)"
        )


def _in_django(door: str) -> str:
    return f"run only inside Django (on its connection, in the claim's transaction): use {door}"


@contextlib.contextmanager
def progress(total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal; silence elsewhere."""
    if not sys.stderr.isatty():
        yield lambda _: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("purging", total=total)
        yield lambda done: bar.advance(task, done)


def stop_on_signals() -> threading.Event:
    """Set by SIGTERM or Ctrl-C: a daemon finishes its pass and exits. Only a process's main
    thread may take a signal: a command run from another (a program calling the CLI in a
    thread of its own) stops as that program stops it."""
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        return stopping
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    return stopping
