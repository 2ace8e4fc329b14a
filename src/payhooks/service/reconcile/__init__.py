"""Reconciliation in the reference service: the core's pass (``payhooks.reconcile``) over the
shop's expected checkouts, its alerts sent as emails (``alerts``). A reconciler wired to the
shop is built by ``payhooks.service.application.reconciler``."""

from __future__ import annotations

from payhooks.reconcile.passes import Deliver, Followup, Options, Reconciler, Tally
from payhooks.service.reconcile.clients import http_client

__all__ = ["Deliver", "Followup", "Options", "Reconciler", "Tally", "http_client"]
