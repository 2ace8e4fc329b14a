"""Juspay (Express Checkout, HyperCheckout; HDFC SmartGateway is Juspay under HDFC's hosts):
the adapter (``adapter.py``), the Order Status API's client (``status.py``, an extra), and the
settings that serve it (here). HDFC SmartGateway merchants point ``PAYHOOKS_JUSPAY_API_URL`` at
their SmartGateway host (``https://smartgateway.hdfc.bank.in``); the webhooks are the same."""

from __future__ import annotations

from datetime import timedelta

from payhooks.events import Provider
from payhooks.gateways._gateway import Gateway, from_credentials, secret, status_api
from payhooks.gateways.juspay.adapter import Juspay, authorization

JUSPAY = Gateway(
    provider=Provider.JUSPAY,
    title="Juspay",
    # Each "username:password", as entered in Juspay's dashboard (Settings, Webhooks).
    secrets=(secret(Provider.JUSPAY, "WEBHOOK_CREDENTIALS"),),
    build=from_credentials(Juspay),
    status_api=status_api(
        Provider.JUSPAY,
        id_name="MERCHANT_ID",
        secret_name="API_KEY",
        url="https://api.juspay.in",
        adds=("/orders",),
    ),
    # The merchant's own order_id: "alphanumeric, less than 21 characters" (Juspay's order
    # create API); "ph_" and 16 hex digits is 19.
    reference_prefix="ph",
    # Undocumented for Express Checkout ("re-sent until a 200", no schedule); the one schedule
    # Juspay publishes (UPI In-App) ends 24 hours after the first attempt.
    retry_window=timedelta(hours=24),
    confirmed_by_api=True,  # a static credential signs nothing the callback says
)

__all__ = ["JUSPAY", "Juspay", "authorization"]
