"""How long delivery records are kept, and the statements that delete them, shared by every
host of the core's table (the reference service, the Django app). Parked records are kept
until applied: they are unfinished money business."""

from __future__ import annotations

from payhooks.errors import RetentionTooShort

# Razorpay retries for 24 hours and replays events up to 15 days old (its FAQ); a record
# purged before that could let a replay act twice on anything not business-keyed.
MIN_RETENTION_DAYS = 15
DEFAULT_RETENTION_DAYS = 90
BATCH_ROWS = 5000

CUTOFF = "SELECT now() - make_interval(days => %s)"
EXPIRED = """
SELECT count(*) FROM processed_webhooks WHERE processed_at < %s AND outcome <> 'parked'
"""
# Each batch is a short transaction of its own, on the real key (provider, event_id).
DELETE_BATCH = """
DELETE FROM processed_webhooks
WHERE (provider, event_id) IN (
    SELECT provider, event_id FROM processed_webhooks
    WHERE processed_at < %s AND outcome <> 'parked'
    ORDER BY processed_at
    LIMIT %s
    FOR UPDATE SKIP LOCKED)
"""


def check_window(days: int, *, force: bool) -> None:
    """A window shorter than the gateways' replays is refused unless forced."""
    if days < MIN_RETENTION_DAYS and not force:
        raise RetentionTooShort(days, MIN_RETENTION_DAYS)
