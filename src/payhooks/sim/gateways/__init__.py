"""Every gateway's simulated side, one module each, found through ``SIMULATORS``: the storm,
the demo, the status-API double and the test credentials loop over it. A gateway with no
entry is refused (``NoSimulator``), never played as another."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from payhooks.events import Provider
from payhooks.sim.gateways import cashfree, juspay, payu, phonepe, razorpay
from payhooks.sim.gateways.base import (
    Booked,
    DisputeDelivery,
    NoSimulator,
    PaymentDelivery,
    RefundDelivery,
    Simulator,
)

SIMULATORS: Mapping[Provider, Simulator] = MappingProxyType({
    sim.provider: sim
    for sim in (
        razorpay.SIMULATOR, cashfree.SIMULATOR, payu.SIMULATOR, phonepe.SIMULATOR,
        juspay.SIMULATOR,
    )
})  # fmt: skip


def simulator(provider: Provider) -> Simulator:
    """The gateway's simulator; one without an entry fails loudly."""
    try:
        return SIMULATORS[provider]
    except KeyError:
        raise NoSimulator(str(provider)) from None


__all__ = [
    "SIMULATORS",
    "Booked",
    "DisputeDelivery",
    "NoSimulator",
    "PaymentDelivery",
    "RefundDelivery",
    "Simulator",
    "simulator",
]
