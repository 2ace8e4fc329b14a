"""The console's pages: server-rendered, auto-escaped, no script (docs/console.md).

Every route but the login form sits behind a session; every POST carries the session's CSRF
token and, when the browser sends one, an Origin of this very site, then redirects (a reload
never repeats an action, and each action is idempotent anyway).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import jinja2
import psycopg_pool
from fastapi import APIRouter, Depends, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from payhooks import db, idempotency
from payhooks.errors import NotFound
from payhooks.events import Provider
from payhooks.providers import Adapter
from payhooks.service import database
from payhooks.service.console import actions, auth, health, search, stories

COOKIE = "payhooks_console"
PREFIX = "/console"
MAX_FIELD_CHARS = 1024

_templates = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.PackageLoader("payhooks.service.console", "templates"),
        autoescape=True,  # every page shows customer-typed and gateway-sent strings
        undefined=jinja2.StrictUndefined,
    )
)
_templates.env.filters["when"] = lambda at: (
    "—"
    if at is None
    else f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S}.{at.microsecond // 1000:03d} UTC"
)
_templates.env.filters["rupees"] = stories.rupees
_templates.env.globals["chart"] = health.chart
_templates.env.globals["chart_size"] = (health.CHART_WIDTH, health.CHART_HEIGHT)

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

NOTICES = {
    actions.Done.APPLIED: "Replayed: the delivery was applied.",
    actions.Done.STILL_PARKED: "Replayed: it still matches no checkout, so it stays parked.",
    actions.Done.ALREADY_APPLIED: "Nothing to do: this delivery was already applied.",
    actions.Done.NOT_FOUND: "Nothing to do: no such delivery is recorded.",
    actions.Done.NOT_CONFIGURED: "Cannot replay: this gateway has no secret configured here.",
    actions.Done.UNREADABLE: "Cannot replay: the stored delivery cannot be read any more.",
    actions.Done.QUEUED: "Queued again: the worker sends it on its next round.",
    actions.Done.ALREADY_QUEUED: "Nothing to do: this message was already queued again.",
}


class LoginNeeded(Exception):
    """No valid session: every console route answers with the login form's address."""


class Forbidden(Exception):
    """A POST without this session's CSRF token, or from another site."""


class Console:
    """What the pages need: the shop API's pool, the gateways (to replay), the cookie key."""

    def __init__(
        self, adapters: Mapping[Provider, Adapter], reconciliation_off: Sequence[Provider] = ()
    ) -> None:
        self.adapters = adapters
        self.reconciliation_off = [p.value for p in reconciliation_off]
        self._cookies: auth.Cookies | None = None
        self._lock = threading.Lock()

    def cookies(self, conn: db.Connection) -> auth.Cookies:
        with self._lock:
            if self._cookies is None:
                self._cookies = auth.Cookies.of(conn)
            return self._cookies


def install(
    app: FastAPI, adapters: Mapping[Provider, Adapter], reconciliation_off: Sequence[Provider] = ()
) -> None:
    app.state.console = Console(adapters, reconciliation_off)
    app.include_router(_public)
    app.include_router(_private)

    @app.exception_handler(LoginNeeded)
    async def login_needed(request: Request, exc: LoginNeeded) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return _redirect(f"{PREFIX}/login?next={quote(target)}")

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden) -> Response:
        return _page(request, "error.html", {"message": str(exc)}, status=403)


def _conn(request: Request) -> Iterator[db.Connection]:
    pool: psycopg_pool.ConnectionPool = request.app.state.api_pool
    with database.connection(pool) as conn:
        yield conn


Conn = Annotated[db.Connection, Depends(_conn)]


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _token(request: Request, conn: db.Connection) -> str | None:
    return _console(request).cookies(conn).token(request.cookies.get(COOKIE))


def _session(request: Request, conn: Conn) -> auth.Session:
    session = auth.session_of(conn, _token(request, conn))
    if session is None:
        raise LoginNeeded()
    request.state.session = session
    return session


Session = Annotated[auth.Session, Depends(_session)]


def _same_site(request: Request) -> None:
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        raise Forbidden("This form was sent from another site.")


async def _csrf(request: Request, session: Session) -> None:
    _same_site(request)
    form = await request.form()
    given = form.get("csrf")
    if not isinstance(given, str) or not auth.csrf_matches(session, given):
        raise Forbidden("This form has expired: go back, reload the page and try again.")


_public = APIRouter(prefix=PREFIX, include_in_schema=False)
_private = APIRouter(prefix=PREFIX, include_in_schema=False, dependencies=[Depends(_session)])
Field = Annotated[str, Form(max_length=MAX_FIELD_CHARS)]


def _page(
    request: Request, template: str, context: dict[str, Any], *, status: int = 200
) -> HTMLResponse:
    session = getattr(request.state, "session", None)
    response = _templates.TemplateResponse(
        request,
        template,
        {"session": session, "prefix": PREFIX, **context},
        status_code=status,
    )
    response.headers.update(_HEADERS)
    return response


def _redirect(url: str) -> RedirectResponse:
    response = RedirectResponse(url, status_code=303)
    response.headers.update(_HEADERS)
    return response


def _local(target: str | None) -> str:
    """Only a console address of this site: ``next`` must not send an operator elsewhere."""
    if not target or (target != PREFIX and not target.startswith(PREFIX + "/")):
        return PREFIX
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or "\\" in target or "//" in parts.path:
        return PREFIX
    return target


# --- logging in and out ----------------------------------------------------------------------


