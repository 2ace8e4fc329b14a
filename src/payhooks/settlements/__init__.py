"""Settlements: each payout a gateway made to the merchant's bank, the payments, refunds and
adjustments it covered with their fees and tax, matched to the payments payhooks applied
(``records``); the captures not settled within their gateway's cycle and the lines naming no
payment payhooks knows (``flags``); how far each gateway's report was read whole
(``reads``); and what people read of them (``listing``). Fetching a
gateway's report is reconciliation's (``payhooks.reconcile.settling``: its clients need
httpx); a settlement webhook is recorded by the claim (``payhooks.intake.ingest``). Core: SQL
and values, no driver but psycopg (docs/design.md, "Settlements")."""

from __future__ import annotations

from payhooks.gateways._settlements import (
    Line,
    LineKind,
    Page,
    Settlement,
    SettlementState,
)
from payhooks.settlements.records import Recorded, record, recording

__all__ = [
    "Line",
    "LineKind",
    "Page",
    "Recorded",
    "Settlement",
    "SettlementState",
    "record",
    "recording",
]
