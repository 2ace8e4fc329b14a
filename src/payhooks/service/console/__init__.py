"""The operator console: one search box, one timeline per payment, parked deliveries and dead
letters to act on, webhook health per gateway (docs/console.md)."""

from payhooks.service.console.pages import CONNECTIONS, install

__all__ = ["CONNECTIONS", "install"]
