"""The reference shop's console: the core console (``payhooks.console``) with the shop's own
views, one timeline per cart (its checkout, stock, order and emails), the search by order id,
cart id or customer email, and the dead letters (docs/console.md)."""

from payhooks.console import CONNECTIONS, WAIT_S
from payhooks.service.console.shop import install

__all__ = ["CONNECTIONS", "WAIT_S", "install"]
