"""One reconciliation or confirmation pass on Django's database, through the project's
handler: what ``manage.py payhooks_reconcile`` and ``payhooks_confirm`` run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from payhooks.django.conf import Config
from payhooks.django.deliveries import guarded, raw_connection, settle
from payhooks.events import Received
from payhooks.intake.ingest import Receipt, ingest_received_in_transaction
from payhooks.plumbing.db import Connection
from payhooks.reconcile.passes import Followup, Tally
from payhooks.reconcile.running import followed, reconcile_once


def one_pass(
    config: Config, *, confirm_only: bool = False, after_s: int | None = None, limit: int = 100
) -> Tally:
    """Ask each gateway with API credentials in ``PAYHOOKS`` about the due checkouts, then
    about the callbacks waiting for its word (with ``confirm_only``, about those alone)."""
    handler = guarded(config.handler_function())

    @contextlib.contextmanager
    def connect() -> Iterator[Connection]:
        yield raw_connection(config.database)

    def deliver(received: Received, *, then: Followup) -> Receipt:
        applied = followed(handler, then)
        return settle(config, lambda conn: ingest_received_in_transaction(conn, received, applied))

    return reconcile_once(
        connect,
        deliver,
        config.api,
        confirm_only=confirm_only,
        after_s=config.reconcile_after_s if after_s is None else after_s,
        window_s=config.reconcile_window_s,
        limit=limit,
        timeout_s=config.reconcile_timeout_ms / 1000,
    )


__all__ = ["one_pass"]
