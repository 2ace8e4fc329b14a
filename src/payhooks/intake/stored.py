"""A stored delivery read again, whichever way it came: a gateway's webhook (its adapter) or a
payment reconciliation found through the gateway's status API (its own reader). For replays
(`payhooks replay`, the consoles, the Django admin, the worker's parked retry) and timelines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from payhooks.events import Provider, Received
from payhooks.gateways import GATEWAYS, Adapter
from payhooks.gateways._reports import reread
from payhooks.intake import idempotency
from payhooks.intake.expectations import is_reconciled
from payhooks.intake.ingest import restored
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import NotFound, ProviderNotConfigured

_GATEWAYS_BY_NAME = {provider.value: provider for provider in GATEWAYS}


class Stored(Protocol):
    """A delivery as it was kept: ``idempotency.Stored``, a parked row, a console record."""

    @property
    def provider(self) -> str:
        """The gateway's name."""

    @property
    def event_id(self) -> str:
        """The delivery key."""

    @property
    def body(self) -> bytes:
        """The body exactly as received."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The headers the gateway's adapter keeps."""


def received_again(
    adapters: Mapping[Provider, Adapter],
    *,
    provider: str,
    event_id: str,
    body: bytes,
    headers: Mapping[str, str],
) -> Received:
    """Raises ``ProviderNotConfigured`` for a webhook of a gateway served no more (a payment
    reconciliation needs no secret: its gateway's reader reads it), and ``MalformedPayload``
    for a record that no longer reads."""
    known = _GATEWAYS_BY_NAME.get(provider)
    if known is None:
        raise ProviderNotConfigured(provider)
    if is_reconciled(event_id):
        return reread(known, event_id, body)
    adapter = adapters.get(known)
    if adapter is None:
        raise ProviderNotConfigured(provider)
    return restored(adapter, event_id=event_id, body=body, headers=headers)


def read_stored(adapters: Mapping[Provider, Adapter], stored: Stored) -> Received:
    """The stored delivery as an event under the key it was stored with."""
    return received_again(
        adapters,
        provider=stored.provider,
        event_id=stored.event_id,
        body=stored.body,
        headers=stored.headers,
    )


def received_stored(
    conn: Connection,
    adapters: Mapping[Provider, Adapter],
    event_id: str,
    provider: str | None = None,
) -> Received:
    """The one stored delivery under ``event_id``, read again. Raises ``NotFound`` when no
    delivery has the key, or several do and no gateway is named."""
    found = idempotency.stored(conn, event_id, provider)
    if len(found) != 1:
        raise NotFound(
            "delivery" if not found else "unambiguous delivery (use --provider)", event_id
        )
    return read_stored(adapters, found[0])
