"""PayU: the adapter (``adapter.py``), the status API's client (``status.py``, an extra),
and the settings that serve it (here)."""

from __future__ import annotations

from datetime import timedelta

from payhooks.events import Provider
from payhooks.gateways._gateway import Found, Gateway, secret, status_api
from payhooks.gateways.payu.adapter import (
    CHARGEBACK_REFUSED,
    MAX_BODY_BYTES,
    PayU,
    decode_form,
    encode,
    reverse_hash,
)


def _adapter(found: Found) -> PayU:
    return PayU(merchant_key=found[0][0], salts=found[1])


PAYU = Gateway(
    provider=Provider.PAYU,
    title="PayU",
    secrets=(
        secret(Provider.PAYU, "MERCHANT_KEY", several=False),
        secret(Provider.PAYU, "SALTS"),
    ),
    build=_adapter,
    status_api=status_api(
        Provider.PAYU,
        id_name="API_KEY",
        secret_name="API_SALT",
        url="https://info.payu.in",
        adds=("/merchant",),
    ),
    reference_prefix="ph",  # the merchant's own txnid
    retry_window=timedelta(hours=24),  # it documents none: the same day is watched
    sends_refunds=True,  # under its token id (docs/providers.md, "Refunds")
    final_when_captured=True,  # the txnid is one payment
    confirmed_in_part=(
        "its refund callbacks (no hash signs them) and a second post of a payment (another "
        "mihpayid, or a copy in other bytes)"
    ),
    # Its refund callbacks rest on the merchant key, which every checkout form shows.
    refuted_advice=(
        "refund callbacks anyone can write (the merchant key is in every checkout form), or a "
        "customer's own signed post resent under another mihpayid. No credential to rotate; "
        "look for who sends them."
    ),
)

__all__ = [
    "CHARGEBACK_REFUSED",
    "MAX_BODY_BYTES",
    "PAYU",
    "PayU",
    "decode_form",
    "encode",
    "reverse_hash",
]
