"""Moved to ``payhooks.gateways.razorpay``; this path stays for existing imports."""

from payhooks.gateways.razorpay import (
    EVENT_ID_HEADER,
    MAX_JSON_BODY_BYTES,
    SIGNATURE_HEADER,
    Razorpay,
    sign,
)

__all__ = ["EVENT_ID_HEADER", "MAX_JSON_BODY_BYTES", "SIGNATURE_HEADER", "Razorpay", "sign"]
