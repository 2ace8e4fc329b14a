"""PayU's adapter, where merchants and the docs import it; it lives in
``payhooks.gateways.payu``."""

from __future__ import annotations

from payhooks.gateways.payu.adapter import MAX_BODY_BYTES, PayU, decode_form, encode, reverse_hash

__all__ = ["MAX_BODY_BYTES", "PayU", "decode_form", "encode", "reverse_hash"]
