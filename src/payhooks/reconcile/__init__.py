"""Reconciliation: ask the gateways' status APIs about the checkouts a merchant expects
(``payhooks.expect``) whose payment never came, and apply what they report through the
merchant's own handler, under keys no webhook can take, exactly once with any webhook
(docs/design.md, "Reconciliation"). Needs the ``reconcile`` extra (httpx)."""

from __future__ import annotations

from payhooks.reconcile.passes import Logged, Notifier, Options, Reconciler, Tally
from payhooks.reconcile.running import credentials, reconcile_once, run

__all__ = [
    "Logged",
    "Notifier",
    "Options",
    "Reconciler",
    "Tally",
    "credentials",
    "reconcile_once",
    "run",
]
