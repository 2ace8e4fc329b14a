"""``manage.py payhooks_confirm [--every S] [--once]``: the callbacks PhonePe and Juspay sent
(and PayU's unsigned ones) confirmed at their status APIs, a pass every few seconds until
stopped, beside the project's web processes; with ``--once``, a pass that met API errors or a
failing handler exits 1, as ``payhooks confirm --once``."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import psycopg
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections
from django.db.utils import InterfaceError, OperationalError

from payhooks.django import conf
from payhooks.django.management.commands.payhooks_reconcile import (
    UNASKED,
    credentialed,
    named_waiting,
    passes,
)
from payhooks.events import Provider
from payhooks.plumbing.errors import DatabaseUnavailable

log = logging.getLogger("payhooks.django")
_AWAY = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError,
         DatabaseUnavailable)  # fmt: skip


class Command(BaseCommand):
    help = (
        "Confirm the callbacks that only a static credential proves (PhonePe, Juspay, PayU's "
        "refund callbacks) at the gateways' status APIs, every few seconds until stopped: what "
        "the APIs report reaches your handler once; a forged callback is refuted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--every", type=float, default=2.0, help="Seconds between passes (at least 0.2)."
        )
        parser.add_argument("--once", action="store_true", help="One pass, then exit.")

    def handle(self, *args: Any, **options: Any) -> None:
        every = options["every"]
        if every < 0.2:
            raise CommandError("--every is at least 0.2 seconds")
        config = credentialed(conf.current(), "nothing can be confirmed")
        one_pass = passes()
        told: dict[Provider, int] = {}
        stopping = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stopping.set())
        while True:
            try:
                tally = one_pass(config, confirm_only=True, erring=options["once"])
                waiting = named_waiting(self, config, told)  # at start, as the count changes
            except _AWAY as exc:  # the database away: logged, and the next pass tries again
                if options["once"]:
                    raise
                said = {"command": "payhooks_confirm", "error": str(exc)[:200]}
                log.warning("daemon_pass_failed", extra=said)
                connections.close_all()  # a dropped connection is opened afresh next pass
                if stopping.wait(every):
                    return
                continue
            if tally.said_anything or options["once"]:
                self.stdout.write(tally.confirmations())
            told = waiting
            if options["once"] and tally.failures:
                raise CommandError(f"{tally.trouble()}; those callbacks are asked again later")
            if options["once"] and told:
                raise CommandError(UNASKED)
            if options["once"] or stopping.wait(every):
                return
