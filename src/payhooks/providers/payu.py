"""Moved to ``payhooks.gateways.payu``; this path stays for existing imports."""

from payhooks.gateways.payu import MAX_BODY_BYTES, PayU, decode_form, encode, reverse_hash

__all__ = ["MAX_BODY_BYTES", "PayU", "decode_form", "encode", "reverse_hash"]
