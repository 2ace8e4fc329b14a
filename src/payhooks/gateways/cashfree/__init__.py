"""Cashfree: the adapter (``adapter.py``), the status API's client (``status.py``, an extra),
and the settings that serve it (here)."""

from __future__ import annotations

from datetime import timedelta

from payhooks.events import Provider
from payhooks.gateways._common import MAX_JSON_BODY_BYTES
from payhooks.gateways._gateway import Gateway, from_secrets, secret, status_api
from payhooks.gateways._settlements import Settles
from payhooks.gateways.cashfree import settlements
from payhooks.gateways.cashfree.adapter import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    VERSION_HEADER,
    Cashfree,
    sign,
)

CASHFREE = Gateway(
    provider=Provider.CASHFREE,
    title="Cashfree",
    secrets=(secret(Provider.CASHFREE, "CLIENT_SECRETS"),),
    build=from_secrets(Cashfree),
    status_api=status_api(
        Provider.CASHFREE,
        id_name="CLIENT_ID",
        secret_name="API_SECRET",
        url="https://api.cashfree.com",
        adds=("/pg",),
    ),
    reference_prefix="ph",  # the merchant's own order_id
    # Its default retries end after about 42 minutes, so each 5xx may be a payment given up
    # on: the same day is watched.
    retry_window=timedelta(hours=24),
    sends_refunds=True,  # under its idempotency key (docs/providers.md, "Refunds")
    refund_needs_order=True,  # its refund API is /orders/{order_id}/refunds
    disputes_dashboard="https://merchant.cashfree.com/auth/login",  # its Merchant Dashboard
    settles=Settles(
        # "T+2 bank working days for a payment done on day T": four calendar days when a
        # weekend falls between.
        cycle=timedelta(days=4),
        source="https://www.cashfree.com/docs/payments/manage/settlements",
        webhook=settlements.webhook,
    ),
)

__all__ = [
    "CASHFREE",
    "IDEMPOTENCY_HEADER",
    "MAX_JSON_BODY_BYTES",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "VERSION_HEADER",
    "Cashfree",
    "sign",
]
