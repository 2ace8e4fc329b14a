"""Reconciliation's own errors. ``CredentialsRefused`` is raised by the gateways' status
clients, so it lives beside them (``payhooks.gateways._status``)."""

from __future__ import annotations

from payhooks.gateways._status import CredentialsRefused

__all__ = ["CredentialsRefused"]
