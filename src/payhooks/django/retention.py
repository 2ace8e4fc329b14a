"""The core's purge (``payhooks.operations.retention``) on Django's database: delivery records,
payment claims and expectations past the window, in batches, each its own short transaction; parked
records, and what their replay will need, kept; one purge at a time, whichever process."""

from __future__ import annotations

from payhooks.django.deliveries import raw_connection
from payhooks.operations import retention as core
from payhooks.operations.retention import BATCH_ROWS

Purge = core.Purge


def plan(alias: str, days: int) -> Purge:
    """What a purge would delete now, deleting nothing (``--dry-run``)."""
    return core.plan(raw_connection(alias), days)


def purge(
    alias: str, days: int, *, batch_rows: int = BATCH_ROWS, force: bool = False
) -> Purge | None:
    """Delete records older than ``days`` (the cutoff fixed at the start), batch by batch;
    None while another purge runs."""
    return core.purge(raw_connection(alias), days, force=force, batch_rows=batch_rows)
