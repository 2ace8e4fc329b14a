"""``manage.py payhooks_reconcile [--older-than-s N] [--limit N]``: one reconciliation pass."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from payhooks.db import Connection
from payhooks.django import conf
from payhooks.django.deliveries import guarded, raw_connection, settle
from payhooks.events import Received
from payhooks.gateways import GATEWAYS
from payhooks.ingest import Receipt, ingest_received_in_transaction
from payhooks.reconcile.passes import Followup
from payhooks.reconcile.running import followed, reconcile_once


class Command(BaseCommand):
    help = (
        "Ask the gateways' status APIs about the checkouts you expect (payhooks.expect) whose "
        "payment never came, and apply what they report through your handlers, once: run it "
        "from cron or a timer every few minutes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than-s",
            type=int,
            help='Ask about checkouts older than this; default PAYHOOKS["RECONCILE_AFTER_S"].',
        )
        parser.add_argument("--limit", type=int, default=100, help="Checkouts per gateway.")

    def handle(self, *args: Any, **options: Any) -> None:
        config = conf.current()
        if not config.api:
            raise CommandError(
                f"PAYHOOKS names no gateway's API credentials ({_keys()}): reconciliation is off"
            )
        handler = guarded(config.handler_function())

        @contextlib.contextmanager
        def connect() -> Iterator[Connection]:
            yield raw_connection(config.database)

        def deliver(received: Received, *, then: Followup) -> Receipt:
            applied = followed(handler, then)
            return settle(
                config, lambda conn: ingest_received_in_transaction(conn, received, applied)
            )

        after = options["older_than_s"]
        tally = reconcile_once(
            connect,
            deliver,
            config.api,
            after_s=config.reconcile_after_s if after is None else after,
            window_s=config.reconcile_window_s,
            limit=options["limit"],
            timeout_s=config.reconcile_timeout_ms / 1000,
        )
        self.stdout.write(tally.summary())
        if tally.failures:
            raise CommandError(
                f"{sum(tally.api_errors.values())} gateway API error(s), "
                f"{sum(tally.unapplied.values())} payment(s) the handler failed on; those "
                "checkouts are asked again later"
            )


def _keys() -> str:
    return ", ".join(
        " and ".join(
            name.removeprefix("PAYHOOKS_") for name in (api.id_variable, api.secret_variable)
        )
        for api in (found.status_api for found in GATEWAYS.values())
    )
