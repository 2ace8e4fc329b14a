"""The console's pages: server-rendered, auto-escaped, no script (docs/console.md).

One console for every app: ``make(views, ...)`` (assembled in ``app``) is an ASGI app to mount
where the operators should find it (``app.mount("/payhooks", ...)``), and every address it makes
is under that mount. The core's pages (search, a gateway order's timeline, a stored delivery,
parked deliveries and their replay, settling a payment parked for its amount, webhook health, and
in ``listings`` the deliveries and payments lists, their exports and the bulk replay) read the
core's tables; ``Views`` names what is the app's own: how a replay reaches its handler,
and, for the reference shop, its carts, emails and dead letters.

Every route but the login form sits behind a session; every POST carries the session's CSRF
token and, when the browser sends one, an Origin of this very site, then redirects (a reload
never repeats an action, and each action is idempotent anyway).

The console has threads and connections of its own (``CONNECTIONS`` of each), apart from the
app's and the webhooks'. Its routes run on the event loop and hand only their database work
to those threads; a request without a validly signed session cookie is sent to the login form
by ``Gate`` on the loop, before its body is read, with neither.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Annotated, Any, Concatenate, ParamSpec, Protocol, TypeVar
from urllib.parse import quote, unquote, urlencode, urlsplit

import anyio
import anyio.to_thread
import jinja2
import psycopg
import psycopg_pool
from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from markupsafe import Markup
from psycopg import errors as pg_errors
from starlette.requests import ClientDisconnect
from starlette.routing import Match, Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from payhooks.console import actions, auth, formats, health, lists
from payhooks.console.formats import DEFAULT_TIMEZONE, rupees
from payhooks.events import Provider, kind_words
from payhooks.gateways import Adapter
from payhooks.intake import idempotency
from payhooks.operations import alarms, timeline
from payhooks.plumbing import db
from payhooks.plumbing.errors import DatabaseUnavailable, PayloadTooLarge, UnreadableRecord
from payhooks.plumbing.pools import CheckedPool, watched
from payhooks.refunding import refunds
from payhooks.settlements import flags
from payhooks.starlette import read_bounded, replaying

COOKIE = "payhooks_console"
MAX_FIELD_CHARS = 1024
MAX_FORM_BYTES = 16 * 1024  # the largest form holds three fields of MAX_FIELD_CHARS
CONNECTIONS = 2  # the console's own database connections, and threads to use them
WAIT_S = 5.0
"""How long an operator's page waits for one of the console's connections: opened at the
first page, on a loaded database that can take longer than a gateway would wait."""

T = TypeVar("T")
P = ParamSpec("P")


# No script runs on these pages at all; styles are the page's own.
_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # with no-referrer, browsers send `Origin: null`
    "cache-control": "no-store",
}

# The core's pages in the header, before the app's own (``Views.nav``).
CORE_NAV = (
    ("Search & health", "/"),
    ("Deliveries", "/deliveries"),
    ("Payments", "/payments"),
    ("Disputes", "/disputes"),
    ("Parked", "/parked"),
    ("Settlements", "/settlements"),
    ("Action log", "/actions"),
)

NOTICES = {
    actions.Done.FETCHED: (
        "Fetched: each gateway's settlement report for those days is recorded and matched "
        "(the action log says what it held), and the captures not settled in time flagged."
    ),
    actions.Done.FETCH_FAILED: (
        "A gateway's settlement report failed (the action log says which and why): fetch "
        "those days again later; nothing is recorded twice."
    ),
    actions.Done.NO_FETCH: (
        "Not fetched: the days must be given, at most 31, none after today nor before 1970."
    ),
    actions.Done.APPLIED: "Replayed: the delivery was applied.",
    actions.Done.STILL_PARKED: (
        "Replayed: it is still parked (no checkout matches it yet, or its amount is still not "
        "the one expected)."
    ),
    actions.Done.IGNORED: (
        "Replayed: the app's handler ignored it (its order paid or closed meanwhile, say); "
        "it is parked no more, and nothing was applied."
    ),
    actions.Done.CONFIRMING: (
        "Replayed: it waits for the gateway's API to confirm it; the confirmations pass "
        "applies it then."
    ),
    actions.Done.ALREADY_APPLIED: (
        "Nothing to do: this delivery is parked no more (applied, or settled)."
    ),
    actions.Done.NOT_FOUND: "Nothing to do: no such delivery is recorded.",
    actions.Done.NOT_CONFIGURED: "Cannot replay: this gateway has no secret configured here.",
    actions.Done.UNREADABLE: "Cannot replay: the stored delivery cannot be read any more ({why}).",
    actions.Done.HANDLER_FAILED: (
        "Replay failed with an error (the app's logs say which, under "
        "console_replay_handler_failed); nothing was kept, and the delivery stays parked."
    ),
    actions.Done.HANDLER_COMMITTED: (
        "Replay failed: the app's handler committed or rolled back the transaction itself, "
        "which payhooks refuses; nothing was kept, and the delivery stays parked."
    ),
    actions.Done.BUSY: (
        "Not replayed now: another transaction held what this delivery needs (its order, its "
        "cart) past the lock timeout, or the replay took too long; nothing was kept, and the "
        "delivery stays parked: replay it again in a moment."
    ),
    actions.Done.SETTLED: "Settled: the delivery is recorded as handled outside payhooks.",
    actions.Done.NOT_A_MISMATCH: (
        "Not settled: this delivery is not parked (applied, or settled already), or it is a "
        "refund held beside its payment parked for its amount: settle that payment first."
    ),
    actions.Done.QUEUED: "Queued again: the worker sends it on its next round.",
    actions.Done.ALREADY_QUEUED: "Nothing to do: this message was already queued again.",
    actions.Done.NO_SUCH_MESSAGE: "Nothing to do: no such message is recorded.",
    actions.Done.REFUND_REQUESTED: (
        "Refund asked for: the worker sends it to the gateway under its idempotency key, once; "
        "its state is in the payment's refunds below."
    ),
    actions.Done.REFUND_ALREADY_REQUESTED: (
        "Nothing to do: this payment's refund was already asked for."
    ),
    actions.Done.REFUND_NOT_POSSIBLE: (
        "Cannot refund from here: nothing is left to refund, the payment needs no refund, or "
        "payhooks sends no refunds to its gateway (refund it in the gateway's dashboard)."
    ),
    actions.Done.REFUND_TOO_LARGE: (
        "Cannot refund that much: less is still refundable than is left by the shop's count (a "
        "refund made elsewhere, or a dispute lost, that the shop has not heard of yet); the "
        "action log, on the timeline, says how much is. Try again once the shop has heard."
    ),
    actions.Done.REFUND_TAKEN_BACK: (
        "Nothing to refund: lost disputes took back what was left of this payment (the card "
        "network gave the customer that money back), so it needs no refund; its flag is "
        "cleared, and the action log, on the timeline, says how much they took."
    ),
    actions.Done.REFUND_CANCELLED: (
        "Refund cancelled: it is never sent; what its payment still has to refund (the "
        "payment's refunds say) may be asked for again."
    ),
    actions.Done.REFUND_ALREADY_CANCELLED: "Nothing to do: this refund was already cancelled.",
    actions.Done.REFUND_NOT_CANCELLABLE: (
        "Cannot cancel: the worker is calling the gateway with this refund right now: try again "
        "in a minute or two."
    ),
    actions.Done.REFUND_AT_GATEWAY: (
        "Cannot cancel: the gateway has this refund already (sent or processed), and payhooks "
        "cannot call it back; its state is in the payment's refunds."
    ),
    actions.Done.NO_SUCH_REFUND: (
        "Nothing to cancel: no refund is recorded under that key for that gateway (its key as "
        "the payment's refunds list it)."
    ),
    actions.Done.REASON_REFUSED: (
        "Nothing done: the reason is 1 to 255 characters of plain text (no control characters)."
    ),
    actions.Done.NOT_CONFIRMED: "Nothing done: tick the box to confirm first.",
    actions.Done.NO_REASON: "Nothing done: say why it is cancelled.",
    actions.Done.BULK_REPLAYED: "Replayed in bulk: each delivery is a line of the action log.",
    actions.Done.LINKED: "Linked: the cart is checked out under the delivery's reference.",
    actions.Done.NOT_REPLAYABLE: (
        "Not linked: this delivery cannot be replayed ({why}), so the cart is left as it was "
        "and the delivery stays parked; settle it once it is handled outside payhooks."
    ),
    actions.Done.NOT_LINKABLE: (
        "Cannot link: this delivery names no gateway reference to check a cart out under."
    ),
    actions.Done.NOT_A_PAYMENT: (
        "Not linked: this delivery is no payment ({why}), so it pays no cart; the cart is left"
        " as it was. Settle it once it is handled outside payhooks."
    ),
    actions.Done.NO_SUCH_CART: "Nothing done: no cart has that id.",
    actions.Done.ALL_QUEUED: (
        "Queued again: every dead letter listed; the worker sends them on its next round "
        "(the action log has a line for each)."
    ),
    actions.Done.SOME_QUEUED: (
        "Queued again: the dead letters listed that were still dead; the others had been "
        "queued again already (a colleague's Retry, say). The action log has a line for each."
    ),
    actions.Done.NOTHING_DEAD: "Nothing to do: no dead letter was waiting.",
    actions.Done.READDRESSED: (
        "Queued again to the corrected address: the worker sends it on its next round."
    ),
    actions.Done.CART_TAKEN: "Nothing done: {why}.",
    actions.Done.OTHER_AMOUNT: "Nothing done: {why}.",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A search result: what the text matched, what it found, and its page below the root."""

    matched: str
    label: str
    address: str
    more: str = ""
    """Set, it is no result but what the list leaves out, said in these words, with the link
    (``label``, ``address``) that lists it all: "The newest 50 of 80 carts ... are listed"."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Count:
    """A number on the home page, linking to its queue below the root."""

    key: str
    number: int
    one: str
    many: str
    address: str

    @property
    def label(self) -> str:
        return self.one if self.number == 1 else self.many


def order_address(provider: str, gateway_order_id: str) -> str:
    """A gateway order's timeline, below the console's root."""
    return f"/orders/{quote(provider, safe='')}/{quote(gateway_order_id, safe='')}"


def find_orders(conn: db.Connection, text: str) -> list[Link]:
    """The gateway orders the text names (``payhooks.operations.timeline.find``)."""
    return [
        Link(
            matched=found.matched.value,
            label=f"{formats.gateway_title(found.provider)} order {found.gateway_order_id}",
            address=order_address(found.provider, found.gateway_order_id),
        )
        for found in timeline.find(conn, text)
    ]


def _no_counts(conn: db.Connection) -> list[Count]:
    return []


@dataclass(frozen=True, slots=True, kw_only=True)
class Elsewhere:
    """A page of the app's own telling of a gateway order, linked from the order's page: "The
    shop's checkout of this order is cart ...", in the reference shop."""

    words: str
    """What that page is, before its link."""
    label: str
    address: str
    """Below the console's root."""
    after: str = ""
    """What it tells, after the link."""


