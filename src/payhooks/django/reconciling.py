"""One reconciliation or confirmation pass on Django's database, through the project's
handler, and a fetch of the gateways' settlement reports: what ``manage.py
payhooks_reconcile``, ``payhooks_confirm`` and ``payhooks_settlements`` run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import date, timedelta

from payhooks.django.conf import Config
from payhooks.django.deliveries import guarded, raw_connection, settle
from payhooks.events import Provider, Received
from payhooks.intake.ingest import Receipt, ingest_received_in_transaction
from payhooks.plumbing.db import Connection
from payhooks.reconcile import settling
from payhooks.reconcile.parts import Connect
from payhooks.reconcile.passes import Followup, Tally
from payhooks.reconcile.running import followed, reconcile_once


def one_pass(
    config: Config,
    *,
    confirm_only: bool = False,
    erring: bool = False,
    after_s: int | None = None,
    limit: int = 100,
) -> Tally:
    """Ask each gateway with API credentials in ``PAYHOOKS`` about the due checkouts, then
    about the callbacks waiting for its word (with ``confirm_only``, about those alone)."""
    handler = guarded(config.handler_function(), config.database)
    connect = connecting(config)

    def deliver(received: Received, *, then: Followup) -> Receipt:
        applied = followed(handler, then)
        return settle(config, lambda conn: ingest_received_in_transaction(conn, received, applied))

    return reconcile_once(
        connect,
        deliver,
        config.api,
        confirm_only=confirm_only,
        erring=erring,
        after_s=config.reconcile_after_s if after_s is None else after_s,
        window_s=config.reconcile_window_s,
        limit=limit,
        timeout_s=config.reconcile_timeout_ms / 1000,
    )


def unasked(config: Config) -> dict[Provider, int]:
    """The callbacks waiting for the word of a gateway whose API credentials ``PAYHOOKS``
    does not name, by gateway: no pass asks about them."""
    from payhooks.intake import confirmations

    if not confirmations.unaskable(config.api):
        return {}  # no connection for nothing to count
    with connecting(config)() as conn:
        return confirmations.unasked(conn, config.api)


def fetch_settlements(config: Config, start: date, end: date) -> settling.Tally:
    """The gateways' settlement reports for India's days ``start`` to ``end``, with the API
    credentials in ``PAYHOOKS``, recorded and reviewed on Django's database."""
    return settling.fetch_once(
        connecting(config), config.api, start, end,
        timeout_s=config.reconcile_timeout_ms / 1000,
        margin=timedelta(hours=config.settlement_margin_hours),
    )  # fmt: skip


def connecting(config: Config) -> Connect:
    """Django's connection to the database ``PAYHOOKS`` names, as a pass takes one."""

    @contextlib.contextmanager
    def connect() -> Iterator[Connection]:
        yield raw_connection(config.database)

    return connect


__all__ = ["connecting", "fetch_settlements", "one_pass"]
