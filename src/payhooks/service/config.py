"""Settings read once from the environment (docs/configuration.md, written from these fields
and the gateway registry; docs/operations.md) into a plain value."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from payhooks.events import Provider
from payhooks.gateways import (
    GATEWAYS,
    Adapter,
    ApiCredentials,
    Gateway,
    RefusedSetting,
    RefusedSettings,
    credentials,
    read_secrets,
)
from payhooks.operations import retention
from payhooks.operations.retention import DEFAULT_RETENTION_DAYS
from payhooks.plumbing.db import URL_SYNTAX, readable_url
from payhooks.service.errors import InvalidAddress, SettingError
from payhooks.service.mail import SMTP_URL_SYNTAX, checked_address, smtp_url_problem
from payhooks.settlements import flags

CONSOLE_TIMEZONE = "Asia/Kolkata"  # as payhooks.console.formats.DEFAULT_TIMEZONE
PG_INT_MAX = 2_147_483_647
"""The largest value PostgreSQL takes for ``lock_timeout``, ``statement_timeout`` and the like."""


class PoolMode(StrEnum):
    """What holds a server session between payhooks and PostgreSQL (docs/scaling.md)."""

    SESSION = "session"
    """PostgreSQL itself, or a pooler in session mode: a connection keeps its server session."""
    TRANSACTION = "transaction"
    """A pooler in transaction mode (PgBouncer ``pool_mode = transaction``): the server
    session is another client's after each transaction."""


