"""PayU: the adapter (``adapter.py``), the status API's client (``status.py``, an extra),
and the settings that serve it (here)."""

from __future__ import annotations

from datetime import timedelta

from payhooks.events import Provider
from payhooks.gateways._gateway import Found, Gateway, Secret, StatusApi
from payhooks.gateways.payu.adapter import PayU


def _adapter(found: Found) -> PayU:
    return PayU(merchant_key=found[0][0], salts=found[1])


PAYU = Gateway(
    provider=Provider.PAYU,
    title="PayU",
    secrets=(
        Secret(
            variable="PAYHOOKS_PAYU_MERCHANT_KEY", django_key="PAYU_MERCHANT_KEY", several=False
        ),
        Secret(variable="PAYHOOKS_PAYU_SALTS", django_key="PAYU_SALTS"),
    ),
    build=_adapter,
    status_api=StatusApi(
        id_variable="PAYHOOKS_PAYU_API_KEY",
        secret_variable="PAYHOOKS_PAYU_API_SALT",
        url_variable="PAYHOOKS_PAYU_API_URL",
        url="https://info.payu.in",
        module="payhooks.gateways.payu.status",
    ),
    reference_prefix="ph",  # the merchant's own txnid
    retry_window=timedelta(hours=24),  # it documents none: the same day is watched
)

__all__ = ["PAYU"]
