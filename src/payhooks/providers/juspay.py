"""Moved to ``payhooks.gateways.juspay``; this path stays for existing imports."""

from payhooks.gateways.juspay import Juspay, authorization

__all__ = ["Juspay", "authorization"]
