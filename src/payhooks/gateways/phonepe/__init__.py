"""PhonePe (PG v2): the adapter (``adapter.py``), the status API's client (``status.py``, an
extra), and the settings that serve it (here).

The webhook setting holds each webhook's ``username:password`` as set in PhonePe's dashboard
(several while one is rotated out). The status API's id is the OAuth ``client_id``, written
``client_id:client_version`` when PhonePe's credentials email gives a version other than 1
(``client_id`` alone is version 1, the sandbox's); its secret is the ``client_secret``."""

from __future__ import annotations

from datetime import timedelta

from payhooks.events import Provider
from payhooks.gateways._gateway import Gateway, from_credentials, secret, status_api
from payhooks.gateways.phonepe.adapter import (
    AUTHORIZATION_HEADER,
    MAX_BODY_BYTES,
    PhonePe,
    authorization,
)

PHONEPE = Gateway(
    provider=Provider.PHONEPE,
    title="PhonePe",
    secrets=(secret(Provider.PHONEPE, "WEBHOOK_CREDENTIALS"),),
    build=from_credentials(PhonePe),
    status_api=status_api(
        Provider.PHONEPE,
        id_name="CLIENT_ID",
        secret_name="CLIENT_SECRET",
        url="https://api.phonepe.com/apis",  # OAuth under /identity-manager, orders under /pg
    ),
    reference_prefix="ph",  # the merchant's own merchantOrderId ([A-Za-z0-9_-], up to 63)
    retry_window=timedelta(hours=24),  # undocumented ("retries callbacks without a 200")
    confirmed_by_api=True,  # a static credential signs nothing the callback says
)

__all__ = ["AUTHORIZATION_HEADER", "MAX_BODY_BYTES", "PHONEPE", "PhonePe", "authorization"]