@_public.get("/login")
def login_form(request: Request, next: str | None = None) -> HTMLResponse:
    return _page(request, "login.html", {"next": _local(next), "error": None})


@_public.post("/login")
def log_in(
    request: Request, conn: Conn, name: Field, password: Field, next: Field = PREFIX
) -> Response:
    _same_site(request)
    client = request.client.host if request.client else "unknown"
    login = auth.log_in(conn, name.strip().lower(), password, client)
    if login.throttled:
        error = "Too many failed logins: wait a quarter of an hour, then try again."
        return _page(request, "login.html", {"next": _local(next), "error": error}, status=429)
    if login.operator is None:
        error = "That name and password do not match an operator."
        return _page(request, "login.html", {"next": _local(next), "error": error}, status=401)
    token, _ = auth.open_session(conn, login.operator)
    response = _redirect(_local(next))
    response.set_cookie(
        COOKIE,
        _console(request).cookies(conn).sign(token),
        max_age=int(auth.SESSION_LIFETIME.total_seconds()),
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@_private.post("/logout", dependencies=[Depends(_csrf)])
def log_out(request: Request, conn: Conn) -> Response:
    auth.close_session(conn, _token(request, conn))
    response = _redirect(f"{PREFIX}/login")
    response.delete_cookie(COOKIE, path=PREFIX)
    return response


# --- finding and reading ---------------------------------------------------------------------


@_private.get("")
@_private.get("/")
def home(request: Request, conn: Conn) -> HTMLResponse:
    now = datetime.now(UTC)
    return _page(
        request,
        "home.html",
        {
            "health": health.health(conn, now),
            "parked": len(actions.parked(conn, 1000)),
            "dead": len(actions.dead_letters(conn, 1000)),
            "gateways": [p.value for p in _console(request).adapters],
            "reconciliation_off": _console(request).reconciliation_off,
        },
    )


@_private.get("/search")
def find(
    request: Request, conn: Conn, q: Annotated[str, Query(max_length=MAX_FIELD_CHARS)] = ""
) -> Response:
    results = search.search(conn, q)
    if len(results) == 1:
        return _redirect(_address(results[0]))
    return _page(request, "results.html", {"query": q, "results": results, "address": _address})


def _address(result: search.Result) -> str:
    if result.cart_id:
        return f"{PREFIX}/carts/{quote(result.cart_id, safe='')}"
    if result.reference:
        return f"{PREFIX}/references/{result.provider}/{quote(result.reference, safe='')}"
    return f"{PREFIX}/deliveries/{result.provider}/{quote(result.event_id or '', safe='')}"


@_private.get("/carts/{cart_id}")
def cart(request: Request, conn: Conn, cart_id: str) -> HTMLResponse:
    try:
        story = stories.of_cart(conn, cart_id, _console(request).adapters)
    except NotFound as exc:
        return _page(request, "error.html", {"message": str(exc)}, status=404)
    return _story_page(request, story)


@_private.get("/references/{provider}/{reference:path}")
def reference(request: Request, conn: Conn, provider: str, reference: str) -> HTMLResponse:
    try:
        story = stories.of_reference(conn, provider, reference, _console(request).adapters)
    except NotFound as exc:
        return _page(request, "error.html", {"message": str(exc)}, status=404)
    return _story_page(request, story)


def _story_page(request: Request, story: stories.Story) -> HTMLResponse:
    return _page(request, "story.html", {"story": story, **_notice(request)})


@_private.get("/deliveries/{provider}/{event_id:path}")
def delivery(request: Request, conn: Conn, provider: str, event_id: str) -> HTMLResponse:
    found = idempotency.stored(conn, event_id, provider)
    if not found:
        return _page(
            request, "error.html", {"message": "No such delivery is recorded."}, status=404
        )
    record = found[0]
    return _page(
        request,
        "delivery.html",
        {"record": record, "body": record.body.decode("utf-8", errors="replace")},
    )


# --- acting ----------------------------------------------------------------------------------


@_private.get("/parked")
def parked(request: Request, conn: Conn) -> HTMLResponse:
    return _page(request, "parked.html", {"rows": actions.parked(conn), **_notice(request)})


@_private.post("/parked/replay", dependencies=[Depends(_csrf)])
def replay(
    request: Request,
    conn: Conn,
    session: Session,
    provider: Field,
    event_id: Field,
    back: Field = f"{PREFIX}/parked",
) -> Response:
    result = actions.replay_parked(
        conn,
        _console(request).adapters,
        provider=provider,
        event_id=event_id,
        operator=session.operator,
    )
    return _redirect(_with_notice(_local(back), result.done))


@_private.get("/dead")
def dead(request: Request, conn: Conn) -> HTMLResponse:
    return _page(request, "dead.html", {"rows": actions.dead_letters(conn), **_notice(request)})


@_private.post("/dead/retry", dependencies=[Depends(_csrf)])
def retry(
    request: Request,
    conn: Conn,
    session: Session,
    message_id: Annotated[int, Form(ge=1, le=2**63 - 1)],
    back: Field = f"{PREFIX}/dead",
) -> Response:
    result = actions.retry_dead_letter(conn, message_id, operator=session.operator)
    return _redirect(_with_notice(_local(back), result.done))


def _with_notice(target: str, done: actions.Done) -> str:
    return f"{target.split('?')[0]}?notice={done.value}"


def _notice(request: Request) -> dict[str, str | None]:
    code = request.query_params.get("notice")
    known = {d.value: text for d, text in NOTICES.items()}
    return {"notice": known.get(code or "")}
