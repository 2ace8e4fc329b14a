"""The tests' delivery factory dispatches through the registries: every gateway's simulator
builds its deliveries, and a gateway without one is refused, never built as another's."""

from __future__ import annotations

import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways import GATEWAYS, UnknownGateway
from payhooks.sim.gateway import new_payment_id
from payhooks.sim.gateways import SIMULATORS, NoSimulator
from tests.factories import ADAPTERS, Purchase, delivery_of


def _purchase(provider: Provider) -> Purchase:
    return Purchase(
        provider=provider, cart_id="cart", reference=f"ph_{provider}", amount_paise=49_900,
        sku="SKU", payment_id=new_payment_id(provider),
    )  # fmt: skip


def test_every_gateway_in_the_registry_has_a_simulator_to_build_its_deliveries():
    assert set(SIMULATORS) == set(GATEWAYS)


@pytest.mark.parametrize("provider", list(Provider))
@pytest.mark.parametrize(
    ("what", "kind"),
    [("captured", EventKind.PAYMENT_CAPTURED), ("failed", EventKind.PAYMENT_FAILED)],
)
def test_each_builder_signs_its_own_gateways_delivery_of_what_was_asked(provider, what, kind):
    delivery = _purchase(provider).delivery(what)
    adapter = ADAPTERS[provider]
    adapter.verify(delivery.body, delivery.headers)
    event = adapter.parse(delivery.body, delivery.headers)
    assert (delivery.provider, event.provider, event.kind) == (provider, provider, kind)


def test_a_gateway_the_registry_lacks_is_refused_not_built_as_payu():
    with pytest.raises(UnknownGateway):
        delivery_of("stripe")  # type: ignore[arg-type]


def test_a_gateway_the_simulators_lack_is_refused_not_built_as_another(monkeypatch):
    from payhooks.sim import gateways

    others = {p: sim for p, sim in SIMULATORS.items() if p is not Provider.JUSPAY}
    monkeypatch.setattr(gateways, "SIMULATORS", others)
    with pytest.raises(NoSimulator):
        delivery_of(Provider.JUSPAY)
