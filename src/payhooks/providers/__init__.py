"""Moved to ``payhooks.gateways`` (the ``Adapter`` protocol and the secrets' readers) and
``payhooks.gateways.<gateway>`` (each adapter); these paths are deprecated and go in payhooks
0.2. Until then they warn (``DeprecationWarning``) and give the same objects."""

import warnings

from payhooks.gateways._adapter import Adapter, checked_secrets, read_secrets, secrets_value

warnings.warn(
    "payhooks.providers is deprecated and goes in payhooks 0.2: import payhooks.gateways",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["Adapter", "checked_secrets", "read_secrets", "secrets_value"]
