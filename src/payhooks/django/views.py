"""The webhook view: ``POST webhooks/<provider>`` with the gateway's exact bytes.

CSRF-exempt (a gateway has no token; the signature authenticates it) and excluded from
``ATOMIC_REQUESTS``: the delivery opens its own transaction and is answered after its commit.
The view maps Django's request to the shared step (``payhooks.intake.endpoint``): every outcome and
every payhooks error is answered from the one table in ``payhooks.intake.answers``; anything else a
handler raises is left to Django (500, logged, nothing recorded). A ``PAYHOOKS`` setting refused
as the view reads it (a server that ran no ``manage.py check``) is answered 503 for every
gateway, named in the log, never a traceback.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from functools import partial
from typing import Any, BinaryIO

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from payhooks.django import conf, deliveries
from payhooks.gateways import Adapter
from payhooks.intake.answers import declared_over
from payhooks.intake.endpoint import Endpoint, Reply, unfolded
from payhooks.operations.deliverylog import DeliveryLog, OwnConnection
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import (
    LengthRequired,
    PayhooksError,
    PayloadTooLarge,
    SettingsRefused,
)

log = logging.getLogger("payhooks.django")


@csrf_exempt
@require_POST
def receive(request: HttpRequest, provider: str) -> HttpResponse:
    """The webhook view: the body read within the gateway's bound, then verified, claimed
    and answered by the shared step, on Django's own connection."""
    try:
        config = conf.current()
    except ImproperlyConfigured as exc:
        return _response(Endpoint({}, log).refused(provider, SettingsRefused(str(exc))))
    endpoint = Endpoint(config.adapters, log, delivery_log(config.database).note)
    try:
        body = _bounded_body(request, endpoint.bound(provider), provider)
    except PayhooksError as exc:
        return _response(endpoint.unread(provider, exc))
    pairs = header_pairs(request.headers, endpoint.adapter(provider))
    return _response(endpoint.deliver(provider, body, pairs, partial(deliveries.receive, config)))


receive = deliveries.non_atomic(receive)

_LOGS: dict[tuple[str, str], DeliveryLog] = {}
_LOGS_LOCK = threading.Lock()


def delivery_log(alias: str) -> DeliveryLog:
    """The log of the requests to the view, in ``payhooks_deliveries`` of the database
    ``alias`` names now: one per alias and database in the process, on a connection of its
    own made from Django's parameters for it, never one a request holds nor one of Django's
    pool (a connection taken from the pool and closed would never go back to it). The
    parameters are read here, on the request's thread, so a line is written where the request
    was answered, even once the settings point elsewhere (a test database torn down)."""
    wrapper = connections[alias]
    params = wrapper.get_connection_params()
    key = (alias, repr(sorted((name, repr(value)) for name, value in params.items())))
    with _LOGS_LOCK:
        found = _LOGS.get(key)
        if found is None:
            connect = partial(_new_connection, wrapper.Database, params)
            found = _LOGS[key] = DeliveryLog(OwnConnection(connect))
        return found


def _new_connection(database: Any, params: dict[str, Any]) -> Connection:
    conn = database.connect(**params)
    if not isinstance(conn, psycopg.Connection):
        raise TypeError(f"payhooks needs a psycopg connection, not {type(conn).__name__}")
    conn.autocommit = True
    return conn


def _bounded_body(request: HttpRequest, limit: int, gateway: str) -> bytes:
    """A body declared over the gateway's bound is refused before a byte of it is read."""
    if declared_over(request.META.get("CONTENT_LENGTH") or "", limit):
        raise PayloadTooLarge(gateway, f"declared body over {limit} bytes")
    return _body(request, limit, gateway)


def _body(request: HttpRequest, limit: int, gateway: str) -> bytes:
    """The exact bytes sent, also when no ``Content-Length`` declared them (chunked).

    Under WSGI, Django reads ``request.body`` only up to ``CONTENT_LENGTH``: a chunked body
    would arrive empty and be refused as forged. A server that ends the input itself (it sets
    ``wsgi.input_terminated``: gunicorn, Werkzeug) is read up to the gateway's bound; under
    one that does not, the end cannot be found safely, so the delivery is refused 411 rather
    than verified against nothing. Under ASGI, Django has spooled the body before the view
    (to disk past ``FILE_UPLOAD_MAX_MEMORY_SIZE``): the request is read as a stream, up to
    the gateway's bound, never whole into memory, and never met by Django's own
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` refusal (an HTML 400)."""
    meta = request.META
    if meta.get("CONTENT_LENGTH"):
        body: bytes = request.body
        return body
    if "wsgi.input" not in meta:
        return read_bounded(request, limit, gateway)
    if not meta.get("wsgi.input_terminated"):
        raise LengthRequired(
            gateway,
            "no Content-Length, and the WSGI server does not end chunked input "
            "(wsgi.input_terminated)",
        )
    return read_bounded(meta["wsgi.input"], limit, gateway)


_READ_BYTES = 64 * 1024


def read_bounded(stream: BinaryIO | HttpRequest, limit: int, gateway: str) -> bytes:
    """All of ``stream``, refused as soon as it passes the gateway's bound."""
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(min(_READ_BYTES, limit + 1 - size)):
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(gateway, f"body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def header_pairs(headers: Mapping[str, str], adapter: Adapter) -> list[tuple[str, str]]:
    """The request's headers as (name, value) pairs, repeats restored where it matters: Django
    keeps one value per name, the server (WSGI or ASGI) joined a repeated header's copies with
    commas (``payhooks.intake.endpoint.unfolded``)."""
    return unfolded(headers.items(), adapter)


def _response(reply: Reply) -> JsonResponse:
    return JsonResponse(reply.body, status=reply.status)
