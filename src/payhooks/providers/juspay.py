"""Juspay's adapter (HDFC SmartGateway too), where merchants and the docs import it; it lives
in ``payhooks.gateways.juspay``."""

from __future__ import annotations

from payhooks.gateways.juspay.adapter import Juspay, authorization

__all__ = ["Juspay", "authorization"]
