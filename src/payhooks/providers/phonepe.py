"""PhonePe's adapter, where merchants and the docs import it; it lives in
``payhooks.gateways.phonepe``."""

from __future__ import annotations

from payhooks.gateways.phonepe.adapter import (
    AUTHORIZATION_HEADER,
    MAX_BODY_BYTES,
    PhonePe,
    authorization,
)

__all__ = ["AUTHORIZATION_HEADER", "MAX_BODY_BYTES", "PhonePe", "authorization"]
