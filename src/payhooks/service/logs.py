"""The reference service's logs: ``payhooks.plumbing.logs``, which a merchant's app can use too."""

from payhooks.plumbing.logs import JsonFormatter, configure

__all__ = ["JsonFormatter", "configure"]
