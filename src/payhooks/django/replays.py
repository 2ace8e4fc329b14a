"""Stored deliveries run again: the admin's action and ``manage.py payhooks_replay``.

A replay goes through the same claim as a live delivery (``deliveries.replay``): a parked
delivery whose checkout now exists is applied once, one that still matches nothing stays
parked, and one already applied is a duplicate. So replaying is always safe to repeat.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from payhooks.django import conf, deliveries
from payhooks.django.models import ProcessedWebhook
from payhooks.intake.answers import clipped
from payhooks.intake.ingest import Outcome, Receipt
from payhooks.operations import replays
from payhooks.plumbing.errors import PayhooksError

log = logging.getLogger("payhooks.django")


def replay(record: ProcessedWebhook, config: conf.Config | None = None) -> Receipt:
    """``record`` through the claim again, as it was received (``payhooks.operations.
    replays``, as every door replays)."""
    config = config or conf.current()
    return replays.replay(
        deliveries.raw_connection(config.database),
        config.served(),
        deliveries.applying(config),
        event_id=record.event_id,
        provider=record.provider,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """What replaying a set of parked deliveries did, by delivery key."""

    applied: tuple[str, ...] = ()
    """Applied now, or found already applied by a copy the gateway sent meanwhile."""
    waiting: tuple[str, ...] = ()
    """A callback that proves only who sent it (PhonePe's, Juspay's: one parked before payhooks
    had them confirmed): recorded ``confirming``, nothing applied until its gateway's status
    API confirms it."""
    ignored: tuple[str, ...] = ()
    """Answered ignored by the handler now: recorded so, no longer parked."""
    still_parked: tuple[str, ...] = ()
    """Still matching nothing the handler can apply it to."""
    wrong_amount: tuple[str, ...] = ()
    """Parked for its amount (``payhooks.expect``): still another amount than expected."""
    not_parked: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    """Each with its cause: a handler's exception class, or a payhooks error's words."""


def replay_parked(records: Iterable[ProcessedWebhook]) -> Report:
    """Each parked record in ``records`` replayed in a transaction of its own; the others are
    left alone. One record's failure (a handler's bug, the database busy) is reported with
    its key and does not stop the rest."""
    config = conf.current()
    found: dict[str, list[str]] = {name: [] for name in Report.__dataclass_fields__}
    for record in records:
        bucket, label = _replayed(record, config)
        found[bucket].append(label)
    return Report(**{name: tuple(keys) for name, keys in found.items()})


def _replayed(record: ProcessedWebhook, config: conf.Config) -> tuple[str, str]:
    """Which part of the report ``record`` goes to, and under what label."""
    if record.outcome != Outcome.PARKED:
        return "not_parked", record.event_id
    try:
        receipt = replay(record, config)
    except Exception as exc:  # reported to the operator; logged with its traceback
        log.exception("parked_replay_failed", extra={"event_id": record.event_id})
        return "failed", f"{record.event_id} ({_cause(exc)})"
    if receipt.outcome is Outcome.IGNORED:
        return "ignored", record.event_id
    if receipt.outcome is Outcome.CONFIRMING:
        return "waiting", record.event_id
    if receipt.outcome is not Outcome.PARKED:
        return "applied", record.event_id
    held = deliveries.raw_connection(config.database).execute(
        _HELD_FOR_AMOUNT, (record.provider, record.event_id)
    )
    return ("wrong_amount" if held.fetchone() else "still_parked"), record.event_id


_HELD_FOR_AMOUNT = """
SELECT 1 FROM payhooks_amount_mismatches
WHERE provider = %s AND event_id = %s AND resolved_at IS NULL
"""


def _cause(exc: Exception) -> str:
    if isinstance(exc, PayhooksError):
        return clipped(str(exc), 120)
    return type(exc).__name__
