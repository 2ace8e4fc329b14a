"""Cashfree's adapter, where merchants and the docs import it; it lives in
``payhooks.gateways.cashfree``."""

from __future__ import annotations

from payhooks.gateways.cashfree.adapter import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    VERSION_HEADER,
    Cashfree,
    sign,
)
from payhooks.providers._common import MAX_JSON_BODY_BYTES

__all__ = [
    "IDEMPOTENCY_HEADER",
    "MAX_JSON_BODY_BYTES",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "VERSION_HEADER",
    "Cashfree",
    "sign",
]
