"""The library's own bound: what a caller of ``ingest`` lets an unauthenticated sender spend."""

from __future__ import annotations

import pytest

from payhooks.gateways.payu import PayU
from payhooks.intake.ingest import receive
from payhooks.plumbing.errors import PayloadTooLarge, SignatureMismatch

PAYU = PayU(merchant_key="k", salts=("s",))


def test_a_body_over_the_adapters_bound_is_refused_before_it_is_verified():
    body = b"a=" + b"x" * PAYU.max_body_bytes
    with pytest.raises(PayloadTooLarge) as caught:
        receive(PAYU, body, {})
    assert str(PAYU.max_body_bytes) in caught.value.reason


def test_a_body_at_the_adapters_bound_is_verified():
    body = b"a=" + b"x" * (PAYU.max_body_bytes - 2)
    with pytest.raises(SignatureMismatch):
        receive(PAYU, body, {})
