"""Reconciliation: ask the gateways about checkouts whose webhook never came, and apply what
they report through the webhook path (docs/design.md, "Reconciliation")."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import psycopg_pool

from payhooks.service.config import Settings
from payhooks.service.reconcile.clients import clients, http_client
from payhooks.service.reconcile.reconciler import Options, Reconciler, Tally


def reconciler(
    pool: psycopg_pool.ConnectionPool,
    settings: Settings,
    http: httpx.Client,
    *,
    limit: int = 100,
    after_s: int | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> Reconciler:
    """A reconciler for every gateway with API credentials in ``settings``."""
    options = Options(
        after_s=settings.reconcile_after_s if after_s is None else after_s,
        window_s=settings.reconcile_window_s,
        limit=limit,
    )
    return Reconciler(pool, clients(settings.reconciled(), http), options, stop=stop)


__all__ = ["Options", "Reconciler", "Tally", "http_client", "reconciler"]
