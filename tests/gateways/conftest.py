"""Each gateway's tests in its own folder, as in ``src/payhooks/gateways``: the adapter against
the gateway's samples, its status client against the status API double (`tests/reconcile`'s,
and its reconciler over the reference shop)."""

from tests.reconcile.conftest import gateway_api, rig  # noqa: F401  # their fixtures
