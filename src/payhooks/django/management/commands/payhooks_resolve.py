"""``manage.py payhooks_resolve KEY --provider P --note TEXT``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from payhooks.django import conf
from payhooks.django.deliveries import raw_connection
from payhooks.django.models import PROVIDERS
from payhooks.intake.expectations import NotAMismatch, resolve


class Command(BaseCommand):
    help = (
        "Settle a parked delivery outside payhooks (a payment parked for its amount, refunded "
        "in the gateway's dashboard; a refund or dispute of a payment never taken): recorded "
        "ignored, keeping your note; or a callback waiting for its gateway's API that the API "
        "will never settle: recorded refuted, nothing applied, keeping your note."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="The delivery's key (parked, or waiting).")
        parser.add_argument("--provider", required=True, choices=[v for v, _ in PROVIDERS])
        parser.add_argument("--note", required=True, help="How it was settled.")

    def handle(self, *args: Any, **options: Any) -> None:
        conn = raw_connection(conf.current().database)
        try:
            resolve(conn, options["provider"], options["key"], options["note"])
        except (NotAMismatch, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"resolved {options['provider']} {options['key']}: {options['note']}")
