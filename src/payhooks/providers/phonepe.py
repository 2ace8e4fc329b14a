"""Moved to ``payhooks.gateways.phonepe``; this path stays for existing imports."""

from payhooks.gateways.phonepe import AUTHORIZATION_HEADER, MAX_BODY_BYTES, PhonePe, authorization

__all__ = ["AUTHORIZATION_HEADER", "MAX_BODY_BYTES", "PhonePe", "authorization"]
