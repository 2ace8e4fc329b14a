"""Each gateway's tests in its own folder, as in ``src/payhooks/gateways``: the adapter against
the gateway's samples, its status client against the status API double (`tests/reconcile`'s)."""

from tests.reconcile.conftest import gateway_api  # noqa: F401  # its fixture
