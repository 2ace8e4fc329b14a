"""``manage.py payhooks_purge [--older-than-days N] [--dry-run] [--force]``."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from payhooks.django import conf, retention
from payhooks.operations import retention as policy
from payhooks.plumbing.errors import RetentionTooShort


class Command(BaseCommand):
    help = "Delete delivery records past the retention window (parked ones are kept), in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than-days",
            type=int,
            default=None,
            metavar="N",
            help=f"Window to keep; default {policy.WINDOW_SETTING} "
            f"({policy.DEFAULT_RETENTION_DAYS}).",
        )
        parser.add_argument("--dry-run", action="store_true", help="Count, delete nothing.")
        parser.add_argument(
            "--force",
            action="store_true",
            help=f"Allow a window under {policy.MIN_RETENTION_DAYS} days.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["older_than_days"]
        if days is None:  # the deployment's window, as the payhooks command reads it
            try:
                days = policy.window_setting(os.environ)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        if days < 0:
            raise CommandError("--older-than-days must be 0 or more")
        try:
            # a count deletes nothing: any window may be counted
            policy.check_window(days, force=options["force"] or options["dry_run"])
        except (RetentionTooShort, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        alias = conf.current().database
        if options["dry_run"]:
            planned = retention.plan(alias, days)
            before = planned.cutoff.isoformat(timespec="seconds")
            self.stdout.write(f"{planned.counted(dry_run=True)} from before {before}")
            return
        done = retention.purge(alias, days, force=options["force"])
        if done is None:
            raise CommandError("another purge is running; try later")
        before = done.cutoff.isoformat(timespec="seconds")
        self.stdout.write(f"{done.counted(dry_run=False)} from before {before}{done.kept_said()}")
        if done.refused:
            raise CommandError(done.refusals())
