"""Reconciliation: ask the gateways about checkouts whose webhook never came, and apply what
they report through the webhook path (docs/design.md, "Reconciliation"). A reconciler wired
to the shop is built by ``payhooks.service.application.reconciler``."""

from __future__ import annotations

from payhooks.service.reconcile.clients import http_client
from payhooks.service.reconcile.reconciler import Deliver, Followup, Options, Reconciler, Tally

__all__ = ["Deliver", "Followup", "Options", "Reconciler", "Tally", "http_client"]