@dataclass(frozen=True, slots=True)
class _Variable:
    """One environment variable, read into a value or refused with its name."""

    name: str
    raw: str | None

    def text(self) -> str | None:
        return self.raw or None

    def secret(self) -> str | None:
        """One secret; spaces around it are refused, not silently kept or dropped."""
        if self.raw and self.raw != self.raw.strip():
            raise SettingError(self.name, "has spaces around it: remove them")
        return self.raw or None

    def switch(self) -> bool:
        """On or off: ``true``, ``1``, ``yes``, ``on`` or ``false``, ``0``, ``no``, ``off``
        (any case); unset is off."""
        if not self.raw:
            return False
        said = self.raw.strip().lower()
        if said in ("true", "1", "yes", "on"):
            return True
        if said in ("false", "0", "no", "off"):
            return False
        raise SettingError(self.name, f"is true or false, not {_clipped(self.raw)}")

    def integer(self, default: int, *, maximum: int = PG_INT_MAX) -> int:
        """A whole number from 1 to ``maximum``; PostgreSQL's integers end at 2147483647."""
        if not self.raw:
            return default
        digits, shown = self.raw.strip(), _clipped(self.raw)
        if not (digits.isascii() and digits.isdecimal()) or not digits.strip("0"):
            raise SettingError(self.name, f"must be a whole number of at least 1, not {shown}")
        if len(digits.lstrip("0")) > len(str(maximum)) or int(digits) > maximum:
            raise SettingError(
                self.name, f"must be a whole number from 1 to {maximum}, not {shown}"
            )
        return int(digits)

    def secrets(self) -> tuple[str, ...]:
        """One secret exactly as written, or several as a JSON array (``read_secrets``);
        never split on a character a secret may hold."""
        try:
            return read_secrets(self.raw or "")
        except ValueError as exc:
            raise SettingError(self.name, str(exc)) from None

    def address(self) -> str | None:
        """One plain address, normalised; an internal mail host is fine for an operator."""
        if not self.raw:
            return None
        try:
            return checked_address(self.raw, public=False)
        except InvalidAddress as exc:
            raise SettingError(
                self.name,
                f"is not a usable email address ({exc.reason}): write one plain address, "
                "such as ops@example.com",
            ) from exc

    def smtp_url(self) -> str | None:
        """Refused in fixed words, never the parser's: they may quote the password."""
        problem = smtp_url_problem(self.raw) if self.raw else None
        if problem:
            raise SettingError(self.name, f"cannot be used: {problem}; write {SMTP_URL_SYNTAX}")
        return self.raw or None

    def pool_mode(self) -> PoolMode:
        if not self.raw:
            return PoolMode.SESSION
        try:
            return PoolMode(self.raw.strip())
        except ValueError:
            raise SettingError(
                self.name, f"must be session or transaction, not {_clipped(self.raw)}"
            ) from None

    def webhook_url(self) -> str | None:
        """A chat tool's incoming-webhook URL: http(s) with a host. It holds the chat's
        secret, so it is refused in fixed words, never quoted."""
        if not self.raw:
            return None
        parts = urlsplit(self.raw)
        if self.raw != self.raw.strip() or any(c.isspace() for c in self.raw):
            raise SettingError(self.name, "has spaces in it: write the URL alone")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SettingError(
                self.name,
                "must be an http:// or https:// URL with a host: the incoming-webhook URL "
                "your chat tool gave (Slack, Google Chat, Discord's ending in /slack, ...)",
            )
        return self.raw

    def timezone(self, default: str) -> str:
        """An IANA zone name the time zone database holds (``Asia/Kolkata``)."""
        if not self.raw:
            return default
        name = self.raw
        try:
            if name != name.strip() or name.startswith(("/", ".")) or ".." in name:
                raise ValueError(name)
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise SettingError(
                self.name,
                f"must be a time zone name such as Asia/Kolkata or UTC, not {_clipped(name)}",
            ) from None
        return name

    def broker_url(self, default: str, schemes: tuple[str, ...]) -> str:
        """A broker's URL with a host, in one of ``schemes``. It may hold a password, so it is
        refused in fixed words, never quoted."""
        if not self.raw:
            return default
        parts = urlsplit(self.raw)
        if self.raw != self.raw.strip() or any(c.isspace() for c in self.raw):
            raise SettingError(self.name, "has spaces in it: write the URL alone")
        try:
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            port_ok = False
        if parts.scheme not in schemes or not parts.hostname or not port_ok:
            raise SettingError(
                self.name, f"must be a {' or '.join(s + '://' for s in schemes)} URL with a host"
            )
        return self.raw

    def subject_name(self, default: str) -> str:
        """A name a broker takes as part of a subject, stream, exchange or queue: letters,
        digits, ``_`` and ``-``, in parts joined by dots (``payhooks``, ``shop.events``)."""
        if not self.raw:
            return default
        if not _SUBJECT_NAME.fullmatch(self.raw):
            raise SettingError(
                self.name,
                f"must be letters, digits, _ and -, in parts joined by dots, not "
                f"{_clipped(self.raw)}",
            )
        return self.raw

    def database_url(self) -> str | None:
        """Read as libpq reads it, without connecting; refused in fixed words, never libpq's
        (``missing "=" after …`` quotes the value, password and all)."""
        if not self.raw:
            return None
        url = readable_url(self.raw)  # a Flask app's postgresql+psycopg:// is libpq's too
        if url is None:
            raise SettingError(self.name, URL_SYNTAX)
        return url


_SUBJECT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}")


def _clipped(raw: str) -> str:
    """Quoted, and short enough for one line (a number setting holds no secret)."""
    return repr(raw) if len(raw) <= 24 else repr(raw[:24]) + "…"


