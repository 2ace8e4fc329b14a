"""A webhook's exact bytes, read only up to the adapter's bound: an unauthenticated sender
chooses the size, and some gateways (PayU) must be parsed to be verified."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import Message, Receive

from payhooks.answers import declared_over
from payhooks.errors import PayloadTooLarge
from payhooks.providers import Adapter


async def read_body(request: Request, adapter: Adapter) -> bytes:
    return await read_bounded(request, adapter.max_body_bytes, adapter.provider.value)


async def read_bounded(request: Request, limit: int, source: str) -> bytes:
    """Refused on the declared length before a byte is read, else as soon as the streamed
    bytes pass the bound (also the reference service's, for webhooks and its API)."""
    if declared_over(request.headers.get("content-length", ""), limit):
        raise PayloadTooLarge(source, f"declared body exceeds {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(source, f"body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """The body already read, as one message; then the client's own messages (disconnect).
    For a layer that reads a bounded body before the app behind it does."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
