"""Stored deliveries run again: the admin's action and ``manage.py payhooks_replay``.

A replay goes through the same claim as a live delivery (``deliveries.replay``): a parked
delivery whose checkout now exists is applied once, one that still matches nothing stays
parked, and one already applied is a duplicate. So replaying is always safe to repeat.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from payhooks.answers import clipped
from payhooks.django import conf, deliveries
from payhooks.django.models import ProcessedWebhook
from payhooks.errors import PayhooksError
from payhooks.ingest import Outcome, Receipt

log = logging.getLogger("payhooks.django")


def replay(record: ProcessedWebhook, config: conf.Config | None = None) -> Receipt:
    """``record`` through the claim again, as it was received."""
    return deliveries.replay(
        config or conf.current(),
        provider=record.provider,
        event_id=record.event_id,
        body=bytes(record.body),
        headers=record.headers,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """What replaying a set of parked deliveries did, by delivery key."""

    applied: list[str] = field(default_factory=list)
    still_parked: list[str] = field(default_factory=list)
    not_parked: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def replay_parked(records: Iterable[ProcessedWebhook]) -> Report:
    """Each parked record in ``records`` replayed in a transaction of its own; the others are
    left alone. One record's failure (a handler's bug, the database busy) is reported with
    its key and does not stop the rest."""
    config, report = conf.current(), Report()
    for record in records:
        if record.outcome != Outcome.PARKED:
            report.not_parked.append(record.event_id)
            continue
        try:
            receipt = replay(record, config)
        except Exception as exc:  # reported to the operator; logged with its traceback
            log.exception("parked_replay_failed", extra={"event_id": record.event_id})
            report.failed.append(f"{record.event_id} ({_cause(exc)})")
            continue
        parked = receipt.outcome is Outcome.PARKED
        (report.still_parked if parked else report.applied).append(record.event_id)
    return report


def _cause(exc: Exception) -> str:
    if isinstance(exc, PayhooksError):
        return clipped(str(exc), 120)
    return type(exc).__name__