@dataclass(frozen=True, slots=True)
class _Environment:
    values: Mapping[str, str]

    def get(self, name: str) -> _Variable:
        return _Variable(name, self.values.get(name))


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    database_url: str | None = None
    home: Path = Path(".payhooks")
    webhook_secrets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """What each gateway's webhook settings hold, by environment variable (``GATEWAYS``)."""
    api_token: str | None = None
    metrics_token: str | None = None
    smtp_url: str | None = None
    mail_from: str = "payhooks@localhost"
    alert_email: str | None = None
    alert_webhook_url: str | None = None
    """Where alerts are posted as chat messages (``payhooks.operations.notifier.Webhook``)."""
    alert_repeat_minutes: int = 60
    """An alert that lasts is said again at most this often."""
    dispute_warning_hours: int = 48
    """A dispute still waiting for the merchant's answer is alerted again this many hours
    before its deadline."""
    retention_days: int = DEFAULT_RETENTION_DAYS
    lock_timeout_ms: int = 2000
    statement_timeout_ms: int = 3000
    transaction_timeout_ms: int = 3500
    pool_timeout_ms: int = 1000
    pool_size: int = 10
    database_pool_mode: PoolMode = PoolMode.SESSION

    api_credentials: tuple[ApiCredentials, ...] = ()
    reconcile_after_s: int = 900
    reconcile_window_s: int = 7 * 24 * 3600
    reconcile_timeout_ms: int = 10_000
    settlement_margin_hours: int = flags.DEFAULT_MARGIN_HOURS
    """Past its gateway's cycle, how long a capture may wait for its payout before it is
    flagged unsettled (``payhooks.settlements.flags``)."""
    refund_double_payments: bool = False
    """The second payment of a paid cart refunded automatically, once (the worker)."""
    capture_authorized: bool = False
    """Razorpay payments authorised and not captured captured once (the worker)."""
    console_timezone: str = CONSOLE_TIMEZONE
    """The zone the console shows times in (an IANA name)."""
    relay_nats_url: str = "nats://127.0.0.1:4222"
    """The NATS server `payhooks relay nats` publishes payment events to (JetStream)."""
    relay_nats_stream: str = "PAYHOOKS"
    """The JetStream stream they are stored in; created (file storage) when there is none."""
    relay_nats_duplicate_window_s: int = 120
    """How long JetStream drops a second message of one id (a stream the relay creates)."""
    relay_rabbitmq_url: str = "amqp://guest:guest@127.0.0.1:5672/"
    """The RabbitMQ broker `payhooks relay rabbitmq` publishes payment events to."""
    relay_rabbitmq_exchange: str = "payhooks"
    """The durable topic exchange they are published to."""
    relay_rabbitmq_queue: str = "payhooks.events"
    """The durable queue the relay declares, bound to every event."""
    relay_subject_prefix: str = "payhooks"
    """Subjects and routing keys are <prefix>.<gateway>.<kind>."""
    relay_batch: int = 100
    """Payment events a relay publishes together, each of another payment."""
    relay_publish_timeout_ms: int = 5000
    """How long a relay waits for the broker's confirm (and to connect)."""
    secret_notes: tuple[str, ...] = ()
    """What start-up should say about the secrets as written (``payhooks serve``, ``worker``)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Every variable read and checked once; ``SettingError`` names the first bad one."""
        env = _Environment(environ)
        settings = cls(
            database_url=env.get("DATABASE_URL").database_url(),
            home=Path(env.get("PAYHOOKS_HOME").text() or _DEFAULT.home),
            webhook_secrets=_webhook_secrets(env),
            api_token=env.get("PAYHOOKS_API_TOKEN").secret(),
            metrics_token=env.get("PAYHOOKS_METRICS_TOKEN").secret(),
            smtp_url=env.get("PAYHOOKS_SMTP_URL").smtp_url(),
            mail_from=env.get("PAYHOOKS_MAIL_FROM").address() or _DEFAULT.mail_from,
            alert_email=env.get("PAYHOOKS_ALERT_EMAIL").address(),
            alert_webhook_url=env.get("PAYHOOKS_ALERT_WEBHOOK_URL").webhook_url(),
            alert_repeat_minutes=env.get("PAYHOOKS_ALERT_REPEAT_MINUTES").integer(
                _DEFAULT.alert_repeat_minutes, maximum=7 * 24 * 60
            ),
            dispute_warning_hours=env.get("PAYHOOKS_DISPUTE_WARNING_HOURS").integer(
                _DEFAULT.dispute_warning_hours, maximum=30 * 24
            ),
            retention_days=_retention_days(env),
            lock_timeout_ms=env.get("PAYHOOKS_LOCK_TIMEOUT_MS").integer(_DEFAULT.lock_timeout_ms),
            statement_timeout_ms=env.get("PAYHOOKS_STATEMENT_TIMEOUT_MS").integer(
                _DEFAULT.statement_timeout_ms
            ),
            transaction_timeout_ms=env.get("PAYHOOKS_TRANSACTION_TIMEOUT_MS").integer(
                _DEFAULT.transaction_timeout_ms
            ),
            pool_timeout_ms=env.get("PAYHOOKS_POOL_TIMEOUT_MS").integer(_DEFAULT.pool_timeout_ms),
            pool_size=env.get("PAYHOOKS_POOL_SIZE").integer(_DEFAULT.pool_size),
            database_pool_mode=env.get("PAYHOOKS_DATABASE_POOL_MODE").pool_mode(),
            api_credentials=_api_credentials(env),
            reconcile_after_s=env.get("PAYHOOKS_RECONCILE_AFTER_S").integer(
                _DEFAULT.reconcile_after_s
            ),
            reconcile_window_s=env.get("PAYHOOKS_RECONCILE_WINDOW_S").integer(
                _DEFAULT.reconcile_window_s
            ),
            reconcile_timeout_ms=env.get("PAYHOOKS_RECONCILE_TIMEOUT_MS").integer(
                _DEFAULT.reconcile_timeout_ms
            ),
            settlement_margin_hours=env.get("PAYHOOKS_SETTLEMENT_MARGIN_HOURS").integer(
                _DEFAULT.settlement_margin_hours, maximum=flags.MARGIN_HOURS[-1]
            ),
            refund_double_payments=env.get("PAYHOOKS_REFUND_DOUBLE_PAYMENTS").switch(),
            capture_authorized=env.get("PAYHOOKS_CAPTURE_AUTHORIZED").switch(),
            console_timezone=env.get("PAYHOOKS_CONSOLE_TIMEZONE").timezone(CONSOLE_TIMEZONE),
            **_relay_settings(env),
            secret_notes=_secret_notes(env),
        )
        settings.check_timeouts()
        settings.check_gateways()
        return settings

    def check_gateways(self) -> None:
        """A gateway with some of its webhook settings and not all (PayU's merchant key
        without its salts) is refused: it would be left silently unserved. So is one its
        adapter refuses (a PhonePe credential without its ``:``), here rather than where a
        server first builds its adapters."""
        for gateway in GATEWAYS.values():
            incomplete = gateway.incomplete(self._found(gateway))
            if incomplete is not None:
                given, missing = incomplete
                raise SettingError(
                    missing.variable, f"is not set while {given.variable} is: {gateway.needs}"
                )
        try:
            self.adapters()
        except RefusedSettings as exc:
            names = " and ".join(secret.variable for secret in exc.secrets)
            raise SettingError(names, f"is refused: {exc.reason}") from None

    def _found(self, gateway: Gateway) -> list[tuple[str, ...]]:
        return [self.webhook_secrets.get(s.variable, ()) for s in gateway.secrets]

    def reconciled(self) -> dict[Provider, ApiCredentials]:
        """The gateways whose status API reconciliation can ask; the others it leaves alone."""
        return {credentials.provider: credentials for credentials in self.api_credentials}

    def unconfirmable(self) -> list[Provider]:
        """Gateways served some of whose deliveries the status API must confirm (PhonePe's and
        Juspay's callbacks, PayU's refund callbacks and second posts) but whose API credentials
        are not set: those would wait, applied never."""
        return [
            provider
            for provider in self.adapters()
            if GATEWAYS[provider].awaiting_api() is not None and provider not in self.reconciled()
        ]

    def reconciliation_off(self) -> list[Provider]:
        """Gateways without API credentials: a webhook that never comes is never recovered."""
        return [provider for provider in Provider if provider not in self.reconciled()]

    def check_timeouts(self) -> None:
        """A lock timeout at or above the statement timeout never fires (PostgreSQL's docs
        call it pointless): a twin in flight would be cut off as a slow statement instead."""
        if self.lock_timeout_ms >= self.statement_timeout_ms:
            raise SettingError(
                "PAYHOOKS_LOCK_TIMEOUT_MS",
                f"({self.lock_timeout_ms}) must be below PAYHOOKS_STATEMENT_TIMEOUT_MS "
                f"({self.statement_timeout_ms}), or the statement timeout always fires first",
            )

    def adapters(self) -> dict[Provider, Adapter]:
        """The providers that have a secret; the others are not served."""
        found: dict[Provider, Adapter] = {}
        for provider, gateway in GATEWAYS.items():
            adapter = gateway.adapter(self._found(gateway))
            if adapter is not None:
                found[provider] = adapter
        return found

    def first_secret(self, variable: str) -> str | None:
        """The current (first) secret a webhook setting holds, as the server reads it."""
        return next(iter(self.webhook_secrets.get(variable, ())), None)


