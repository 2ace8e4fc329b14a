"""Reconciliation's status clients: one for each gateway with API credentials, found through
``payhooks.gateways.GATEWAYS`` (each gateway's ``status.py``; the bounded call they share is
``payhooks.gateways._status``)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from payhooks.events import Provider
from payhooks.gateways import ApiCredentials
from payhooks.gateways._status import MAX_ANSWER_BYTES, StatusClient, client, http_client


def clients(
    credentials: Mapping[Provider, ApiCredentials], http: httpx.Client
) -> dict[Provider, StatusClient]:
    return {provider: client(found, http) for provider, found in credentials.items()}


__all__ = ["MAX_ANSWER_BYTES", "StatusClient", "client", "clients", "http_client"]
