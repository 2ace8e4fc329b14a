"""Moved to ``payhooks.gateways.cashfree``; this path stays for existing imports."""

from payhooks.gateways.cashfree import (
    IDEMPOTENCY_HEADER,
    MAX_JSON_BODY_BYTES,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    VERSION_HEADER,
    Cashfree,
    sign,
)

__all__ = [
    "IDEMPOTENCY_HEADER",
    "MAX_JSON_BODY_BYTES",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "VERSION_HEADER",
    "Cashfree",
    "sign",
]