_DEFAULT = Settings()
"""Each setting's default, written once: on its field above."""


def _retention_days(env: _Environment) -> int:
    """The purge's window: never shorter than the gateways' replays (the worker's daily purge
    refuses such a window, and would purge nothing, every day)."""
    try:
        return retention.window_setting(env.values)
    except retention.WindowRefused as exc:
        raise SettingError(exc.name, exc.reason) from None


def _webhook_secrets(env: _Environment) -> dict[str, tuple[str, ...]]:
    """Every gateway's webhook settings: several secrets (``read_secrets``), or one value."""
    found: dict[str, tuple[str, ...]] = {}
    for gateway in GATEWAYS.values():
        for secret in gateway.secrets:
            variable = env.get(secret.variable)
            if secret.several:
                found[secret.variable] = variable.secrets()
            else:
                found[secret.variable] = tuple(filter(None, [variable.secret()]))
    return found


_SECRET_LISTS = tuple(
    secret.variable for gateway in GATEWAYS.values() for secret in gateway.secrets if secret.several
)


def _secret_notes(env: _Environment) -> tuple[str, ...]:
    """A plain value holding a comma is one secret. Earlier versions split it on commas
    (several are now a JSON array): a gateway signing with one of the parts would never
    match, so start-up says how it was read, naming the variable, never the value."""
    return tuple(
        f"{name} is read as one secret holding a comma; to list several, write a JSON array: "
        '["new", "old"]'
        for name in _SECRET_LISTS
        if "," in (raw := env.get(name).raw or "") and not raw.startswith("[")
    )


