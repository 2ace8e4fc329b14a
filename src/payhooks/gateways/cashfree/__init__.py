"""Cashfree: the adapter (``adapter.py``), the status API's client (``status.py``, an extra),
and the settings that serve it (here)."""

from __future__ import annotations

from datetime import timedelta

from payhooks.events import Provider
from payhooks.gateways._gateway import Found, Gateway, Secret, StatusApi
from payhooks.gateways.cashfree.adapter import Cashfree


def _adapter(found: Found) -> Cashfree:
    return Cashfree(secrets=found[0])


CASHFREE = Gateway(
    provider=Provider.CASHFREE,
    title="Cashfree",
    secrets=(
        Secret(variable="PAYHOOKS_CASHFREE_CLIENT_SECRETS", django_key="CASHFREE_CLIENT_SECRETS"),
    ),
    build=_adapter,
    status_api=StatusApi(
        id_variable="PAYHOOKS_CASHFREE_CLIENT_ID",
        secret_variable="PAYHOOKS_CASHFREE_API_SECRET",
        url_variable="PAYHOOKS_CASHFREE_API_URL",
        url="https://api.cashfree.com",
        module="payhooks.gateways.cashfree.status",
    ),
    reference_prefix="ph",  # the merchant's own order_id
    # Its default retries end after about 42 minutes, so each 5xx may be a payment given up
    # on: the same day is watched.
    retry_window=timedelta(hours=24),
)

__all__ = ["CASHFREE"]
