"""The gateways payhooks serves, one folder each (its adapter, its status client, its
``Gateway`` description), the ``Adapter`` protocol they meet, the reading of their secrets,
and their registry: the settings, reconciliation, the shop, the stored-delivery reader and the
CLI loop over ``GATEWAYS`` (docs/providers.md, "Adding a provider"). Pure: the status
clients are named, never imported."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from payhooks.events import Provider
from payhooks.gateways._adapter import Adapter, checked_secrets, read_secrets, secrets_value
from payhooks.gateways._gateway import (
    ApiCredentials,
    Found,
    Gateway,
    RefusedSetting,
    RefusedSettings,
    Secret,
    StatusApi,
)
from payhooks.gateways.cashfree import CASHFREE
from payhooks.gateways.juspay import JUSPAY
from payhooks.gateways.payu import PAYU
from payhooks.gateways.phonepe import PHONEPE
from payhooks.gateways.razorpay import RAZORPAY

GATEWAYS: Mapping[Provider, Gateway] = MappingProxyType(
    {found.provider: found for found in (RAZORPAY, CASHFREE, PAYU, PHONEPE, JUSPAY)}
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


def named(name: str) -> Gateway | None:
    """The gateway a stored name (``razorpay``) stands for; None for a name payhooks serves no
    gateway of (the delivery log's ``unknown``)."""
    return next((g for p, g in GATEWAYS.items() if p.value == name), None)


def title_of(name: str) -> str:
    """A gateway's name (``razorpay``) as a person reads it, its title (``Razorpay``, ``PayU``);
    a name payhooks serves no gateway of, as it is."""
    found = named(name)
    return name if found is None else found.title


def credentials(
    values: Mapping[str, object], *, prefix: str = "PAYHOOKS_"
) -> dict[Provider, ApiCredentials]:
    """Each gateway's status-API credentials found in ``values``: the environment, or with
    ``prefix=""`` Django's ``PAYHOOKS`` setting (``RAZORPAY_KEY_ID``, ...). Both the id and
    the secret, or neither; one alone is a ``RefusedSetting`` naming the other, never
    ignored, as is a base URL that is no URL (``StatusApi.base_url``)."""
    found: dict[Provider, ApiCredentials] = {}
    for provider, gateway in GATEWAYS.items():
        api = gateway.status_api
        names = [name.removeprefix("PAYHOOKS_") for name in (api.id_variable, api.secret_variable)]
        id_name, secret_name = (prefix + name for name in names)
        ident, secret = _text(values, id_name), _text(values, secret_name)
        if bool(ident) != bool(secret):
            given, missing = (id_name, secret_name) if ident else (secret_name, id_name)
            raise RefusedSetting(missing, f"is not set while {given} is: both are needed")
        if ident and secret:
            url_name = prefix + api.url_variable.removeprefix("PAYHOOKS_")
            base_url = api.base_url(_text(values, url_name) or api.url, url_name)
            found[provider] = ApiCredentials(
                provider=provider, id=ident, secret=secret, base_url=base_url
            )
    return found


def _text(values: Mapping[str, object], name: str) -> str:
    value = values.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RefusedSetting(name, f"must be a string, not {type(value).__name__}")
    return value.strip()


__all__ = [
    "GATEWAYS",
    "Adapter",
    "ApiCredentials",
    "Found",
    "Gateway",
    "RefusedSetting",
    "RefusedSettings",
    "Secret",
    "StatusApi",
    "UnknownGateway",
    "checked_secrets",
    "credentials",
    "gateway",
    "named",
    "read_secrets",
    "secrets_value",
    "title_of",
]
