"""A simulated gateway: real-format, correctly signed deliveries for tests, the demo and storm.

Bodies follow the shapes in PROVIDERS.md (Razorpay ``payment.*`` / ``order.paid`` /
``refund.processed``, Cashfree webhook versions 2022-09-01 to 2025-01-01, PayU form posts),
each built by its gateway's module in ``sim/gateways/``. A ``Delivery`` is the exact bytes and
headers; a retry re-sends the same object.
"""

from __future__ import annotations

from payhooks.events import Provider
from payhooks.sim.deliveries import Delivery, Purchase, bank_reference
from payhooks.sim.gateways import cashfree as cashfree_sim
from payhooks.sim.gateways import juspay as juspay_sim
from payhooks.sim.gateways import payu as payu_sim
from payhooks.sim.gateways import phonepe as phonepe_sim
from payhooks.sim.gateways import razorpay as razorpay_sim
from payhooks.sim.gateways import simulator
from payhooks.sim.keys import GatewaySecrets


def new_payment_id(provider: Provider) -> str:
    return simulator(provider).new_payment_id()


class Gateway:
    """Builds deliveries; ``now`` is unix seconds, passed in so the module stays pure. The
    methods are the gateways' own builders (``sim.gateways.<name>.delivery``), so their
    signatures and bodies are written once, beside the gateway."""

    def __init__(self, keys: GatewaySecrets, *, now: int = 1_767_225_600) -> None:
        self.keys = keys
        self.now = now

    razorpay = razorpay_sim.delivery
    cashfree = cashfree_sim.delivery
    payu = payu_sim.delivery
    phonepe = phonepe_sim.delivery
    juspay = juspay_sim.delivery


__all__ = [
    "Delivery",
    "Gateway",
    "GatewaySecrets",
    "Purchase",
    "bank_reference",
    "new_payment_id",
]
