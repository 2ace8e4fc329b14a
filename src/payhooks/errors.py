"""Every condition payhooks reports, under one root, with fields rather than only text."""

from __future__ import annotations


class PayhooksError(Exception):
    """Root of every error payhooks raises on purpose."""


class RejectedDelivery(PayhooksError):
    """A delivery refused before anything was stored."""

    def __init__(self, provider: str, reason: str) -> None:
        super().__init__(f"{provider}: {reason}")
        self.provider = provider
        self.reason = reason


class SignatureMismatch(RejectedDelivery):
    """The bytes are not proven to come from the gateway (bad, missing or malformed signature)."""


class MalformedPayload(RejectedDelivery):
    """Authentic bytes that do not form an event payhooks can read."""


class PayloadTooLarge(RejectedDelivery):
    """The body exceeds the size payhooks accepts."""


class ProviderNotConfigured(PayhooksError):
    """No secret is configured for this provider, so it is not served."""

    def __init__(self, provider: str) -> None:
        super().__init__(f"provider {provider!r} is not configured")
        self.provider = provider


class DatabaseUnavailable(PayhooksError):
    """The database did not answer in time; the caller should try again later."""


class LockTimeout(DatabaseUnavailable):
    """Another transaction holds what this one needs (typically a twin delivery in flight)."""

    def __init__(self, event_id: str | None = None) -> None:
        super().__init__(f"lock timeout (event {event_id})" if event_id else "lock timeout")
        self.event_id = event_id


class NotCommitted(PayhooksError):
    """A claim made inside the caller's transaction was not committed (rolled back, or the
    transaction is still open): nothing took effect, so the gateway must be answered 5xx."""


class NotFound(PayhooksError):
    """A shop record that does not exist."""

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} {key!r} not found")
        self.kind = kind
        self.key = key


class Conflict(PayhooksError):
    """A shop request that contradicts what is already recorded."""


class InvalidRequest(PayhooksError):
    """A shop request whose content cannot be accepted (unknown SKU, bad quantity)."""
