"""The test credentials the simulators sign and authenticate with: webhook secrets for
deliveries, API keys for the status-API double. Their values are plain data below every
simulator (``sim.parts``); each gateway's simulator says which environment variables a
payhooks deployment reads them from, and these classes ask every simulator."""

from __future__ import annotations

from payhooks.sim.gateways import SIMULATORS
from payhooks.sim.parts import ApiKeyValues, SecretValues


class GatewaySecrets(SecretValues):
    __slots__ = ()

    def env(self) -> dict[str, str]:
        """The environment a payhooks server needs to accept these deliveries."""
        return {k: v for sim in SIMULATORS.values() for k, v in sim.webhook_env(self).items()}


class ApiKeys(ApiKeyValues):
    """The API credentials the double accepts (never webhook secrets)."""

    __slots__ = ()

    def env(self, base_url: str) -> dict[str, str]:
        """The environment a payhooks worker needs to ask this double."""
        return {k: v for sim in SIMULATORS.values() for k, v in sim.api_env(self, base_url).items()}
