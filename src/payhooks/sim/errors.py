"""The simulators' own conditions (the demo, the storm)."""

from __future__ import annotations

from payhooks.plumbing.errors import PayhooksError


class DemoFailed(PayhooksError):
    """The demo could not set its stage (the service did not start, the API refused a step)."""


class StormError(PayhooksError):
    """The storm could not set up or read the deployment (wrong URL or token, API refusing)."""
