"""What payhooks knows of one gateway besides its adapter: the settings that serve it, where
its status API is, how its references look. Pure: names and functions, no I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol
from urllib.parse import urlsplit

from payhooks.events import Provider
from payhooks.gateways._adapter import Adapter
from payhooks.gateways._settlements import Settles


@dataclass(frozen=True, slots=True, kw_only=True)
class Secret:
    """One webhook setting: its environment variable (the service), its key in Django's
    ``PAYHOOKS`` setting, and whether it holds several secrets, all tried while one is rotated
    out (``read_secrets``), or one plain value (PayU's merchant key)."""

    variable: str
    django_key: str
    several: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusApi:
    """Where reconciliation asks the gateway about a checkout: the variables holding the API
    id, its secret and a base URL override, the production URL, and the module of its client.
    That module (``status.py``) needs httpx, an extra: the core names it and never imports it."""

    id_variable: str
    secret_variable: str
    url_variable: str
    url: str
    module: str
    adds: tuple[str, ...] = ()
    """The paths its client adds to the base URL (Razorpay's ``/v1``): a base URL given
    already ending in one is refused, naming the base (every call went to ``/v1/v1/...``)."""

    def base_url(self, given: str, name: str | None = None) -> str:
        """``given`` without a trailing ``/``; ``RefusedSetting`` naming the setting (``name``,
        as its reader calls it; ``url_variable`` by default) when it is not an http(s) URL with
        a host and no query, or ends in a path of ``adds``: every call to it would fail."""
        name = name or self.url_variable
        if not _http_url(given):  # never shown: a URL may hold a password, a value a secret
            raise RefusedSetting(
                name, f"must be an http:// or https:// URL with a host and no query, such as "
                f"{self.url}",
            )  # fmt: skip
        url = given.rstrip("/")
        for path in self.adds:
            if url.lower().endswith(path):
                raise RefusedSetting(
                    name, f"ends in {path}, which payhooks adds itself: leave it off"
                )
        return url

    @property
    def credentials(self) -> str:
        """The settings an operator checks when the API refuses them."""
        return f"{self.id_variable} and {self.secret_variable}"


def _http_url(given: str) -> bool:
    """An http(s) URL with a host and no query; one ``urlsplit`` cannot read (``http://[::1``)
    is none."""
    try:
        parts = urlsplit(given)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.query
    except ValueError:
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiCredentials:
    """What reconciliation needs to ask one gateway's status API: an id (Razorpay key id,
    Cashfree client id, PayU merchant key), its secret (key secret, API secret, salt) and the
    base URL (production by default; a sandbox or a local double when overridden)."""

    provider: Provider
    id: str
    secret: str = field(repr=False)
    base_url: str


def secret(provider: Provider, name: str, *, several: bool = True) -> Secret:
    """A webhook setting named as every gateway's are: ``PAYHOOKS_<GATEWAY>_<NAME>`` in the
    environment, ``<GATEWAY>_<NAME>`` in Django's ``PAYHOOKS``."""
    key = f"{provider.value.upper()}_{name}"
    return Secret(variable=f"PAYHOOKS_{key}", django_key=key, several=several)


def status_api(
    provider: Provider, *, id_name: str, secret_name: str, url: str, adds: tuple[str, ...] = ()
) -> StatusApi:
    """A status API named as every gateway's is: ``PAYHOOKS_<GATEWAY>_<ID_NAME>``,
    ``..._<SECRET_NAME>``, ``..._API_URL``, its client in ``payhooks.gateways.<gateway>.status``."""
    prefix = f"PAYHOOKS_{provider.value.upper()}_"
    return StatusApi(
        id_variable=prefix + id_name,
        secret_variable=prefix + secret_name,
        url_variable=prefix + "API_URL",
        url=url,
        module=f"payhooks.gateways.{provider.value}.status",
        adds=adds,
    )


class RefusedSetting(ValueError):
    """A setting refused as it is read (a status API's id without its secret, a base URL
    that is no URL): ``name`` as its reader called it (``PAYHOOKS_RAZORPAY_API_URL``, or
    Django's ``RAZORPAY_API_URL``) and ``reason``, which never quotes a secret."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name} {reason}")
        self.name = name
        self.reason = reason


class RefusedSettings(ValueError):
    """A gateway's webhook settings its adapter refuses: ``secrets``, the settings, and
    ``reason``, the adapter's words (which never quote a secret). Each reader names them as
    it calls them (the service's variables, Django's ``PAYHOOKS`` keys) and refuses to start,
    rather than a server failing each delivery on them."""

    def __init__(self, secrets: tuple[Secret, ...], reason: str) -> None:
        super().__init__(f"{' and '.join(s.variable for s in secrets)}: {reason}")
        self.secrets = secrets
        self.reason = reason


Found = Sequence[tuple[str, ...]]
"""What each of a gateway's ``secrets`` holds, in their order; one value is a 1-tuple."""


class _SecretsAdapter(Protocol):
    def __call__(self, *, secrets: tuple[str, ...]) -> Adapter: ...


def from_secrets(adapter: _SecretsAdapter) -> Callable[[Found], Adapter]:
    """The ``build`` of a gateway whose one setting holds all its secrets: ``adapter`` given
    them (Razorpay's webhook secrets, Cashfree's client secrets)."""

    def build(found: Found) -> Adapter:
        return adapter(secrets=found[0])

    return build


class _CredentialsAdapter(Protocol):
    def __call__(self, *, credentials: tuple[str, ...]) -> Adapter: ...


def from_credentials(adapter: _CredentialsAdapter) -> Callable[[Found], Adapter]:
    """The ``build`` of a gateway whose one setting holds its webhook credentials, each
    ``username:password``: ``adapter`` given them (Juspay's, PhonePe's)."""
    return lambda found: adapter(credentials=found[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class Gateway:
    """One gateway, as the settings, reconciliation, the shop and the CLI see it."""

    provider: Provider
    title: str
    secrets: tuple[Secret, ...]
    build: Callable[[Found], Adapter]
    """The adapter from what every one of ``secrets`` holds (none empty)."""
    status_api: StatusApi
    reference_prefix: str
    """What a reference payhooks mints for a checkout starts with (``new_id``)."""
    retry_window: timedelta
    """How long the gateway retries a delivery answered 5xx (docs/providers.md)."""
    confirmed_by_api: bool = False
    """Its callbacks prove only who sent them: each takes effect as its status API confirms it
    (``payhooks.intake.confirmations``), so it needs its API credentials and frequent passes."""
    confirmed_in_part: str | None = None
    """Which of its deliveries, the others signed, take effect only as its status API confirms
    them (PayU's refund callbacks and second posts): served without its API credentials, those
    would wait, applied never (``unconfirmable``)."""
    sends_refunds: bool = False
    """payhooks sends its refunds (``payhooks.refunding.refunds``): its status client's
    ``send_refund`` makes the call under the intent's idempotency key."""
    refund_needs_order: bool = False
    """Its refund API is addressed by order, so a refund asked of payhooks names the order
    (``gateway_order_id``) as well as the payment (Cashfree)."""
    final_when_captured: bool = False
    """Its order is one payment: once one is captured, reconciliation has nothing left to
    find and stops asking (PayU's txnid)."""
    captures_authorized: bool = False
    """payhooks captures its authorised payments when asked to (manual capture, the
    reference service's ``PAYHOOKS_CAPTURE_AUTHORIZED``): its status client's ``capture``."""
    settles: Settles | None = None
    """What it documents of its settlements (its cycle, its settlement webhook), and whether
    its report client fetches them (``settlement_pages`` of its status client); None where it
    documents no settlement report payhooks reads (docs/providers.md, "Settlements")."""
    refuted_advice: str = ""
    """What an operator is told of its callbacks the API refuted, when the usual advice (the
    webhook credential leaked: rotate it) does not fit; empty for the usual."""
    disputes_dashboard: str | None = None
    """Where a person answers its disputes (its merchant dashboard's Disputes page, by the
    dispute's id), when payhooks takes its dispute webhooks; None for a gateway whose
    documentation publishes none payhooks can take (docs/providers.md, "Disputes")."""
    dispute_reasons: Mapping[str, str] = field(default_factory=dict)
    """Its dispute reason codes in words, for those it sends without a description of its
    own (Razorpay's ``reason_code``); a code sent with one is read by that description."""

    def adapter(self, found: Found) -> Adapter | None:
        """The adapter when every setting holds something; None when none does (the gateway
        is not served). Call ``incomplete`` first: some set and some not is a mistake. What
        the adapter refuses (a PhonePe credential without its ``:``) is ``RefusedSettings``,
        naming the settings for each reader to say as it starts."""
        if not all(found):
            return None
        try:
            return self.build(found)
        except (TypeError, ValueError) as exc:
            raise RefusedSettings(self.secrets, str(exc)) from None

    def incomplete(self, found: Sequence[object]) -> tuple[Secret, Secret] | None:
        """A setting given and one missing, when only some are set (``found`` holds what each
        holds, read for its truth): one without the other would leave the gateway silently
        unserved."""
        given = [s for s, values in zip(self.secrets, found, strict=True) if values]
        missing = [s for s, values in zip(self.secrets, found, strict=True) if not values]
        return (given[0], missing[0]) if given and missing else None

    def awaiting_api(self) -> str | None:
        """What of its deliveries takes effect only as its status API confirms it, in words
        for a warning of its API credentials missing; None: all of them are signed."""
        if self.confirmed_by_api:
            return f"{self.title}'s callbacks take effect only as its status API confirms them"
        if self.confirmed_in_part:
            return (
                f"{self.title}: {self.confirmed_in_part} take effect only as its status API "
                "confirms them"
            )
        return None

    def waiting_for_credentials(
        self, count: int, what: str, named: Callable[[str], str] = str
    ) -> str:
        """``count`` of ``what`` (its callbacks, its refund intents) waiting for want of its API
        credentials, naming the settings that would end the wait (``named``: a door's name of
        each variable, Django's ``PAYHOOKS["..."]``)."""
        api = self.status_api
        return (
            f"{self.title}: {count} {what}: its API credentials are not set "
            f"({named(api.id_variable)} and {named(api.secret_variable)})"
        )

    @property
    def needs(self) -> str:
        """The words for ``incomplete``'s refusal: "PayU needs both"."""
        return f"{self.title} needs {'both' if len(self.secrets) == 2 else 'all of them'}"


__all__ = [
    "ApiCredentials",
    "Found",
    "Gateway",
    "RefusedSetting",
    "RefusedSettings",
    "Secret",
    "StatusApi",
    "from_credentials",
    "from_secrets",
    "secret",
    "status_api",
]
