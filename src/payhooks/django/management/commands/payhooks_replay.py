"""``manage.py payhooks_replay KEY [--provider P]``."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from payhooks.django import conf, replays
from payhooks.django.models import PROVIDERS, ProcessedWebhook
from payhooks.plumbing.errors import PayhooksError


class Command(BaseCommand):
    help = "Run a stored delivery again through the same claim (safe to repeat)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="The delivery key, as payhooks_parked shows it.")
        parser.add_argument(
            "--provider",
            choices=[value for value, _ in PROVIDERS],
            help="When two gateways share the key.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        config = conf.current()
        record = _one(config.database, options["key"], options["provider"])
        try:
            receipt = replays.replay(record, config)
        except PayhooksError as exc:
            raise CommandError(str(exc)) from exc
        except Exception as exc:  # a handler's bug: one line here, the rest with --traceback
            raise CommandError(f"the handler raised {type(exc).__name__}: {exc}") from exc
        answer = {
            "status": receipt.outcome.value,
            "event_id": receipt.event.event_id,
            "order_id": receipt.order_id,
        }
        self.stdout.write(json.dumps(answer))


def _one(alias: str, key: str, provider: str | None) -> ProcessedWebhook:
    held = ProcessedWebhook.objects.using(alias).filter(event_id=key)
    rows = list(held.filter(provider=provider) if provider else held)
    if not rows and provider:
        others = sorted(held.values_list("provider", flat=True))
        holding = f" ({' and '.join(others)} {'hold' if len(others) > 1 else 'holds'} that key)"
        raise CommandError(f"no {provider} delivery {key!r}{holding if others else ''}")
    if not rows:
        raise CommandError(f"no delivery {key!r}")
    if len(rows) > 1:
        held = " and ".join(sorted(r.provider for r in rows))
        raise CommandError(f"{held} both hold the key {key!r}: name one with --provider")
    record: ProcessedWebhook = rows[0]
    return record
