"""Reconciliation: ask the gateways about checkouts whose webhook never came, and apply what
they report through the webhook path (docs/design.md, "Reconciliation")."""

from __future__ import annotations

from payhooks.service.reconcile.reconciler import Options, Reconciler, Tally

__all__ = ["Options", "Reconciler", "Tally"]
