"""The key space of the deliveries payhooks writes itself (``reconcile:…``): reconciliation's
reads of a gateway's reports, the confirmations' and the refund sender's. It sits this low
because every room names it: ingest and stored deliveries (intake), the sender (refunding),
the gateways' reports and the timeline (operations). ``payhooks.intake.expectations`` still
exports both names."""

from __future__ import annotations

RECONCILED = "reconcile"
"""What the key of every delivery reconciliation makes starts with (``reconcile:``): a prefix
no gateway's delivery key can take."""


def is_reconciled(event_id: str) -> bool:
    """Whether ``event_id`` is one payhooks wrote itself (``reconcile:…``)."""
    return event_id.startswith(RECONCILED + ":")
