"""A stored delivery read again, whichever way it came: a gateway's webhook (its adapter) or a
payment reconciliation found through the gateway's status API (its own reader). For replays
(`payhooks replay`, the console, the worker's parked retry) and the console's timelines."""

from __future__ import annotations

from collections.abc import Mapping

from payhooks.errors import ProviderNotConfigured
from payhooks.events import Provider, Received
from payhooks.ingest import restored
from payhooks.providers import Adapter
from payhooks.service.reconcile import payments as reconciled


def received_again(
    adapters: Mapping[Provider, Adapter],
    *,
    provider: str,
    event_id: str,
    body: bytes,
    headers: Mapping[str, str],
) -> Received:
    """Raises ``ProviderNotConfigured`` for a webhook of a gateway served no more, and
    ``MalformedPayload`` for a record that no longer reads."""
    known = {p.value: p for p in Provider}.get(provider)
    if known is None:
        raise ProviderNotConfigured(provider)
    if reconciled.is_reconciled(event_id):
        return reconciled.restored(known, event_id, body)
    adapter = adapters.get(known)
    if adapter is None:
        raise ProviderNotConfigured(provider)
    return restored(adapter, event_id=event_id, body=body, headers=headers)
