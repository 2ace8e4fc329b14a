"""PayU's chargeback webhook, in the shape its documentation prints (tests/data/payu/README.md):
JSON that nothing signs, naming the merchant only by its PayU id. Refused as unauthenticated,
with a reason that names it, never recorded as a dispute a forger could choose."""

from __future__ import annotations

from pathlib import Path

import pytest

from payhooks.gateways.payu import CHARGEBACK_REFUSED, PayU
from payhooks.plumbing.errors import SignatureMismatch

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "payu" / "chargeback_webhook.json"


def test_a_chargeback_webhook_of_paus_documented_shape_is_refused_saying_why() -> None:
    adapter = PayU(merchant_key="rZ1fX4", salts=("salt",))
    with pytest.raises(SignatureMismatch) as refused:
        adapter.verify(SAMPLE.read_bytes(), {})
    assert refused.value.reason == CHARGEBACK_REFUSED
    assert "docs/providers.md" in str(refused.value)


def test_a_chargeback_notice_carrying_the_merchant_key_is_refused_all_the_same() -> None:
    """Its key field would prove nothing: the merchant key is on every checkout form."""
    body = SAMPLE.read_bytes().replace(b'"mid": "8146527"', b'"key": "rZ1fX4"')
    with pytest.raises(SignatureMismatch, match="chargeback notice"):
        PayU(merchant_key="rZ1fX4", salts=("salt",)).verify(body, {})
