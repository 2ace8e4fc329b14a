"""A stored delivery run again through the same claim, applied by whoever applies the live
ones: ``payhooks replay`` (the shop's state machine, or an app's ``--hooks``), Django's
``payhooks_replay`` and admin action, and the consoles' replay button all call ``replay``."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from payhooks.events import Provider, Received
from payhooks.gateways import Adapter
from payhooks.intake.ingest import Receipt
from payhooks.intake.stored import received_stored
from payhooks.plumbing.db import Connection

Apply = Callable[[Connection, Received], Receipt]
"""The delivery claimed and applied, as a live one is (``payhooks.applying.through``)."""


def replay(
    conn: Connection,
    adapters: Mapping[Provider, Adapter],
    apply: Apply,
    *,
    event_id: str,
    provider: str | None = None,
) -> Receipt:
    """The one stored delivery under ``event_id`` (of ``provider``, when two gateways share
    it), read again with ``adapters`` and applied on ``conn``. Safe to repeat: one applied
    already is a duplicate. Raises ``NotFound`` when no delivery has the key, or several do
    and no gateway is named; ``ProviderNotConfigured`` for a gateway served no more."""
    return apply(conn, received_stored(conn, adapters, event_id, provider))


__all__ = ["Apply", "replay"]
