"""The webhook view: ``POST webhooks/<provider>`` with the gateway's exact bytes.

CSRF-exempt (a gateway has no token; the signature authenticates it) and excluded from
``ATOMIC_REQUESTS``: the delivery opens its own transaction and is answered after its commit.
Every outcome and every payhooks error is answered from the one table in ``payhooks.answers``;
anything else a handler raises is left to Django (500, logged, nothing recorded).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import BinaryIO

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from payhooks.answers import (
    Answer,
    answer,
    clipped,
    declared_over,
    error_answer,
    error_status,
    log_name,
)
from payhooks.django import conf, deliveries
from payhooks.errors import LengthRequired, PayhooksError, PayloadTooLarge
from payhooks.ingest import Receipt, header_map
from payhooks.providers import Adapter

log = logging.getLogger("payhooks.django")


@csrf_exempt
@require_POST
def receive(request: HttpRequest, provider: str) -> HttpResponse:
    try:
        receipt = _received(request, provider)
    except PayhooksError as exc:
        _log_refusal(provider, exc)
        return _response(error_answer(exc))
    event = receipt.event
    log.info(
        f"webhook_{receipt.outcome.value}",
        extra={"provider": provider, "event_id": event.event_id, "order_id": receipt.order_id},
    )
    return _response(answer(receipt))


receive = deliveries.non_atomic(receive)


def _received(request: HttpRequest, provider: str) -> Receipt:
    config = conf.current()
    adapter = config.adapter(provider)
    _refuse_declared_over(request, adapter)
    body = _body(request, adapter)
    headers = header_map(header_pairs(request.headers, adapter), adapter)
    return deliveries.receive(config, adapter, body, headers)


def _body(request: HttpRequest, adapter: Adapter) -> bytes:
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
        return read_bounded(request, adapter)
    if not meta.get("wsgi.input_terminated"):
        raise LengthRequired(
            adapter.provider,
            "no Content-Length, and the WSGI server does not end chunked input "
            "(wsgi.input_terminated)",
        )
    return read_bounded(meta["wsgi.input"], adapter)


_READ_BYTES = 64 * 1024


def read_bounded(stream: BinaryIO | HttpRequest, adapter: Adapter) -> bytes:
    """All of ``stream``, refused as soon as it passes the adapter's bound."""
    limit = adapter.max_body_bytes
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(min(_READ_BYTES, limit + 1 - size)):
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(adapter.provider, f"body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def header_pairs(headers: Mapping[str, str], adapter: Adapter) -> Iterator[tuple[str, str]]:
    """The request's headers as (name, value) pairs, repeats restored where it matters.

    Django keeps one value per name: the server (WSGI or ASGI) joined a repeated header's
    copies with commas. No header an adapter reads (signatures in hex or base64, timestamps,
    delivery keys) holds a comma, so one holding a comma came more than once: it is split back
    into its copies, and ``header_map`` refuses copies that differ (401)."""
    for name, value in headers.items():
        if "," in value and name.lower() in adapter.headers_read:
            yield from ((name, part.strip()) for part in value.split(","))
        else:
            yield name, value


def _refuse_declared_over(request: HttpRequest, adapter: Adapter) -> None:
    """A body declared over the gateway's bound is refused before a byte of it is read."""
    if declared_over(request.META.get("CONTENT_LENGTH") or "", adapter.max_body_bytes):
        raise PayloadTooLarge(
            adapter.provider, f"declared body over {adapter.max_body_bytes} bytes"
        )


def _response(given: Answer) -> JsonResponse:
    return JsonResponse(given.body, status=given.status)


def _log_refusal(provider: str, exc: PayhooksError) -> None:
    status, code = error_status(exc)
    name = log_name(status)
    detail = clipped(str(exc))
    extra = {"provider": clipped(provider, conf.MAX_PROVIDER_CHARS), "status": status}
    log.warning(name, extra={**extra, "reason": code, "detail": detail})
