"""``manage.py payhooks_parked [--json]``."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from payhooks.django import conf
from payhooks.django.deliveries import raw_connection
from payhooks.operations.parked import Parked, waiting


class Command(BaseCommand):
    help = "List deliveries that matched no checkout and wait to be applied, oldest first."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of lines.")

    def handle(self, *args: Any, **options: Any) -> None:
        listed = [_listed(row) for row in waiting(raw_connection(conf.current().database))]
        if options["json"]:
            self.stdout.write(json.dumps(listed, indent=2))
            return
        for row in listed:
            self.stdout.write(
                "  ".join(
                    str(row[k])
                    for k in ("received_at", "provider", "event_id", "event_type", "merchant_ref")
                )
            )
        self.stdout.write(f"{len(listed)} parked")


def _listed(row: Parked) -> dict[str, Any]:
    """Every field of ``row``, in its order, ready for JSON (the time as ISO 8601)."""
    return {**asdict(row), "received_at": row.received_at.isoformat()}