def _nowhere_else(
    conn: db.Connection, provider: str, gateway_order_id: str, payment_ids: Sequence[str]
) -> Elsewhere | None:
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """A checkout a parked delivery may belong to, and why the console thinks so."""

    value: str
    """What the link form sends for it (the reference shop's cart id)."""
    label: str
    address: str
    """Its page, below the root."""
    why: str


Candidates = Callable[
    [db.Connection, Sequence[actions.Parked]], Mapping[tuple[str, str], Candidate]
]


def _no_candidates(
    conn: db.Connection, rows: Sequence[actions.Parked]
) -> Mapping[tuple[str, str], Candidate]:
    return {}


def order_of(
    conn: db.Connection, provider: str, merchant_ref: str | None, payment_id: str | None
) -> str | None:
    """Where a delivery's story is told: its gateway order's timeline, when it names one."""
    return order_address(provider, merchant_ref) if merchant_ref else None


class Fetched(Protocol):
    """What a fetch of the settlement reports came to (``payhooks.reconcile.settling.Tally``)."""

    @property
    def failures(self) -> Mapping[Provider, str]: ...

    def summary(self) -> str: ...


Fetch = Callable[[date, date], Fetched]
"""A fetch of the gateways' settlement reports for India's days ``start`` to ``end``; raises
``ValueError`` for a range it refuses."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Views:
    """What a console shows and does that is the app's own."""

    replay: actions.Replay | None
    """How a parked delivery reaches the app's handler again, in one of the console's threads
    (sync hooks) ..."""
    replay_async: actions.AsyncReplay | None = None
    """... or on the app's event loop (async hooks, which may share the app's async clients)."""
    gateways: Sequence[str] = ()
    """The gateways the app serves, named on the home page."""
    find: Callable[[db.Connection, str], list[Link]] = find_orders
    search_hint: str = (
        "Order id, your reference, payment id, delivery key, UTR/RRN, dispute id or refund id"
    )
    max_query_chars: int = timeline.MAX_QUERY_CHARS
    prefix_hint: str = "Each identifier must be given whole (no part of one is looked up)."
    """What a search finds by its start, said when nothing matches."""
    reference_address: Callable[[str, str], str] = order_address
    """Where a parked delivery's gateway reference leads."""
    story_address: Callable[[db.Connection, str, str | None, str | None], str | None] = order_of
    """Where a stored delivery's page links back to: ``(conn, provider, gateway order,
    payment id)`` to the timeline telling it (below the root), or ``None``."""
    order_elsewhere: Callable[[db.Connection, str, str, Sequence[str]], Elsewhere | None] = (
        _nowhere_else
    )
    """The app's own page telling of a gateway order, linked from the order's page: ``(conn,
    provider, gateway order, its payment ids)``, or ``None`` (the reference shop: its
    checkout's cart)."""
    counts: Callable[[db.Connection], list[Count]] = _no_counts
    """Queues of the app's own, counted on the home page."""
    nav: Sequence[tuple[str, str]] = ()
    """Pages of the app's own in the header: (label, address below the root)."""
    router: APIRouter | None = None
    """Those pages' routes (``Page`` routes, using ``page``, ``run``, ``Session``, ``csrf``)."""
    templates: jinja2.BaseLoader | None = None
    """Their templates, found before the core's (which they may extend)."""
    reconciliation_off: Sequence[str] = ()
    """Gateways the app has no status-API credentials for, said on the home page."""
    parked_note: str = "Nothing replays them on its own."
    """What replays parked deliveries besides an operator (the reference shop's worker)."""
    parked_why: str = "parked by the app's handler"
    """Why a delivery not parked for its amount is parked (the reference shop: no checkout)."""
    timezone: str = DEFAULT_TIMEZONE
    """The zone every time is shown in (an IANA name), named beside each time."""
    payments: lists.Payments = lists.CORE_PAYMENTS
    """What the payments list reads: the core's tables, or the app's own payments ..."""
    payments_note: str = (
        "Payments authorised or captured that reached the app's handler, and those parked "
        "because they were not the amount expected. Amounts are what the app told payhooks "
        "to expect (payhooks.expect), and what a mismatched payment paid."
    )
    """... and what the list's page says they are."""
    adapters: Mapping[Provider, Adapter] = field(default_factory=dict)
    """The gateways served, to read a parked delivery's amount from its stored body."""
    candidates: Candidates = _no_candidates
    """For parked deliveries, by ``(provider, delivery key)``: the checkout each may belong
    to (the app's own, found from the amount, the gateway and the time, or named in the
    body)."""
    link_to: str | None = None
    """The app's action (below the root) that links a parked delivery to a checkout and
    replays it; the parked page offers it when set."""
    fetch_settlements: Fetch | None = None
    """How the Settlements page's Fetch button fetches the gateways' settlement reports for
    a range of days (``payhooks.reconcile.settling.fetch_once`` with the app's API
    credentials: the ``reconcile`` extra); None, no button (``payhooks settlements`` does it)."""