def _api_credentials(env: _Environment) -> tuple[ApiCredentials, ...]:
    """Each gateway's API id and secret, both or neither (one alone is refused, never
    silently ignored), apart from its webhook secrets: read as a merchant's app reads them
    (``payhooks.gateways.credentials``), once start-up has refused what it refuses besides:
    spaces around either, and a base URL that is no URL even with no credentials to use it."""
    try:
        for gateway in GATEWAYS.values():
            api = gateway.status_api
            env.get(api.id_variable).secret()
            env.get(api.secret_variable).secret()
            api.base_url(env.get(api.url_variable).text() or api.url)
        return tuple(credentials(env.values).values())
    except RefusedSetting as exc:
        raise SettingError(exc.name, exc.reason) from None


def _relay_settings(env: _Environment) -> dict[str, Any]:
    """The relay's settings (``payhooks relay``): its brokers and how it publishes."""
    return {
        "relay_nats_url": env.get("PAYHOOKS_RELAY_NATS_URL").broker_url(
            _DEFAULT.relay_nats_url, ("nats", "tls")
        ),
        "relay_nats_stream": env.get("PAYHOOKS_RELAY_NATS_STREAM").subject_name(
            _DEFAULT.relay_nats_stream
        ),
        "relay_nats_duplicate_window_s": env.get("PAYHOOKS_RELAY_NATS_DUPLICATE_WINDOW_S").integer(
            _DEFAULT.relay_nats_duplicate_window_s, maximum=7 * 24 * 3600
        ),
        "relay_rabbitmq_url": env.get("PAYHOOKS_RELAY_RABBITMQ_URL").broker_url(
            _DEFAULT.relay_rabbitmq_url, ("amqp", "amqps")
        ),
        "relay_rabbitmq_exchange": env.get("PAYHOOKS_RELAY_RABBITMQ_EXCHANGE").subject_name(
            _DEFAULT.relay_rabbitmq_exchange
        ),
        "relay_rabbitmq_queue": env.get("PAYHOOKS_RELAY_RABBITMQ_QUEUE").subject_name(
            _DEFAULT.relay_rabbitmq_queue
        ),
        "relay_subject_prefix": env.get("PAYHOOKS_RELAY_SUBJECT_PREFIX").subject_name(
            _DEFAULT.relay_subject_prefix
        ),
        "relay_batch": env.get("PAYHOOKS_RELAY_BATCH").integer(_DEFAULT.relay_batch, maximum=1000),
        "relay_publish_timeout_ms": env.get("PAYHOOKS_RELAY_PUBLISH_TIMEOUT_MS").integer(
            _DEFAULT.relay_publish_timeout_ms, maximum=600_000
        ),
    }
