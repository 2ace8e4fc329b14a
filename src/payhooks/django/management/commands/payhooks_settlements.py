"""``manage.py payhooks_settlements --from DAY --to DAY`` (or one of ``--unsettled``,
``--unmatched``, ``--unreadable``, alone): the gateways' settlement reports fetched, recorded
and reviewed; a list beside another or beside the days is refused (exit 2) as ``payhooks
settlements`` refuses it."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from payhooks.django import conf
from payhooks.django.deliveries import raw_connection
from payhooks.django.management.commands.payhooks_reconcile import credentialed
from payhooks.settlements import listing


class Command(BaseCommand):
    help = (
        "Fetch the gateways' settlement reports for the days --from to --to (India's, at most "
        "31): each payout and its payments, refunds and adjustments with fees and tax, recorded "
        "once and matched to your payments; then flag the captures not settled within their "
        "gateway's cycle; a line it cannot read is kept, and the rest recorded. Run it daily from "
        "cron or a timer. --unsettled, --unmatched or --unreadable (one, without --from and "
        "--to) prints what is flagged or kept, as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="start", help="The first day, YYYY-MM-DD.")
        parser.add_argument("--to", dest="end", help="The last day, included.")
        parser.add_argument("--unsettled", action="store_true", help="Print the flagged captures.")
        parser.add_argument(
            "--unmatched", action="store_true", help="Print the lines naming no known payment."
        )
        parser.add_argument(
            "--unreadable", action="store_true", help="Print the report lines it could not read."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        config = conf.current()
        asked = {name: options[name] for name in listing.LISTS}
        try:
            named = listing.list_asked(asked, options["start"], options["end"])
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if named is not None:
            found = listing.flag_list(raw_connection(config.database), named)
            self.stdout.write(json.dumps(found, default=str))
            return
        tally = fetched(credentialed(config), options["start"], options["end"])
        self.stdout.write(tally.summary())
        if tally.failures:
            raise CommandError(f"{tally.trouble()}; fetch those days again later")


def fetched(config: conf.Config, start: str | None, end: str | None) -> Any:
    """The fetch (``payhooks.django.reconciling.fetch_settlements``, over httpx: the
    ``reconcile`` extra)."""
    try:
        from payhooks.django.reconciling import fetch_settlements
        from payhooks.reconcile.settling import days_named
    except ImportError as exc:
        raise CommandError(
            f"the report clients need httpx ({exc}): pip install 'payhooks[django,reconcile]'"
        ) from None
    try:
        return fetch_settlements(config, *days_named(start, end))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