class LoginNeeded(Exception):
    """No valid session: every console route answers with the login form's address."""


class Forbidden(Exception):
    """A POST without this session's CSRF token, or from another site."""


class NotMigrated(Exception):
    """A table of payhooks' is missing: the app has not run ``payhooks.migrate`` since
    upgrading."""


class Unreadable(Exception):
    """A value the console cannot take: a control character (NUL the database refuses),
    or anything else the database refuses to compare."""


# C0 and C1 controls and lone surrogates: no identifier, name or password holds one.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_HAS_CONTROL = "A field or the address holds a control character, which no console value has."
_CANNOT_LOOK_UP = "A field or the address holds a value the database cannot look up."


Pool = Callable[[], psycopg_pool.ConnectionPool]


class Console:
    """What the pages need: the app's views, the cookie key, the console's threads and pool."""

    def __init__(self, views: Views, pool: Pool) -> None:
        self.views = views
        self._pool = pool
        self._cookies: auth.Cookies | None = None
        self._threads: anyio.CapacityLimiter | None = None
        self._reading_key: anyio.Lock | None = None
        loaders: list[jinja2.BaseLoader] = [jinja2.PackageLoader("payhooks.console", "templates")]
        self.templates = jinja2.Environment(
            loader=jinja2.ChoiceLoader([*([views.templates] if views.templates else []), *loaders]),
            autoescape=True,  # every page shows customer-typed and gateway-sent strings
            undefined=jinja2.StrictUndefined,
        )
        self.zone = zone = formats.zone_of(views.timezone)
        self.templates.filters["when"] = self.when_kept
        self.templates.filters["when_wrapping"] = self.when_wrapping
        self.templates.filters["hour"] = lambda at: formats.hour(at, zone)
        self.templates.filters["rupees"] = rupees
        self.templates.filters["breakable"] = formats.breakable
        self.templates.filters["coded"] = formats.coded
        self.templates.filters["kind"] = kind_words
        self.templates.filters["action"] = formats.action_words
        self.templates.filters["gateway"] = formats.gateway_title
        self.templates.filters["result"] = formats.result_words
        self.templates.filters["until"] = formats.until
        self.templates.globals["dispute_words"] = formats.dispute_words
        self.templates.globals["zone_name"] = views.timezone
        self.templates.globals["answers"] = list(health.Answer)
        self.templates.tests["moment"] = lambda value: isinstance(value, datetime)
        self.templates.globals["chart"] = health.chart
        self.templates.globals["chart_size"] = (health.CHART_WIDTH, health.CHART_HEIGHT)
        self.templates.globals["views"] = views
        self.templates.globals["core_nav"] = CORE_NAV
        self.templates.globals["alarm_link"] = lambda alarm: lists.of_alarm(
            alarm, datetime.now(UTC)
        )

    def when(self, at: datetime | None) -> str:
        """A time as every page shows it, in the console's zone, never broken across lines: a
        time reads as one thing, in a column or in a sentence (a banner's)."""
        return formats.when(at, self.zone).replace(" ", "\u00a0")

    def when_kept(self, at: datetime | None) -> Markup:
        """``when`` as the templates show it, its date kept whole too (``at``, no wrap): a
        phone broke ``2026-12-07`` at a hyphen."""
        return Markup('<span class="at">%s</span>') % self.when(at)

    def when_wrapping(self, at: datetime | None) -> Markup:
        """A time as ``when`` shows it, free to wrap once, between its date and its time (a
        narrow column of a wide table): each part kept whole."""
        day, _, rest = formats.when(at, self.zone).partition(" ")
        if not rest:
            return Markup("%s") % day
        return Markup('<span class="at">%s</span> <span class="at">%s</span>') % (
            day,
            rest.replace(" ", "\u00a0"),
        )

    async def run(
        self,
        work: Callable[Concatenate[db.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``work(conn, ...)`` in one of the console's threads, on one of its connections."""

        def pooled() -> T:
            try:
                with db.translated(), watched(self._pool()) as conn:
                    try:
                        return work(conn, *args, **kwargs)
                    except psycopg.DataError as exc:  # a value the database cannot compare
                        raise Unreadable(_CANNOT_LOOK_UP) from exc
                    except pg_errors.UndefinedTable as exc:
                        raise NotMigrated() from exc
            except psycopg_pool.PoolTimeout as exc:
                raise DatabaseUnavailable("the console's connections are all busy") from exc

        if self._threads is None:  # made on the loop that uses it
            self._threads = anyio.CapacityLimiter(CONNECTIONS)
        return await anyio.to_thread.run_sync(pooled, limiter=self._threads)

    async def cookies(self) -> auth.Cookies:
        """The cookie key, read from the database once per process."""
        if self._cookies is None:
            self._reading_key = self._reading_key or anyio.Lock()
            async with self._reading_key:
                if self._cookies is None:
                    self._cookies = await self.run(auth.Cookies.of)
        return self._cookies


class OwnPool:
    """The console's pool on a database address, opened on its first use (a mounted app's
    lifespan never runs) and closed for good by ``close()``."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = db.libpq_url(conninfo)
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._opening = threading.Lock()
        self._closed = False

    def __call__(self) -> psycopg_pool.ConnectionPool:
        with self._opening:
            if self._closed:
                raise DatabaseUnavailable("the console is closed: its app is stopping")
            if self._pool is None:
                self._pool = CheckedPool(  # live after the database failed over
                    self._conninfo,
                    min_size=0,
                    max_size=CONNECTIONS,
                    kwargs={"autocommit": True},
                    timeout=WAIT_S,
                    open=True,
                    name="payhooks-console",
                )
            return self._pool

    def close(self) -> None:
        with self._opening:
            self._closed = True
            if self._pool is not None:
                self._pool.close()
                self._pool = None


class Mounted(Mount):
    """A mount that answers its bare prefix too: ``/console`` is the console's home, as
    ``/console/`` is, not a redirect to it."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and _route_path(scope) == self.path:
            bare = {**scope, "path": scope["path"] + "/"}
            if isinstance(scope.get("raw_path"), bytes):
                bare["raw_path"] = scope["raw_path"] + b"/"
            match, child = super().matches(bare)
            return match, {**child, "path": bare["path"], "raw_path": bare.get("raw_path")}
        return super().matches(scope)


_NO_SUCH = {
    404: "There is no such console page.",
    405: "This console page cannot be used that way (the wrong method).",
}


def prefix_of(scope: Scope) -> str:
    """Where the console is mounted, as the browser sees it and percent-encoded: every address
    it makes starts so. Doubled slashes (a server's ``root_path="/"`` joined to a mount) are
    one, so no address the console makes can name another host (``//host/...``)."""
    segments = [s for s in str(scope.get("root_path", "")).split("/") if s]
    return "".join("/" + quote(s, safe="") for s in segments)


def _route_path(scope: Scope) -> str:
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", "")).rstrip("/")
    return path[len(root) :] if root and path.startswith(root) else path


def _to_login(request: Request) -> Response:
    """The login form, then the page asked for. An action's address answers only its form's
    post: an action met with no session (it lapsed, or was ended, while the page was open) is
    not done, and the login leads back to the page it was asked from (the browser's same-origin
    ``Referer``; else the console's home), saying so. Logging out needs no login first."""
    prefix = prefix_of(request.scope)
    if request.method in ("GET", "HEAD"):
        raw = request.scope.get("raw_path")  # as sent: a reference may hold an encoded slash
        target = raw.decode("latin-1") if isinstance(raw, bytes) else request.url.path
        target += f"?{request.url.query}" if request.url.query else ""
        return _redirect(f"{prefix}/login?next={quote(target)}")
    came_from = urlsplit(request.headers.get("referer", ""))
    same_site = came_from.netloc == request.url.netloc and came_from.scheme in ("http", "https")
    page = came_from.path + (f"?{came_from.query}" if came_from.query else "")
    target = local(page if same_site else None, prefix)
    undone = "" if _route_path(request.scope) == "/logout" else "&undone=1"
    return _redirect(f"{prefix}/login?next={quote(target, safe='/')}{undone}")


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


async def run(
    request: Request,
    work: Callable[Concatenate[db.Connection, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """``work(conn, ...)`` on one of the console's connections, in one of its threads."""
    return await _console(request).run(work, *args, **kwargs)


async def signed_token(request: Request) -> str | None:
    """The session token the request's cookie carries, when its signature holds: checked on
    the event loop, with no thread and no connection (but the key's one read per process)."""
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    cookies = await _console(request).cookies()
    return cookies.token(cookie)


class Gate:
    """Console requests, in front of routing and before their body is read: without a
    session cookie whose signature holds (the login form excepted) they are sent to the login
    form, and a form is read only up to ``MAX_FORM_BYTES``. So a stranger's request, whatever
    it carries, takes no thread and no database connection."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            if _route_path(scope) != "/login" and await signed_token(request) is None:
                await _to_login(request)(scope, receive, send)
                return
            if scope["method"] != "POST":
                await self.app(scope, receive, send)
                return
            body = await read_bounded(request, MAX_FORM_BYTES, "console")
        except DatabaseUnavailable:
            await _unavailable(request)(scope, receive, send)
            return
        except NotMigrated:
            await _not_migrated(request)(scope, receive, send)
            return
        except PayloadTooLarge:
            await _too_large(request)(scope, receive, send)
            return
        except ClientDisconnect:
            return
        await self.app(scope, replaying(body, receive), send)


def _unavailable(request: Request) -> HTMLResponse:
    message = "The database is not answering: try again in a moment."
    return page(request, "error.html", {"message": message}, status=503)


def _not_migrated(request: Request) -> HTMLResponse:
    message = (
        "payhooks' tables are not all in this database yet: the app must run "
        "payhooks.migrate(conn) (payhooks console runs it when it starts)."
    )
    return page(request, "error.html", {"message": message}, status=503)


def _too_large(request: Request) -> HTMLResponse:
    message = f"This form is larger than any console form ({MAX_FORM_BYTES} bytes at most)."
    response = page(request, "error.html", {"message": message}, status=413)
    response.headers["connection"] = "close"  # the rest of the body is never read
    return response


# What each field is called when a request cannot be taken.
_FIELDS = {
    "name": "The operator name",
    "password": "The password",
    "next": "The page to open after logging in",
    "provider": "The gateway",
    "event_id": "The delivery key",
    "message_id": "The message number",
    "note": "How it was settled",
    "back": "The page to go back to",
    "gateway": "The gateway",
    "outcome": "The answer",
    "status": "The status",
    "amount": "The amount filter",
    "confirmation": "The confirmation filter",
    "from": "The time 'from'",
    "to": "The time 'to'",
    "before": "The page to continue from",
    "as_of": "The moment the replay was confirmed",
    "cart_id": "The cart",
    "recipient": "The email address",
    "email": "The email searched for",
    "q": "The search",
    "reason": "The reason",
    "payment_id": "The payment",
    "idempotency_key": "The refund's key",
    "listed": "The dead letters listed",
    "confirm": "The confirmation box",
    "after_id": "The page to continue from",
    "after_provider": "The page to continue from",
    "refund": "The refund filter",
    "at": "The time",
    "start": "The first day",
    "end": "The last day",
    "applied": "The count applied",
    "waiting": "The count waiting",
    "replayed": "The count replayed",
}


def _unreadable(exc: RequestValidationError) -> str:
    """What was wrong, by field, never echoing what was sent."""
    said: list[str] = []
    for error in exc.errors():
        field = _FIELDS.get(str(error.get("loc", ("",))[-1]), "A field")
        if error.get("type") == "string_too_long":
            limit = (error.get("ctx") or {}).get("max_length", MAX_FIELD_CHARS)
            text = f"{field} is too long: at most {limit} characters."
        elif error.get("type") == "missing":
            text = f"{field} is missing."
        else:
            text = f"{field} is not valid."
        if text not in said:
            said.append(text)
    return " ".join(said) or "This request cannot be read."


class Page(APIRoute):
    """A console route: a request it cannot take (a field too long or missing, ``Unreadable``,
    a list's ``lists.BadFilter``) is answered with a console page saying which field and why,
    never FastAPI's JSON (which echoes the input); the database away, too."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answered(request: Request) -> Response:
            try:
                if await _holds_control(request):
                    raise Unreadable(_HAS_CONTROL)
                return await handler(request)
            except RequestValidationError as exc:
                return page(request, "error.html", {"message": _unreadable(exc)}, status=400)
            except (Unreadable, lists.BadFilter) as exc:
                return page(request, "error.html", {"message": str(exc)}, status=400)
            except DatabaseUnavailable:
                return _unavailable(request)
            except NotMigrated:
                return _not_migrated(request)

        return answered


async def _holds_control(request: Request) -> bool:
    """Whether an address value, a query value or a form field holds a control character:
    refused before any of it reaches a page's work or the database (which refuses NUL). The
    page to go to next is not: it only ever goes through ``local``, which drops such an
    address for the console's own."""
    values = [*request.path_params.values()]
    values += [v for k, v in request.query_params.multi_items() if k not in _WHERE_NEXT]
    if request.method == "POST":
        form = (await request.form()).multi_items()
        values += [v for k, v in form if k not in _WHERE_NEXT and isinstance(v, str)]
    return any(isinstance(v, str) and _CONTROL.search(v) for v in values)


_WHERE_NEXT = frozenset({"next", "back"})


async def _session(request: Request) -> auth.Session:
    token = await signed_token(request)
    session = None if token is None else await run(request, auth.session_of, token)
    if session is None:
        raise LoginNeeded()
    request.state.session, request.state.token = session, token
    return session


Session = Annotated[auth.Session, Depends(_session)]


def _same_site(request: Request) -> None:
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        raise Forbidden("This form was sent from another site.")


async def _signed(request: Request, session: Session) -> None:
    """This session's CSRF token, from this very site."""
    _same_site(request)
    form = await request.form()
    given = form.get("csrf")
    if not isinstance(given, str) or not auth.csrf_matches(session, given):
        raise Forbidden("This form has expired: go back, reload the page and try again.")


async def csrf(request: Request, session: Session) -> None:
    """An action's guard (every POST but logging out): this session's CSRF token, from this
    very site, by an operator who may act. A read-only operator's is refused here, whatever
    the page showed them."""
    await _signed(request, session)
    if session.read_only:
        raise Forbidden(READ_ONLY)


READ_ONLY = "You are a read-only operator: you can look at every page but not act."


def private() -> APIRouter:
    """A router for an app's own console pages: each behind a session, answered as ``Page``."""
    return APIRouter(include_in_schema=False, route_class=Page, dependencies=[Depends(_session)])


_public = APIRouter(include_in_schema=False, route_class=Page)
_private = private()
Field = Annotated[str, Form(max_length=MAX_FIELD_CHARS)]


def page(
    request: Request, template: str, context: dict[str, Any], *, status: int = 200
) -> HTMLResponse:
    """``template`` rendered with the session, the console's prefix and ``context``."""
    session = getattr(request.state, "session", None)
    rendered = (
        _console(request)
        .templates.get_template(template)
        .render(
            {
                "request": request,
                "session": session,
                "prefix": prefix_of(request.scope),
                **context,
            }
        )
    )
    response = HTMLResponse(rendered, status_code=status)
    response.headers.update(_HEADERS)
    return response


def _redirect(url: str) -> RedirectResponse:
    response = RedirectResponse(url, status_code=303)
    response.headers.update(_HEADERS)
    return response


def moved_to(request: Request, address: str) -> RedirectResponse:
    """To another page of the console (``address`` below its root), as the browser sees it."""
    return _redirect(prefix_of(request.scope) + address)


def local(target: str | None, prefix: str) -> str:
    """Only a console address of this site: ``next`` must not send an operator elsewhere.

    Dot segments are resolved as a browser resolves them (``%2e`` is a dot to it) before the
    prefix is checked, and the resolved address is the one followed. A backslash (a slash to
    a browser), a control character (dropped by it), a doubled slash, or a dot segment hidden
    under more encoding (``%252e``, ``..%2f``), is not an address the console makes: refused."""
    home = prefix + "/"
    if not target or target == prefix:
        return home
    parts = urlsplit(target)
    seen = target + _fully_unquoted(parts.path)
    if (
        parts.scheme
        or parts.netloc
        or not parts.path.startswith("/")
        or "//" in parts.path
        or any(c == "\\" or c < " " or c == "\x7f" for c in seen)
    ):
        return home
    path = _without_dot_segments(parts.path)
    if prefix and path != prefix and not path.startswith(prefix + "/"):
        return home
    if {".", ".."} & set(_fully_unquoted(path).split("/")):
        return home
    return path + (f"?{parts.query}" if parts.query else "")


def _fully_unquoted(text: str) -> str:
    for _ in range(4):
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return text


def _without_dot_segments(path: str) -> str:
    """RFC 3986's remove_dot_segments, with a segment that decodes to a dot taken as one."""
    kept: list[str] = []
    segments = path.split("/")[1:]
    for n, segment in enumerate(segments):
        dots = unquote(segment)
        if dots == "..":
            del kept[-1:]
        elif dots != ".":
            kept.append(segment)
            continue
        if n == len(segments) - 1:
            kept.append("")  # "/a/.." is "/", "/a/b/." is "/a/b/"
    return "/" + "/".join(kept)


# --- logging in and out ----------------------------------------------------------------------


@_public.get("/login")
async def login_form(
    request: Request, next: str | None = None, undone: bool = False
) -> HTMLResponse:
    target = local(next, prefix_of(request.scope))
    return page(request, "login.html", {"next": target, "error": None, "undone": undone})


def _checked(
    conn: db.Connection, name: str, password: str, client: str
) -> tuple[auth.Login, str | None]:
    """A login attempt and, when it succeeds, the new session's token: one thread hop."""
    login = auth.log_in(conn, name, password, client)
    if login.operator is None:
        return login, None
    token, _ = auth.open_session(conn, login.operator)
    return login, token


@_public.post("/login")
async def log_in(request: Request, name: Field, password: Field, next: Field = "") -> Response:
    _same_site(request)
    prefix = prefix_of(request.scope)
    client = request.client.host if request.client else "unknown"
    login, token = await run(request, _checked, name.strip().lower(), password, client)
    if login.throttled:
        error = "Too many failed logins: wait a quarter of an hour, then try again."
        context = {"next": local(next, prefix), "error": error, "undone": False}
        return page(request, "login.html", context, status=429)
    if token is None:
        error = "That name and password do not match an operator."
        context = {"next": local(next, prefix), "error": error, "undone": False}
        return page(request, "login.html", context, status=401)
    cookies = await _console(request).cookies()
    response = _redirect(local(next, prefix))
    response.set_cookie(
        COOKIE,
        cookies.sign(token),
        max_age=int(auth.SESSION_LIFETIME.total_seconds()),
        path=prefix or "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@_private.post("/logout", dependencies=[Depends(_signed)])
async def log_out(request: Request) -> Response:
    await run(request, auth.close_session, request.state.token)
    prefix = prefix_of(request.scope)
    response = _redirect(f"{prefix}/login")
    response.delete_cookie(COOKIE, path=prefix or "/")
    return response


# --- finding and reading ---------------------------------------------------------------------


def _overview(conn: db.Connection, views: Views, when: alarms.Stamp) -> dict[str, Any]:
    report = health.health(conn, datetime.now(UTC), when=when)
    return {
        "health": report,
        "last_2xx": {g.provider: g.last_2xx for g in report.gateways},
        "counts": [
            Count(
                key="parked",
                number=actions.parked_count(conn),
                one="parked delivery",
                many="parked deliveries",
                address="/parked",
            ),
            *_settlement_counts(conn),
            *views.counts(conn),
        ],
    }


def _settlement_counts(conn: db.Connection) -> list[Count]:
    """The settlements' flags, on the home page when there are any: each a person must see."""
    unsettled = sum(c.count for c in flags.unsettled(conn))
    unmatched = sum(c.count for c in flags.unmatched(conn))
    unreadable = sum(c.count for c in flags.unreadable(conn))
    late = "capture not settled in time", "captures not settled in time"
    stray = "settlement line naming no known payment", "settlement lines naming no known payment"
    odd = "settlement line payhooks cannot read", "settlement lines payhooks cannot read"
    return [
        Count(key=key, number=number, one=one, many=many, address="/settlements")
        for key, number, (one, many) in (("unsettled", unsettled, late),
                                         ("unmatched", unmatched, stray),
                                         ("unreadable", unreadable, odd))
        if number
    ]  # fmt: skip


@_private.get("/")
async def home(request: Request) -> HTMLResponse:
    console = _console(request)
    return page(request, "home.html", await run(request, _overview, console.views, console.when))


@_private.get("/search")
async def find(request: Request, q: str = "") -> Response:
    views = _console(request).views
    if len(q) > MAX_FIELD_CHARS or len(q.strip()) > views.max_query_chars:
        message = (
            f"The search is too long: no identifier the console knows is longer than "
            f"{views.max_query_chars} characters."
        )
        return page(request, "error.html", {"message": message, "query": ""}, status=400)
    found = await run(request, views.find, q.strip()) if q.strip() else []
    results = [link for link in found if not link.more]
    more = [link for link in found if link.more]
    if len(results) == 1 and not more:  # the query rides along, so the search box keeps it
        return _redirect(prefix_of(request.scope) + with_query(results[0].address, q.strip()))
    return page(request, "results.html", {"query": q, "results": results, "more": more})


def with_query(address: str, q: str) -> str:
    """A page's address carrying the search that found it (``?q=``), for the search box."""
    return f"{address}?{urlencode({'q': q})}"


def _order(
    conn: db.Connection, provider: str, gateway_order_id: str, views: Views
) -> dict[str, Any] | None:
    story = timeline.story(conn, provider, gateway_order_id)
    if story is None:
        return None
    done = actions.done_to(conn, provider, [r.event_id for r in story.records])
    named = [*(p.payment_id for p in story.payments), *(r.payment_id for r in story.records),
             *story.payment_ids]  # fmt: skip
    paid = dict.fromkeys(payment_id for payment_id in named if payment_id)
    found = [r for payment_id in paid for r in refunds.of_payment(conn, provider, payment_id)]
    elsewhere = views.order_elsewhere(conn, provider, gateway_order_id, list(paid))
    return {"story": story, "done": done, "refunds": found, "elsewhere": elsewhere}


@_private.get("/orders/{provider}/{gateway_order_id:path}")
async def order(request: Request, provider: str, gateway_order_id: str) -> HTMLResponse:
    found = await run(request, _order, provider, gateway_order_id, _console(request).views)
    if found is None:
        message = "No such gateway order is recorded: no expectation, delivery or payment."
        return page(request, "error.html", {"message": message}, status=404)
    return page(request, "order.html", {**found, **notice_of(request)})


def _delivery(
    conn: db.Connection, provider: str, event_id: str, views: Views
) -> dict[str, Any] | str | None:
    """The delivery's page, None when none is recorded, or why its record does not read."""
    try:
        found = idempotency.stored(conn, event_id, provider)
    except UnreadableRecord as exc:
        return f"This delivery is recorded, but its stored record no longer reads: {exc}."
    if not found:
        return None
    record = found[0]
    tried = timeline.attempts(conn, provider, event_id)
    return {
        "record": record,
        "body": formats.readable_body(record.body),
        "exact": record.body.decode("utf-8", errors="replace"),
        "attempts": tried.lines,
        "story_address": views.story_address(conn, provider, tried.merchant_ref, tried.payment_id),
    }


@_private.get("/deliveries/{provider}/{event_id:path}")
async def delivery(request: Request, provider: str, event_id: str) -> HTMLResponse:
    found = await run(request, _delivery, provider, event_id, _console(request).views)
    if found is None:
        return page(request, "error.html", {"message": "No such delivery is recorded."}, status=404)
    if isinstance(found, str):
        return page(request, "error.html", {"message": found}, status=500)
    return page(request, "delivery.html", found)


@_private.get("/actions")
async def action_log(
    request: Request,
    operator: str = "",
    before: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
) -> HTMLResponse:
    """Who did what from the console, and when: the newest first, a page at a time."""
    name = operator.strip()[:64] or None
    rows = await run(request, actions.taken, operator=name, before=before, limit=actions.LOG_PAGE)
    more = rows[-1].id if len(rows) == actions.LOG_PAGE else None
    return page(request, "actions.html", {"rows": rows, "operator": name or "", "more": more})


# --- acting ----------------------------------------------------------------------------------


def _parked(conn: db.Connection, views: Views) -> dict[str, Any]:
    rows = actions.parked(conn, adapters=views.adapters)
    return {"rows": rows, "candidates": views.candidates(conn, rows)}


@_private.get("/parked")
async def parked(request: Request) -> HTMLResponse:
    found = await run(request, _parked, _console(request).views)
    return page(request, "parked.html", {**found, **notice_of(request)})


@_private.post("/parked/replay", dependencies=[Depends(csrf)])
async def replay(
    request: Request, session: Session, provider: Field, event_id: Field, back: Field = ""
) -> Response:
    result = await replay_one(request, session.operator, provider, event_id)
    return go_back(
        request, back or "/parked", result.done, about=(provider, event_id), why=result.why
    )


async def replay_one(
    request: Request, operator: str, provider: str, event_id: str
) -> actions.Result:
    """A parked delivery through the app's handler again, recorded with the operator: the
    Replay button's path, which a bulk replay takes for each of its deliveries."""
    views = _console(request).views
    if views.replay_async is not None:

        async def in_thread(work: Callable[..., object], *args: object) -> object:
            return await run(request, work, *args)

        return await actions.replay_parked_async(
            in_thread, views.replay_async, provider=provider, event_id=event_id, operator=operator
        )
    if views.replay is not None:
        return await run(
            request,
            actions.replay_parked,
            views.replay,
            provider=provider,
            event_id=event_id,
            operator=operator,
        )
    raise ValueError("a console's views need replay or replay_async")


@_private.post("/payments/refund/cancel", dependencies=[Depends(csrf)])
async def cancel_refund(
    request: Request,
    session: Session,
    provider: Field,
    idempotency_key: Field,
    reason: Field = "",
    confirm: Field = "",
    back: Field = "",
) -> Response:
    """Cancel a refund stuck unsent: the box ticked and a reason given, recorded with the
    operator."""
    if confirm != "yes":
        return go_back(request, back or "/", actions.Done.NOT_CONFIRMED)
    if not reason.strip():
        return go_back(request, back or "/", actions.Done.NO_REASON)
    result = await run(request, actions.cancel_refund, provider, idempotency_key,
                       reason=reason.strip(), operator=session.operator)  # fmt: skip
    return go_back(request, back or "/", result.done)


@_private.post("/parked/settle", dependencies=[Depends(csrf)])
async def settle(
    request: Request,
    session: Session,
    provider: Field,
    event_id: Field,
    note: Field,
    back: Field = "",
) -> Response:
    if not note.strip():
        message = "Say how it was settled (refunded in the gateway's dashboard, collected, ...)."
        return page(request, "error.html", {"message": message}, status=400)
    result = await run(
        request,
        actions.settle,
        provider=provider,
        event_id=event_id,
        note=note.strip(),
        operator=session.operator,
    )
    return go_back(
        request, back or "/parked", result.done, about=(provider, event_id), why=result.why
    )


async def queue(
    request: Request, template: str, rows: Callable[[db.Connection], Sequence[object]]
) -> HTMLResponse:
    """A queue an operator works through, with the notice of what was just done to it."""
    return page(request, template, {"rows": await run(request, rows), **notice_of(request)})


def go_back(
    request: Request,
    back: str,
    done: actions.Done,
    *,
    about: tuple[str, str] | None = None,
    why: str | None = None,
) -> RedirectResponse:
    """After an action, back to the console page it was taken on, saying how it went, why
    where its sentence says (``{why}`` in ``NOTICES``), and, for a delivery (``about``: its
    gateway and key), which. ``back`` is a console address as the browser sent it, or one below
    the root (``/parked``)."""
    prefix = prefix_of(request.scope)
    if back == prefix:
        back = prefix + "/"
    elif back.startswith("/") and not (prefix and back.startswith(prefix + "/")):
        back = prefix + back
    said = {"notice": done.value}
    if about is not None:
        said |= {"provider": about[0], "event_id": about[1]}
    if why is not None:
        said |= {"why": why}
    return _redirect(f"{local(back, prefix).split('?')[0]}?{signed(request, said)}")


SIGNATURE = "sig"
"""The query parameter holding a notice's signature."""


def signed(request: Request, said: Mapping[str, object]) -> str:
    """What an action came to, as the query string its redirect carries, signed for this
    session (an HMAC keyed with its CSRF token): a page shows it only when the signature
    matches (``verified``), so a link cannot fake a notice ("the delivery was applied")."""
    fields = {name: str(value) for name, value in said.items()}
    return urlencode({**fields, SIGNATURE: _signature(request, fields)})


def verified(request: Request, names: Sequence[str]) -> dict[str, str] | None:
    """The notice's fields among ``names`` this page's address carries, when ``signed`` for
    this very session; else None (no notice, a forged one, or another session's)."""
    session: auth.Session | None = getattr(request.state, "session", None)
    fields = {n: request.query_params[n] for n in names if n in request.query_params}
    if session is None or not fields:
        return None
    given = request.query_params.get(SIGNATURE, "").encode("utf-8", "replace")
    expected = _signature(request, fields).encode()
    return fields if hmac.compare_digest(given, expected) else None


def _signature(request: Request, fields: Mapping[str, str]) -> str:
    session: auth.Session | None = getattr(request.state, "session", None)
    key = ("" if session is None else session.csrf_token).encode()
    message = "\0".join(f"{name}={value}" for name, value in sorted(fields.items()))
    return hmac.new(
        key, b"notice\0" + message.encode("utf-8", "replace"), hashlib.sha256
    ).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class About:
    """The delivery a notice is about, linked to its page."""

    provider: str
    event_id: str

    @property
    def address(self) -> str:
        return f"/deliveries/{quote(self.provider, safe='')}/{quote(self.event_id, safe='')}"


def notice_of(request: Request) -> dict[str, str | About | None]:
    """What the action just taken came to (and why, where its sentence says), and the delivery
    it was taken on: a gateway this console knows and a key of a length it keeps, or nothing
    named. Only a notice ``signed`` for this session is shown: a link cannot make the page say
    an action was taken, nor why."""
    said = verified(request, ("notice", "provider", "event_id", "why")) or {}
    code = said.get("notice")
    known = {d.value: text for d, text in NOTICES.items()}
    text = known.get(code or "")
    if text:
        text = text.replace("{why}", said.get("why") or "its page says why")
    provider = said.get("provider", "")
    event_id = said.get("event_id", "")
    named = text and provider in actions.PROVIDERS and 0 < len(event_id) <= MAX_FIELD_CHARS
    about = About(provider=provider, event_id=event_id) if named else None
    return {"notice": text, "notice_about": about}
