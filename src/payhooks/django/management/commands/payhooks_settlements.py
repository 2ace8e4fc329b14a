"""``manage.py payhooks_settlements --from DAY --to DAY`` (or ``--catch-up``, or one of
``--unsettled``, ``--unmatched``, ``--unreadable``, alone): the gateways' settlement reports
fetched, recorded and reviewed; a list beside another or beside the days, or ``--catch-up``
beside either, is refused (exit 2) as ``payhooks settlements`` refuses it."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from payhooks.django import conf
from payhooks.django.deliveries import raw_connection
from payhooks.django.management.commands.payhooks_reconcile import credentialed, reconcile_extra
from payhooks.settlements import listing


class Command(BaseCommand):
    help = (
        "Fetch the gateways' settlement reports for the days --from to --to (India's, at most "
        "31): each payout and its payments, refunds and adjustments with fees and tax, recorded "
        "once and matched to your payments; then flag the captures not settled within their "
        "gateway's cycle; a line it cannot read is kept, and the rest recorded. --catch-up, "
        "instead of the days, fetches each gateway from the day after its last day read whole "
        "up to today: run it daily from cron or a timer. --unsettled, --unmatched or "
        "--unreadable (one, without --from and --to) prints what is flagged or kept, as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="start", help="The first day, YYYY-MM-DD.")
        parser.add_argument("--to", dest="end", help="The last day, included.")
        parser.add_argument(
            "--catch-up",
            dest="catch_up",
            action="store_true",
            help="Fetch each gateway from the day after its last day read whole up to today.",
        )
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
        if options["catch_up"]:
            try:
                listing.catch_up_alone(asked, options["start"], options["end"])
            except ValueError as exc:
                raise CommandError(str(exc), returncode=2) from None
            tallies = caught_up(credentialed(config))
            self.stdout.write("\n".join(tally.summary() for tally in tallies))
            trouble = "; ".join(tally.trouble() for tally in tallies if tally.failures)
            if trouble:
                raise CommandError(f"{trouble}; run it again later: it starts from the last day "
                                   "read whole")  # fmt: skip
            return
        try:
            named = listing.list_asked(asked, options["start"], options["end"])
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if named is not None:
            found = listing.flag_list(raw_connection(config.database), named)
            self.stdout.write(json.dumps(found, default=str))
            return
        tally = fetched(config, options["start"], options["end"])
        self.stdout.write(tally.summary())
        if tally.failures:
            raise CommandError(f"{tally.trouble()}; fetch those days again later")


def fetched(config: conf.Config, start: str | None, end: str | None) -> Any:
    """The fetch (``payhooks.django.reconciling.fetch_settlements``, over httpx: the
    ``reconcile`` extra): the days named first, then the gateways' API credentials."""
    with reconcile_extra("report"):
        from payhooks.django.reconciling import fetch_settlements
        from payhooks.reconcile.settling import days_named
    try:
        days = days_named(start, end)
        return fetch_settlements(credentialed(config), *days)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def caught_up(config: conf.Config) -> list[Any]:
    """The catch-up (``payhooks.reconcile.settling.catching_up``, the reference worker's) on
    Django's database, over httpx: the ``reconcile`` extra."""
    with reconcile_extra("report"):
        from payhooks.django.reconciling import connecting
        from payhooks.reconcile.settling import catch_up_once
    return catch_up_once(
        connecting(config), config.api,
        timeout_s=config.reconcile_timeout_ms / 1000,
        margin=timedelta(hours=config.settlement_margin_hours),
    )  # fmt: skip
