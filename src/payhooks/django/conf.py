"""The ``PAYHOOKS`` setting, read into one value, and checked when Django starts.

::

    PAYHOOKS = {
        "RAZORPAY_WEBHOOK_SECRETS": ["whsec_current", "whsec_previous"],  # all are tried
        # or a string: one secret as written, several as a JSON array '["new", "old"]'
        "CASHFREE_CLIENT_SECRETS": ["cfsk_..."],
        "PAYU_MERCHANT_KEY": "gtKFFx",
        "PAYU_SALTS": ["eCwWELxi"],
        "HANDLER": "payhooks.django.hooks",   # the default: handlers from apps' webhooks.py
        "DATABASE": "default",                 # the alias holding processed_webhooks
        "LOCK_TIMEOUT_MS": 2000,               # a twin in flight waits this long, then 503
        "RAZORPAY_KEY_ID": "rzp_live_...",     # reconciliation (manage.py payhooks_reconcile):
        "RAZORPAY_KEY_SECRET": "...",          # each gateway's status-API id and secret
    }

A gateway with no secret is not served (404). The setting is read on each request, so
``override_settings`` works in a merchant's tests; a mistake in it is reported by
``manage.py check`` (and so by ``runserver`` and ``migrate``) rather than on the first delivery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils.module_loading import import_string
from django.views.decorators.debug import sensitive_variables

from payhooks.events import Provider
from payhooks.gateways import (
    GATEWAYS,
    Adapter,
    ApiCredentials,
    Gateway,
    RefusedSetting,
    RefusedSettings,
    Secret,
    checked_secrets,
    credentials,
    read_secrets,
)
from payhooks.intake.answers import clipped
from payhooks.intake.hooks import Registry
from payhooks.intake.ingest import Handler
from payhooks.plumbing.errors import ProviderNotConfigured
from payhooks.settlements import flags

DEFAULT_HANDLER = "payhooks.django.hooks"
DEFAULT_LOCK_TIMEOUT_MS = 2000
MAX_PROVIDER_CHARS = 40  # an unknown provider is quoted back in the 404's detail
_SECRETS = tuple(secret.django_key for found in GATEWAYS.values() for secret in found.secrets)
# Reconciliation's keys: each gateway's status-API variables without the PAYHOOKS_ prefix.
_API = tuple(
    name.removeprefix("PAYHOOKS_")
    for found in GATEWAYS.values()
    for name in (found.status_api.id_variable, found.status_api.secret_variable,
                 found.status_api.url_variable)
)  # fmt: skip


def setting_name(variable: str) -> str:
    """The ``PAYHOOKS`` key of one of the reference service's variables, as Django names it:
    ``PAYHOOKS["JUSPAY_API_KEY"]`` for ``PAYHOOKS_JUSPAY_API_KEY``."""
    return f'PAYHOOKS["{variable.removeprefix("PAYHOOKS_")}"]'


_RECONCILE = (
    "RECONCILE_AFTER_S", "RECONCILE_WINDOW_S", "RECONCILE_TIMEOUT_MS", "SETTLEMENT_MARGIN_HOURS",
)  # fmt: skip
_KNOWN = {*_SECRETS, *_API, *_RECONCILE, "HANDLER", "DATABASE", "LOCK_TIMEOUT_MS"}
SECRET_KEYS = (
    *_SECRETS,
    *(found.status_api.secret_variable.removeprefix("PAYHOOKS_") for found in GATEWAYS.values()),
)
"""The keys holding a secret (each gateway's webhook settings, its status API's secret): what
an error report must never show (``payhooks.django.reporting``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """``settings.PAYHOOKS`` read and checked once: the adapters served, the handler, the
    database alias, the lock timeout and reconciliation's credentials and window."""

    adapters: Mapping[str, Adapter] = field(default_factory=dict)
    handler: str = DEFAULT_HANDLER
    database: str = "default"
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS
    api: Mapping[Provider, ApiCredentials] = field(default_factory=dict)
    """Reconciliation's status-API credentials (``RAZORPAY_KEY_ID`` and ``RAZORPAY_KEY_SECRET``,
    ...): a gateway without them is not asked."""
    reconcile_after_s: int = 900
    reconcile_window_s: int = 7 * 24 * 3600
    reconcile_timeout_ms: int = 10_000
    settlement_margin_hours: int = flags.DEFAULT_MARGIN_HOURS
    """Past its gateway's cycle, how long a capture may wait for its payout before it is
    flagged unsettled (``payhooks.settlements.flags``)."""

    def adapter(self, provider: str) -> Adapter:
        """The adapter serving ``provider``; ``ProviderNotConfigured`` for any other."""
        found = self.adapters.get(provider)
        if found is None:
            raise ProviderNotConfigured(clipped(provider, MAX_PROVIDER_CHARS))
        return found

    def served(self) -> dict[Provider, Adapter]:
        """The adapters by gateway, as the core's readers take them."""
        return {Provider(name): adapter for name, adapter in self.adapters.items()}

    def handler_function(self) -> Handler:
        """The handler ``HANDLER`` names, imported."""
        return cast(Handler, import_string(self.handler))


def current() -> Config:
    """The configuration in force now (``settings.PAYHOOKS``)."""
    return cast(Config, read(getattr(settings, "PAYHOOKS", {})))


@sensitive_variables()
def read(values: Mapping[str, Any]) -> Config:
    """Refuses what would fail quietly later: an unknown key (a misspelt gateway would be
    answered 404 in production), an empty secret, or spaces around one. A string is one
    secret, never read letter by letter, nor split on commas. Refused while a delivery reads
    it (a server that runs no ``manage.py check``: the admin's pages; the webhook view answers
    503 instead), no variable of this frame or those below it, all holding secrets, is shown
    in Django's error reports."""
    if not isinstance(values, Mapping):
        raise ImproperlyConfigured(
            f"PAYHOOKS must be a dict of settings by name, not {type(values).__name__}"
        )
    unknown = sorted(str(key) for key in set(values) - _KNOWN)
    if unknown:
        raise ImproperlyConfigured(f"PAYHOOKS has unknown keys: {', '.join(unknown)}")
    return Config(
        adapters=_adapters(values),
        handler=_name(values, "HANDLER", DEFAULT_HANDLER),
        database=_name(values, "DATABASE", "default"),
        lock_timeout_ms=_millis(values, "LOCK_TIMEOUT_MS", DEFAULT_LOCK_TIMEOUT_MS),
        api=_api(values),
        reconcile_after_s=_millis(values, "RECONCILE_AFTER_S", 900),
        reconcile_window_s=_millis(values, "RECONCILE_WINDOW_S", 7 * 24 * 3600),
        reconcile_timeout_ms=_millis(values, "RECONCILE_TIMEOUT_MS", 10_000),
        settlement_margin_hours=_millis(
            values, "SETTLEMENT_MARGIN_HOURS", flags.DEFAULT_MARGIN_HOURS, within=flags.MARGIN_HOURS
        ),
    )


def _api(values: Mapping[str, Any]) -> dict[Provider, ApiCredentials]:
    try:
        return credentials(values, prefix="")
    except RefusedSetting as exc:
        raise ImproperlyConfigured(f'PAYHOOKS["{exc.name}"] {exc.reason}') from None


def _adapters(values: Mapping[str, Any]) -> dict[str, Adapter]:
    adapters: dict[str, Adapter] = {}
    for provider, gateway in GATEWAYS.items():
        adapter = _adapter(values, gateway)
        if adapter is not None:
            adapters[provider.value] = adapter
    return adapters


def _adapter(values: Mapping[str, Any], gateway: Gateway) -> Adapter | None:
    """Lists of secrets are checked as they are read; a gateway with only some of its keys is
    refused before a single value (PayU's merchant key) is."""
    given = [_given(values, secret) for secret in gateway.secrets]
    if gateway.incomplete(given) is not None:
        keys = " and ".join(secret.django_key for secret in gateway.secrets)
        raise ImproperlyConfigured(f"PAYHOOKS needs {keys} together")
    found = [_value(s, g) for s, g in zip(gateway.secrets, given, strict=True)]
    try:
        return gateway.adapter(found)
    except RefusedSettings as exc:
        keys = " and ".join(f'PAYHOOKS["{secret.django_key}"]' for secret in exc.secrets)
        raise ImproperlyConfigured(f"{keys} is refused: {exc.reason}") from None


def _given(values: Mapping[str, Any], secret: Secret) -> Any:
    """Several secrets, checked as they are read; a single value as given (only whether it
    is there counts, until all of the gateway's keys are)."""
    if secret.several:
        return _secrets(values, secret.django_key)
    return values.get(secret.django_key) or ""


def _value(secret: Secret, given: Any) -> tuple[str, ...]:
    """What one setting holds: the secrets already read, or a single value, one string."""
    if secret.several or not given:
        return tuple(given or ())
    if not isinstance(given, str) or given != given.strip():
        raise ImproperlyConfigured(f'PAYHOOKS["{secret.django_key}"] must be a string, unpadded')
    return (given,)


def _secrets(values: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """A list of secrets; or a string read as the service reads its environment: one secret
    exactly as written, several as a JSON array (so a variable can be passed on as it is)."""
    given = values.get(name) or ()
    if isinstance(given, str):
        try:
            return read_secrets(given)
        except ValueError as exc:
            raise ImproperlyConfigured(f'PAYHOOKS["{name}"] {exc}') from None
    if isinstance(given, list | tuple) and all(_secret(s) for s in given):
        try:
            return checked_secrets(list(given))
        except ValueError as exc:
            raise ImproperlyConfigured(f'PAYHOOKS["{name}"] {exc}') from None
    raise ImproperlyConfigured(
        f'PAYHOOKS["{name}"] must be a list of non-empty strings with no spaces around them, '
        'or a string: one secret, or several as a JSON array ["new", "old"]'
    )


def _secret(value: object) -> bool:
    return isinstance(value, str) and value != "" and value == value.strip()


def _name(values: Mapping[str, Any], name: str, default: str) -> str:
    given = values.get(name, default)
    if not isinstance(given, str) or given == "":
        raise ImproperlyConfigured(f'PAYHOOKS["{name}"] must be a non-empty string')
    return given


def _millis(
    values: Mapping[str, Any], name: str, default: int, *, within: range | None = None
) -> int:
    """A whole number of milliseconds (or, for the RECONCILE_*_S keys, seconds; for
    SETTLEMENT_MARGIN_HOURS, hours), 0 or more, or ``within`` (the margin: what the environment's
    PAYHOOKS_SETTLEMENT_MARGIN_HOURS takes, from the one definition)."""
    given = values.get(name, default)
    unit = {"_S": "seconds", "RS": "hours"}.get(name[-2:], "milliseconds")
    span = "0 or more" if within is None else f"from {within[0]} to {within[-1]}"
    if isinstance(given, str):  # an environment variable passed on as it is
        shown = repr(given[:40])
        if given.strip().isdecimal():
            raise ImproperlyConfigured(
                f'PAYHOOKS["{name}"] must be an integer, not the string {shown}: '
                f"write int(...) around it ({unit}, {span})"
            )
        raise ImproperlyConfigured(
            f'PAYHOOKS["{name}"] is not a number: {shown}; it must be an integer ({unit}, {span})'
        )
    if isinstance(given, bool) or not isinstance(given, int):
        raise ImproperlyConfigured(f'PAYHOOKS["{name}"] must be {unit}, {span}')
    if given < 0 if within is None else given not in within:
        raise ImproperlyConfigured(f'PAYHOOKS["{name}"] must be {unit}, {span}, not {given}')
    return given


def check_settings(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    """``manage.py check``: the setting reads, names a database and a handler that exist."""
    try:
        config = current()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="payhooks.E001")]
    found = _database_problems(config.database) + _handler_problems(config.handler)
    if not config.adapters:
        found.append(
            checks.Warning(
                "PAYHOOKS names no gateway's secret: every delivery is answered 404",
                id="payhooks.W001",
            )
        )
    found += [
        checks.Warning(
            f"{waiting}, and PAYHOOKS names no {GATEWAYS[provider].title} API credentials "
            f"({' and '.join(n.removeprefix('PAYHOOKS_') for n in _api_names(provider))}): "
            "they would wait, applied never",
            id="payhooks.W002",
        )
        for provider in Provider
        if (waiting := GATEWAYS[provider].awaiting_api()) is not None
        and provider.value in config.adapters
        and provider not in config.api
    ]
    return found


def _handler_problems(handler: str) -> list[checks.CheckMessage]:
    """A handler that cannot be imported; a registry with no handler registered, through which
    every delivery would be recorded ignored (handlers outside an app's ``webhooks.py``, in a
    module nothing imports)."""
    try:
        found = import_string(handler)
    except ImportError as exc:
        return [checks.Error(f'PAYHOOKS["HANDLER"]: {exc}', id="payhooks.E004")]
    if isinstance(found, Registry) and not found.kinds():
        return [
            checks.Warning(
                f"{handler} has no handler registered (none of the installed apps' "
                "webhooks.py registers one): every delivery would be recorded ignored",
                id="payhooks.W003",
            )
        ]
    return []


def _api_names(provider: Provider) -> tuple[str, str]:
    api = GATEWAYS[provider].status_api
    return (api.id_variable, api.secret_variable)


def _database_problems(alias: str) -> list[checks.CheckMessage]:
    if alias not in settings.DATABASES:
        return [
            checks.Error(f'PAYHOOKS["DATABASE"] {alias!r} is not in DATABASES', id="payhooks.E002")
        ]
    if connections[alias].vendor != "postgresql":
        return [checks.Error(f"database {alias!r} is not PostgreSQL", id="payhooks.E003")]
    return _routing_problems(alias)


def _routing_problems(alias: str) -> list[checks.CheckMessage]:
    """The webhook view claims on ``alias``; the admin and the commands read payhooks' models
    where Django's routers send them, and ``migrate`` makes the tables where they allow it:
    all must be ``alias``, or the tables land where deliveries never look (each a 500). Asks
    the routers alone, never the database."""
    from django.apps import apps
    from django.db import router

    for model in apps.get_app_config("payhooks").get_models():
        read, written = router.db_for_read(model), router.db_for_write(model)
        migrated = router.allow_migrate_model(alias, model)
        if (read, written, migrated) != (alias, alias, True):
            said = f"reads on {read!r}, writes on {written!r}" + (
                "" if migrated else f", migrations not on {alias!r}"
            )
            return [checks.Error(
                f'PAYHOOKS["DATABASE"] is {alias!r}, but Django\'s database routers send '
                f"payhooks' {model.__name__} elsewhere ({said}): route the app label "
                f"'payhooks' to {alias!r} for reads, writes and migrations (DATABASE_ROUTERS), "
                f"then migrate it (manage.py migrate --database {alias})",
                id="payhooks.E005",
            )]  # fmt: skip
    return []
