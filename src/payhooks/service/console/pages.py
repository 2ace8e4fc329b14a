"""The console's pages: server-rendered, auto-escaped, no script (docs/console.md).

Every route but the login form sits behind a session; every POST carries the session's CSRF
token and, when the browser sends one, an Origin of this very site, then redirects (a reload
never repeats an action, and each action is idempotent anyway).

The console has threads and connections of its own (``CONNECTIONS`` of each), apart from the
shop API's and the webhooks'. Its routes run on the event loop and hand only their database
work to those threads; a request without a validly signed session cookie is sent to the login
form by ``Gate`` on the loop, before its body is read, with neither.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote, unquote, urlsplit

import anyio
import anyio.to_thread
import jinja2
import psycopg
import psycopg_pool
from fastapi import APIRouter, Depends, FastAPI, Form, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from payhooks import db, idempotency
from payhooks.errors import DatabaseUnavailable, NotFound, PayloadTooLarge
from payhooks.events import Provider
from payhooks.providers import Adapter
from payhooks.service import database
from payhooks.service.console import actions, auth, health, search, stories
from payhooks.starlette import read_bounded, replaying

COOKIE = "payhooks_console"
PREFIX = "/console"
LOGIN = f"{PREFIX}/login"
MAX_FIELD_CHARS = 1024
MAX_FORM_BYTES = 16 * 1024  # the largest form holds three fields of MAX_FIELD_CHARS
CONNECTIONS = 2  # the console's own database connections, and threads to use them

T = TypeVar("T")
P = ParamSpec("P")

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


class Unreadable(Exception):
    """A value the console cannot take: a control character (NUL the database refuses),
    or anything else the database refuses to compare."""


# C0 and C1 controls and lone surrogates: no identifier, name or password holds one.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_HAS_CONTROL = "A field or the address holds a control character, which no console value has."
_CANNOT_LOOK_UP = "A field or the address holds a value the database cannot look up."


class Console:
    """What the pages need: the gateways (to replay), the cookie key, the console's threads."""

    def __init__(
        self, adapters: Mapping[Provider, Adapter], reconciliation_off: Sequence[Provider] = ()
    ) -> None:
        self.adapters = adapters
        self.reconciliation_off = [p.value for p in reconciliation_off]
        self._cookies: auth.Cookies | None = None
        self._threads: anyio.CapacityLimiter | None = None
        self._reading_key: anyio.Lock | None = None

    async def run(
        self,
        pool: psycopg_pool.ConnectionPool,
        work: Callable[Concatenate[db.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``work(conn, ...)`` in one of the console's threads, on one of its connections."""

        def pooled() -> T:
            with database.connection(pool) as conn:
                try:
                    return work(conn, *args, **kwargs)
                except psycopg.DataError as exc:  # a value the database cannot compare
                    raise Unreadable(_CANNOT_LOOK_UP) from exc

        if self._threads is None:  # made on the loop that uses it
            self._threads = anyio.CapacityLimiter(CONNECTIONS)
        return await anyio.to_thread.run_sync(pooled, limiter=self._threads)

    async def cookies(self, pool: psycopg_pool.ConnectionPool) -> auth.Cookies:
        """The cookie key, read from the database once per process."""
        if self._cookies is None:
            self._reading_key = self._reading_key or anyio.Lock()
            async with self._reading_key:
                if self._cookies is None:
                    self._cookies = await self.run(pool, auth.Cookies.of)
        return self._cookies


def install(
    app: FastAPI, adapters: Mapping[Provider, Adapter], reconciliation_off: Sequence[Provider] = ()
) -> None:
    """The console's routes, and its gate in front of them. ``app.state.console_pool`` (at most
    ``CONNECTIONS`` connections) is opened by the app's lifespan."""
    app.state.console = Console(adapters, reconciliation_off)
    app.include_router(_public)
    app.include_router(_private)
    app.add_middleware(Gate)

    @app.exception_handler(LoginNeeded)
    async def login_needed(request: Request, exc: LoginNeeded) -> Response:
        return _to_login(request)

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden) -> Response:
        return _page(request, "error.html", {"message": str(exc)}, status=403)

    @app.exception_handler(HTTPException)
    async def no_such_page(request: Request, exc: HTTPException) -> Response:
        """An unknown console address or method is a console page; the API's stay JSON."""
        path = request.url.path
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            return await http_exception_handler(request, exc)
        message = _NO_SUCH.get(exc.status_code, "This request cannot be answered.")
        response = _page(request, "error.html", {"message": message}, status=exc.status_code)
        response.headers.update(exc.headers or {})
        return response


_NO_SUCH = {
    404: "There is no such console page.",
    405: "This console page cannot be used that way (the wrong method).",
}


def _to_login(request: Request) -> Response:
    raw = request.scope.get("raw_path")  # as sent: a cart id may hold an encoded slash
    target = raw.decode("latin-1") if isinstance(raw, bytes) else request.url.path
    target += f"?{request.url.query}" if request.url.query else ""
    return _redirect(f"{LOGIN}?next={quote(target)}")


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _pool(request: Request) -> psycopg_pool.ConnectionPool:
    pool: psycopg_pool.ConnectionPool = request.app.state.console_pool
    return pool


async def _db(
    request: Request,
    work: Callable[Concatenate[db.Connection, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    return await _console(request).run(_pool(request), work, *args, **kwargs)


async def signed_token(request: Request) -> str | None:
    """The session token the request's cookie carries, when its signature holds: checked on
    the event loop, with no thread and no connection (but the key's one read per process)."""
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    cookies = await _console(request).cookies(_pool(request))
    return cookies.token(cookie)


class Gate:
    """Console requests, in front of routing and before their body is read: without a
    session cookie whose signature holds (the login form excepted) they are sent to the login
    form, and a form is read only up to ``MAX_FORM_BYTES``. So a stranger's request, whatever
    it carries, takes no thread and no database connection."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "") if scope["type"] == "http" else ""
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            if path != LOGIN and await signed_token(request) is None:
                await _to_login(request)(scope, receive, send)
                return
            if scope["method"] != "POST":
                await self.app(scope, receive, send)
                return
            body = await read_bounded(request, MAX_FORM_BYTES, "console")
        except DatabaseUnavailable:
            await _unavailable(request)(scope, receive, send)
            return
        except PayloadTooLarge:
            await _too_large(request)(scope, receive, send)
            return
        except ClientDisconnect:
            return
        await self.app(scope, replaying(body, receive), send)


def _unavailable(request: Request) -> HTMLResponse:
    message = "The database is not answering: try again in a moment."
    return _page(request, "error.html", {"message": message}, status=503)


def _too_large(request: Request) -> HTMLResponse:
    message = f"This form is larger than any console form ({MAX_FORM_BYTES} bytes at most)."
    response = _page(request, "error.html", {"message": message}, status=413)
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
    "back": "The page to go back to",
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
    """A console route: a request it cannot take is answered with a console page saying which
    field and why, never FastAPI's JSON (which echoes the input); the database away, too."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                if await _holds_control(request):
                    raise Unreadable(_HAS_CONTROL)
                return await handler(request)
            except RequestValidationError as exc:
                return _page(request, "error.html", {"message": _unreadable(exc)}, status=400)
            except Unreadable as exc:
                return _page(request, "error.html", {"message": str(exc)}, status=400)
            except DatabaseUnavailable:
                return _unavailable(request)

        return page


async def _holds_control(request: Request) -> bool:
    """Whether an address value, a query value or a form field holds a control character:
    refused before any of it reaches a page's work or the database (which refuses NUL). The
    page to go to next is not: it only ever goes through ``_local``, which drops such an
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
    session = None if token is None else await _db(request, auth.session_of, token)
    if session is None:
        raise LoginNeeded()
    request.state.session, request.state.token = session, token
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


_public = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=Page)
_private = APIRouter(
    prefix=PREFIX, include_in_schema=False, route_class=Page, dependencies=[Depends(_session)]
)
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
    """Only a console address of this site: ``next`` must not send an operator elsewhere.

    Dot segments are resolved as a browser resolves them (``%2e`` is a dot to it) before the
    prefix is checked, and the resolved address is the one followed. A backslash (a slash to
    a browser), a control character (dropped by it), a doubled slash, or a dot segment hidden
    under more encoding (``%252e``, ``..%2f``), is not an address the console makes: refused."""
    if not target:
        return PREFIX
    parts = urlsplit(target)
    seen = target + _fully_unquoted(parts.path)
    if (
        parts.scheme
        or parts.netloc
        or not parts.path.startswith("/")
        or "//" in parts.path
        or any(c == "\\" or c < " " or c == "\x7f" for c in seen)
    ):
        return PREFIX
    path = _without_dot_segments(parts.path)
    if path != PREFIX and not path.startswith(PREFIX + "/"):
        return PREFIX
    if {".", ".."} & set(_fully_unquoted(path).split("/")):
        return PREFIX
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
async def login_form(request: Request, next: str | None = None) -> HTMLResponse:
    return _page(request, "login.html", {"next": _local(next), "error": None})


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
async def log_in(request: Request, name: Field, password: Field, next: Field = PREFIX) -> Response:
    _same_site(request)
    client = request.client.host if request.client else "unknown"
    login, token = await _db(request, _checked, name.strip().lower(), password, client)
    if login.throttled:
        error = "Too many failed logins: wait a quarter of an hour, then try again."
        return _page(request, "login.html", {"next": _local(next), "error": error}, status=429)
    if token is None:
        error = "That name and password do not match an operator."
        return _page(request, "login.html", {"next": _local(next), "error": error}, status=401)
    cookies = await _console(request).cookies(_pool(request))
    response = _redirect(_local(next))
    response.set_cookie(
        COOKIE,
        cookies.sign(token),
        max_age=int(auth.SESSION_LIFETIME.total_seconds()),
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@_private.post("/logout", dependencies=[Depends(_csrf)])
async def log_out(request: Request) -> Response:
    await _db(request, auth.close_session, request.state.token)
    response = _redirect(f"{PREFIX}/login")
    response.delete_cookie(COOKIE, path=PREFIX)
    return response


# --- finding and reading ---------------------------------------------------------------------


def _overview(conn: db.Connection) -> dict[str, Any]:
    return {
        "health": health.health(conn, datetime.now(UTC)),
        "parked": len(actions.parked(conn, 1000)),
        "dead": len(actions.dead_letters(conn, 1000)),
    }


@_private.get("")
@_private.get("/")
async def home(request: Request) -> HTMLResponse:
    return _page(
        request,
        "home.html",
        {
            **await _db(request, _overview),
            "gateways": [p.value for p in _console(request).adapters],
            "reconciliation_off": _console(request).reconciliation_off,
        },
    )


@_private.get("/search")
async def find(request: Request, q: str = "") -> Response:
    if len(q) > MAX_FIELD_CHARS or len(q.strip()) > search.MAX_QUERY_CHARS:
        message = (
            f"The search is too long: no identifier the console knows is longer than "
            f"{search.MAX_QUERY_CHARS} characters (an email address)."
        )
        return _page(request, "error.html", {"message": message}, status=400)
    results = await _db(request, search.search, q)
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
async def cart(request: Request, cart_id: str) -> HTMLResponse:
    try:
        story = await _db(request, stories.of_cart, cart_id, _console(request).adapters)
    except NotFound as exc:
        return _page(request, "error.html", {"message": str(exc)}, status=404)
    return _story_page(request, story)


@_private.get("/references/{provider}/{reference:path}")
async def reference(request: Request, provider: str, reference: str) -> HTMLResponse:
    adapters = _console(request).adapters
    try:
        story = await _db(request, stories.of_reference, provider, reference, adapters)
    except NotFound as exc:
        return _page(request, "error.html", {"message": str(exc)}, status=404)
    return _story_page(request, story)


def _story_page(request: Request, story: stories.Story) -> HTMLResponse:
    return _page(request, "story.html", {"story": story, **_notice(request)})


@_private.get("/deliveries/{provider}/{event_id:path}")
async def delivery(request: Request, provider: str, event_id: str) -> HTMLResponse:
    found = await _db(request, idempotency.stored, event_id, provider)
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
async def parked(request: Request) -> HTMLResponse:
    return await _queue(request, "parked.html", actions.parked)


@_private.post("/parked/replay", dependencies=[Depends(_csrf)])
async def replay(
    request: Request,
    session: Session,
    provider: Field,
    event_id: Field,
    back: Field = f"{PREFIX}/parked",
) -> Response:
    result = await _db(
        request,
        actions.replay_parked,
        _console(request).adapters,
        provider=provider,
        event_id=event_id,
        operator=session.operator,
    )
    return _back(back, result.done)


@_private.get("/dead")
async def dead(request: Request) -> HTMLResponse:
    return await _queue(request, "dead.html", actions.dead_letters)


@_private.post("/dead/retry", dependencies=[Depends(_csrf)])
async def retry(
    request: Request,
    session: Session,
    message_id: Annotated[int, Form(ge=1, le=2**63 - 1)],
    back: Field = f"{PREFIX}/dead",
) -> Response:
    result = await _db(request, actions.retry_dead_letter, message_id, operator=session.operator)
    return _back(back, result.done)


async def _queue(
    request: Request, template: str, rows: Callable[[db.Connection], Sequence[object]]
) -> HTMLResponse:
    """A queue an operator works through, with the notice of what was just done to it."""
    return _page(request, template, {"rows": await _db(request, rows), **_notice(request)})


def _back(back: str, done: actions.Done) -> RedirectResponse:
    """After an action, back to the console page it was taken on, saying how it went."""
    return _redirect(f"{_local(back).split('?')[0]}?notice={done.value}")


def _notice(request: Request) -> dict[str, str | None]:
    code = request.query_params.get("notice")
    known = {d.value: text for d, text in NOTICES.items()}
    return {"notice": known.get(code or "")}
