"""Gateway adapters: verify the exact received bytes, then parse them into an Event. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from payhooks.events import Event, Provider


class Adapter(Protocol):
    """What the ingest path needs of a gateway.

    ``headers`` is a mapping with lower-case names. ``verify`` raises ``SignatureMismatch``;
    ``parse`` raises ``MalformedPayload`` and is only called on verified bytes.
    ``headers_read`` names every header the adapter reads (signed or not, such as a delivery
    key header): they are kept with the body, and refused when repeated with two values.
    ``max_body_bytes`` bounds what is read (and, for PayU, parsed) before authentication.
    """

    provider: Provider
    headers_read: tuple[str, ...]
    max_body_bytes: int

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None: ...

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Event: ...


__all__ = ["Adapter"]
