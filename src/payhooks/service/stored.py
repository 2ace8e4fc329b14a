"""A stored delivery read again, whichever way it came: a gateway's webhook (its adapter) or a
payment reconciliation found through the gateway's status API (its own reader). For replays
(`payhooks replay`, the console, the worker's parked retry) and the console's timelines."""

from __future__ import annotations

from collections.abc import Mapping

from payhooks.errors import ProviderNotConfigured
from payhooks.events import Provider, Received
from payhooks.gateways import GATEWAYS
from payhooks.gateways._reports import is_reconciled
from payhooks.gateways._status import restored as reconciled
from payhooks.ingest import restored
from payhooks.providers import Adapter

_GATEWAYS_BY_NAME = {provider.value: provider for provider in GATEWAYS}


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
    known = _GATEWAYS_BY_NAME.get(provider)
    if known is None:
        raise ProviderNotConfigured(provider)
    if is_reconciled(event_id):
        return reconciled(known, event_id, body)
    adapter = adapters.get(known)
    if adapter is None:
        raise ProviderNotConfigured(provider)
    return restored(adapter, event_id=event_id, body=body, headers=headers)
