"""Reconciliation's own errors, beside the layer that raises them."""

from __future__ import annotations

from payhooks.errors import GatewayApiError


class CredentialsRefused(GatewayApiError):
    """The gateway refused the API credentials themselves (a 401 or 403, PayU's "Invalid
    Hash."), not one checkout: every call fails the same way until an operator fixes them,
    so the gateway is paused for the pass and the refusal is shown (docs/operations.md)."""


__all__ = ["CredentialsRefused"]
