"""The console assembled: the pages of ``pages`` and the lists of ``listings`` (both built on
``pages``' helpers) as one ASGI app, with the gate in front and the error pages behind."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from payhooks.console import listings
from payhooks.console.pages import (
    _NO_SUCH,
    Console,
    Forbidden,
    Gate,
    LoginNeeded,
    Pool,
    Views,
    _private,
    _public,
    _to_login,
    page,
)


def make(views: Views, pool: Pool) -> FastAPI:
    """The console as an app of its own, to mount under any prefix. ``pool`` gives the
    console's connection pool (at most ``CONNECTIONS`` connections) when it is first needed."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.console = Console(views, pool)
    app.include_router(_public)
    app.include_router(_private)
    app.include_router(listings.router)
    if views.router is not None:
        app.include_router(views.router)
    app.add_middleware(Gate)

    @app.exception_handler(LoginNeeded)
    async def login_needed(request: Request, exc: LoginNeeded) -> Response:
        return _to_login(request)

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden) -> Response:
        return page(request, "error.html", {"message": str(exc)}, status=403)

    @app.exception_handler(HTTPException)
    async def no_such_page(request: Request, exc: HTTPException) -> Response:
        message = _NO_SUCH.get(exc.status_code, "This request cannot be answered.")
        response = page(request, "error.html", {"message": message}, status=exc.status_code)
        response.headers.update(exc.headers or {})
        return response

    return app


__all__ = ["make"]
