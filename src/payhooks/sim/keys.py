"""The test credentials the simulators sign and authenticate with: webhook secrets for
deliveries, API keys for the status-API double. Their values are plain data below every
simulator (``sim.parts``); each gateway's simulator says which environment variables a
payhooks deployment reads them from, and these classes ask every simulator."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from payhooks.events import Provider
from payhooks.sim.gateways import SIMULATORS, simulator
from payhooks.sim.parts import ApiKeyValues, SecretValues


class GatewaySecrets(SecretValues):
    __slots__ = ()

    def env(self) -> dict[str, str]:
        """The environment a payhooks server needs to accept these deliveries."""
        return {k: v for sim in SIMULATORS.values() for k, v in sim.webhook_env(self).items()}

    def given(self, found: Mapping[Provider, Sequence[str | None]]) -> GatewaySecrets:
        """These secrets with each gateway's replaced by what ``found`` holds for it (one
        value for each of its webhook settings, in their order; empty or None keeps ours)."""
        return _given(self, found, lambda provider: simulator(provider).webhook_secrets)


class ApiKeys(ApiKeyValues):
    """The API credentials the double accepts (never webhook secrets)."""

    __slots__ = ()

    def env(self, base_url: str) -> dict[str, str]:
        """The environment a payhooks worker needs to ask this double."""
        return {k: v for sim in SIMULATORS.values() for k, v in sim.api_env(self, base_url).items()}

    def given(self, found: Mapping[Provider, Sequence[str | None]]) -> ApiKeys:
        """These keys with each gateway's replaced by what ``found`` holds for it (its API id
        and secret; empty or None keeps ours)."""
        return _given(self, found, lambda provider: simulator(provider).api_keys)


_Keys = TypeVar("_Keys", GatewaySecrets, ApiKeys)


def _given(
    keys: _Keys,
    found: Mapping[Provider, Sequence[str | None]],
    reads: Callable[[Provider], Callable[[_Keys], Sequence[str]]],
) -> _Keys:
    """Which field holds each gateway's value is its simulator's to say: it is asked to read
    a copy whose every field holds its own name, so no list of gateways is kept here."""
    names = type(keys)(**{field.name: field.name for field in dataclasses.fields(keys)})
    changes: dict[str, str] = {}
    for provider, values in found.items():
        fields = reads(provider)(names)
        changes.update((name, value) for name, value in zip(fields, values, strict=True) if value)
    return dataclasses.replace(keys, **changes)
