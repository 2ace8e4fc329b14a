"""Razorpay: the adapter (``adapter.py``), the status API's client (``status.py``, an extra),
and the settings that serve it (here)."""

from __future__ import annotations

from datetime import timedelta

from payhooks.events import Provider
from payhooks.gateways._common import MAX_JSON_BODY_BYTES
from payhooks.gateways._gateway import Gateway, from_secrets, secret, status_api
from payhooks.gateways._settlements import Settles
from payhooks.gateways.razorpay import settlements
from payhooks.gateways.razorpay.adapter import (
    DISPUTE_REASONS,
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    Razorpay,
    sign,
)

RAZORPAY = Gateway(
    provider=Provider.RAZORPAY,
    title="Razorpay",
    secrets=(secret(Provider.RAZORPAY, "WEBHOOK_SECRETS"),),
    build=from_secrets(Razorpay),
    status_api=status_api(
        Provider.RAZORPAY,
        id_name="KEY_ID",
        secret_name="KEY_SECRET",
        url="https://api.razorpay.com",
        adds=("/v1",),
    ),
    reference_prefix="order",  # the shape of the ids Razorpay's create-order call returns
    retry_window=timedelta(hours=24),  # then it disables the endpoint
    sends_refunds=True,  # under its idempotency key (docs/providers.md, "Refunds")
    captures_authorized=True,  # manual capture (docs/providers.md, "Captures")
    disputes_dashboard="https://dashboard.razorpay.com/",  # Transactions > Disputes
    dispute_reasons=DISPUTE_REASONS,
    settles=Settles(
        # "T+2 working days by default": four calendar days when a weekend falls between.
        cycle=timedelta(days=4),
        source="https://razorpay.com/docs/payments/payment-gateway/s2s-integration/settlements/how-to-integrate",
        webhook=settlements.webhook,
    ),
)

__all__ = [
    "EVENT_ID_HEADER",
    "MAX_JSON_BODY_BYTES",
    "RAZORPAY",
    "SIGNATURE_HEADER",
    "Razorpay",
    "sign",
]
