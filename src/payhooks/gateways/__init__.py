"""The gateways payhooks serves, one folder each, found here: the settings, reconciliation,
the shop, the stored-delivery reader and the CLI loop over ``GATEWAYS`` (docs/providers.md,
"Adding a provider"). Pure: the status clients are named, never imported."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from payhooks.events import Provider
from payhooks.gateways._gateway import ApiCredentials, Found, Gateway, Secret, StatusApi
from payhooks.gateways.cashfree import CASHFREE
from payhooks.gateways.payu import PAYU
from payhooks.gateways.razorpay import RAZORPAY

GATEWAYS: Mapping[Provider, Gateway] = MappingProxyType(
    {found.provider: found for found in (RAZORPAY, CASHFREE, PAYU)}
)


class UnknownGateway(LookupError):
    """A provider with no line in ``GATEWAYS``: a gateway added to ``Provider`` alone."""

    def __init__(self, provider: object) -> None:
        super().__init__(f"no gateway {provider!r} in payhooks.gateways.GATEWAYS")
        self.provider = provider


def gateway(provider: Provider) -> Gateway:
    """The gateway of ``provider``; never another one's."""
    found = GATEWAYS.get(provider)
    if found is None:
        raise UnknownGateway(provider)
    return found


__all__ = [
    "GATEWAYS",
    "ApiCredentials",
    "Found",
    "Gateway",
    "Secret",
    "StatusApi",
    "UnknownGateway",
    "gateway",
]
