"""A real adapter that notes each call reaching it, and whether an event loop ran in the
thread that made it: how the web tests see what runs before authentication, and where."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from payhooks.events import Event, Provider
from payhooks.gateways import Adapter


@dataclass(frozen=True, slots=True, kw_only=True)
class Watched:
    inner: Adapter
    calls: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def provider(self) -> Provider:
        return self.inner.provider

    @property
    def headers_read(self) -> tuple[str, ...]:
        return self.inner.headers_read

    @property
    def max_body_bytes(self) -> int:
        return self.inner.max_body_bytes

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        self.calls.append(("verify", on_event_loop()))
        self.inner.verify(body, headers)

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Event:
        self.calls.append(("parse", on_event_loop()))
        return self.inner.parse(body, headers)


def on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
