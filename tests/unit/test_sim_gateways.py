"""The simulators' registry: every gateway has its simulated side, and an unknown one is
refused rather than played as another gateway."""

import pytest

from payhooks.events import Provider
from payhooks.sim.gateways import SIMULATORS, NoSimulator, simulator


def test_every_gateway_has_a_simulator():
    assert set(SIMULATORS) == set(Provider)


def test_each_simulator_is_filed_under_its_own_gateway():
    assert all(sim.provider is provider for provider, sim in SIMULATORS.items())


def test_a_gateway_without_a_simulator_is_refused():
    with pytest.raises(NoSimulator) as refused:
        simulator("stripe")  # type: ignore[arg-type]
    assert refused.value.provider == "stripe"


def test_the_status_api_double_serves_no_path_twice():
    from payhooks.sim.gateway_api import GatewayApi

    paths = [
        (route.path, tuple(sorted(route.methods or ()))) for route in GatewayApi().app().routes
    ]
    assert len(paths) == len(set(paths))


def test_the_api_keys_environment_reads_back_as_each_gateways_credentials():
    from payhooks.service.config import Settings
    from payhooks.sim.keys import ApiKeys

    keys = ApiKeys(
        razorpay_key_id="a", razorpay_key_secret="b", cashfree_client_id="c",
        cashfree_api_secret="d", payu_key="e", payu_salt="f", phonepe_client_id="g",
        phonepe_client_secret="h", juspay_merchant_id="i", juspay_api_key="j",
    )  # fmt: skip
    found = Settings.from_env(keys.env("http://books"))
    assert {(c.provider, c.id, c.secret, c.base_url) for c in found.api_credentials} == {
        (Provider.RAZORPAY, "a", "b", "http://books"),
        (Provider.CASHFREE, "c", "d", "http://books"),
        (Provider.PAYU, "e", "f", "http://books"),
        (Provider.PHONEPE, "g", "h", "http://books"),
        (Provider.JUSPAY, "i", "j", "http://books"),
    }


def test_api_keys_given_each_gateways_credentials_are_what_its_simulator_accepts():
    from payhooks.sim.keys import ApiKeys

    given = {provider: (f"{provider}-id", f"{provider}-secret") for provider in Provider}
    keys = ApiKeys().given(given)
    assert {p: sim.api_keys(keys) for p, sim in SIMULATORS.items()} == given


def test_webhook_secrets_given_for_some_settings_keep_the_defaults_of_the_rest():
    from payhooks.sim.keys import GatewaySecrets

    keys = GatewaySecrets().given({Provider.PAYU: ["key", None], Provider.RAZORPAY: ["whsec"]})
    assert keys == GatewaySecrets(payu_key="key", razorpay="whsec")


def test_webhook_secrets_given_for_every_setting_are_what_each_simulator_signs_with():
    from payhooks.gateways import GATEWAYS
    from payhooks.sim.keys import GatewaySecrets

    given = {p: [f"{s.variable}-value" for s in g.secrets] for p, g in GATEWAYS.items()}
    keys = GatewaySecrets().given(given)
    assert {p: list(sim.webhook_secrets(keys)) for p, sim in SIMULATORS.items()} == given
