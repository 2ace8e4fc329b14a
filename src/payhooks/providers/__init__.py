"""Moved to ``payhooks.gateways`` (the ``Adapter`` protocol and the secrets' readers) and
``payhooks.gateways.<gateway>`` (each adapter); these paths stay for existing imports."""

from payhooks.gateways._adapter import Adapter, checked_secrets, read_secrets, secrets_value

__all__ = ["Adapter", "checked_secrets", "read_secrets", "secrets_value"]
