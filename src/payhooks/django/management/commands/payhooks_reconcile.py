"""``manage.py payhooks_reconcile [--older-than-s N] [--limit N]``: one reconciliation pass."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from payhooks.django import conf
from payhooks.events import Provider
from payhooks.gateways import GATEWAYS

if TYPE_CHECKING:
    from payhooks.reconcile.passes import Tally


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
        # Refused before anything runs, as ``payhooks reconcile`` refuses them: a cron line's
        # typo would otherwise make every pass a no-op that succeeds.
        if options["limit"] < 1:
            raise CommandError("--limit is at least 1")
        if options["older_than_s"] is not None and options["older_than_s"] < 0:
            raise CommandError("--older-than-s is 0 or more")
        config = credentialed(conf.current(), "reconciliation is off")
        tally = passes()(
            config, erring=True, after_s=options["older_than_s"], limit=options["limit"]
        )
        self.stdout.write(tally.summary())
        waiting = named_waiting(self, config)  # the pass confirms callbacks too: not theirs
        if tally.failures:
            raise CommandError(f"{tally.trouble()}; each is asked again later")
        if waiting:
            raise CommandError(UNASKED)


UNASKED = "callbacks wait for gateways whose API credentials are not set"


def named_waiting(
    command: BaseCommand, config: conf.Config, told: dict[Provider, int] | None = None
) -> dict[Provider, int]:
    """The callbacks waiting for a gateway whose API credentials ``PAYHOOKS`` does not name,
    each such gateway named on ``command``'s standard error with the settings to give (unless
    ``told`` so already, the counts unchanged)."""
    from payhooks.django.reconciling import unasked

    waiting = unasked(config)
    for provider, count in waiting.items() if waiting != told else ():
        command.stderr.write(
            GATEWAYS[provider].waiting_for_credentials(
                count, "callback(s) waiting, never confirmed", conf.setting_name
            )
        )
    return waiting


def passes() -> Callable[..., Tally]:
    """``payhooks.django.reconciling.one_pass``: it asks the gateways over httpx, which the
    ``reconcile`` extra brings (``pip install 'payhooks[django,reconcile]'``)."""
    with reconcile_extra("status API"):
        from payhooks.django.reconciling import one_pass
    return one_pass


@contextmanager
def reconcile_extra(clients: str) -> Iterator[None]:
    """Around the imports of the gateways' ``clients``, which need httpx: one missing stops
    the command, saying to install the ``reconcile`` extra."""
    try:
        yield
    except ImportError as exc:
        raise CommandError(
            f"the {clients} clients need httpx ({exc}): pip install 'payhooks[django,reconcile]'"
        ) from None


def credentialed(config: conf.Config, consequence: str | None = None) -> conf.Config:
    """``config``, when it names a gateway's API credentials; else the command stops, saying
    which settings to give and what their absence means (``consequence``)."""
    if not config.api:
        said = f": {consequence}" if consequence else ""
        raise CommandError(f"PAYHOOKS names no gateway's API credentials ({keys()}){said}")
    return config


def keys() -> str:
    return ", ".join(
        " and ".join(
            name.removeprefix("PAYHOOKS_") for name in (api.id_variable, api.secret_variable)
        )
        for api in (found.status_api for found in GATEWAYS.values())
    )
