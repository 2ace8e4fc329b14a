"""Razorpay's adapter, where merchants and the docs import it; it lives in
``payhooks.gateways.razorpay``."""

from __future__ import annotations

from payhooks.gateways.razorpay.adapter import (
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    Razorpay,
    sign,
)
from payhooks.providers._common import MAX_JSON_BODY_BYTES

__all__ = ["EVENT_ID_HEADER", "MAX_JSON_BODY_BYTES", "SIGNATURE_HEADER", "Razorpay", "sign"]
