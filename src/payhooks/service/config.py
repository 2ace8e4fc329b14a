"""Settings read once from the environment (README, Configuration; docs/operations.md) into
a plain value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from payhooks.errors import InvalidAddress, SettingError
from payhooks.events import Provider
from payhooks.providers import Adapter, read_secrets
from payhooks.providers.cashfree import Cashfree
from payhooks.providers.payu import PayU
from payhooks.providers.razorpay import Razorpay
from payhooks.service.mail import SMTP_URL_SYNTAX, checked_address, smtp_url_problem

PG_INT_MAX = 2_147_483_647
"""The largest value PostgreSQL takes for ``lock_timeout``, ``statement_timeout`` and the like."""

_DATABASE_URL_SYNTAX = (
    "is not a connection string libpq can read: write postgresql://user:password@host:port/"
    "dbname with the password percent-encoded (%40 for @), or key=value pairs with a value "
    "holding spaces quoted (password='a b')"
)


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

    def base_url(self, default: str) -> str:
        """An http(s) URL with a host and nothing after the path (no query, no fragment)."""
        if not self.raw:
            return default
        parts = urlsplit(self.raw)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            raise SettingError(
                self.name,
                f"must be an http:// or https:// URL such as {default}, not {_clipped(self.raw)}",
            )
        return self.raw.rstrip("/")

    def database_url(self) -> str | None:
        """Read as libpq reads it, without connecting; refused in fixed words, never libpq's
        (``missing "=" after …`` quotes the value, password and all)."""
        if not self.raw:
            return None
        try:
            conninfo_to_dict(self.raw)
        except (psycopg.Error, ValueError):
            raise SettingError(self.name, _DATABASE_URL_SYNTAX) from None
        return self.raw


def _clipped(raw: str) -> str:
    """Quoted, and short enough for one line (a number setting holds no secret)."""
    return repr(raw) if len(raw) <= 24 else repr(raw[:24]) + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiCredentials:
    """What reconciliation needs to ask one gateway's status API: an id (Razorpay key id,
    Cashfree client id, PayU merchant key), its secret (key secret, API secret, salt) and the
    base URL (production by default; a sandbox or a local double when overridden)."""

    provider: Provider
    id: str
    secret: str = field(repr=False)
    base_url: str


# Production status APIs (docs/providers.md, "Status APIs used by reconciliation").
API_URLS: Mapping[Provider, str] = {
    Provider.RAZORPAY: "https://api.razorpay.com",
    Provider.CASHFREE: "https://api.cashfree.com",
    Provider.PAYU: "https://info.payu.in",
}
_API_VARIABLES: Mapping[Provider, tuple[str, str, str]] = {
    Provider.RAZORPAY: (
        "PAYHOOKS_RAZORPAY_KEY_ID",
        "PAYHOOKS_RAZORPAY_KEY_SECRET",
        "PAYHOOKS_RAZORPAY_API_URL",
    ),
    Provider.CASHFREE: (
        "PAYHOOKS_CASHFREE_CLIENT_ID",
        "PAYHOOKS_CASHFREE_API_SECRET",
        "PAYHOOKS_CASHFREE_API_URL",
    ),
    Provider.PAYU: ("PAYHOOKS_PAYU_API_KEY", "PAYHOOKS_PAYU_API_SALT", "PAYHOOKS_PAYU_API_URL"),
}


@dataclass(frozen=True, slots=True)
class _Environment:
    values: Mapping[str, str]

    def get(self, name: str) -> _Variable:
        return _Variable(name, self.values.get(name))


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    database_url: str | None = None
    home: Path = Path(".payhooks")
    razorpay_secrets: tuple[str, ...] = ()
    cashfree_secrets: tuple[str, ...] = ()
    payu_merchant_key: str | None = None
    payu_salts: tuple[str, ...] = ()
    api_token: str | None = None
    metrics_token: str | None = None
    smtp_url: str | None = None
    mail_from: str = "payhooks@localhost"
    alert_email: str | None = None
    retention_days: int = 90
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
    secret_notes: tuple[str, ...] = ()
    """What start-up should say about the secrets as written (``payhooks serve``, ``worker``)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Every variable read and checked once; ``SettingError`` names the first bad one."""
        env = _Environment(environ)
        settings = cls(
            database_url=env.get("DATABASE_URL").database_url(),
            home=Path(env.get("PAYHOOKS_HOME").text() or ".payhooks"),
            razorpay_secrets=env.get("PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS").secrets(),
            cashfree_secrets=env.get("PAYHOOKS_CASHFREE_CLIENT_SECRETS").secrets(),
            payu_merchant_key=env.get("PAYHOOKS_PAYU_MERCHANT_KEY").secret(),
            payu_salts=env.get("PAYHOOKS_PAYU_SALTS").secrets(),
            api_token=env.get("PAYHOOKS_API_TOKEN").secret(),
            metrics_token=env.get("PAYHOOKS_METRICS_TOKEN").secret(),
            smtp_url=env.get("PAYHOOKS_SMTP_URL").smtp_url(),
            mail_from=env.get("PAYHOOKS_MAIL_FROM").address() or "payhooks@localhost",
            alert_email=env.get("PAYHOOKS_ALERT_EMAIL").address(),
            retention_days=env.get("PAYHOOKS_RETENTION_DAYS").integer(90),
            lock_timeout_ms=env.get("PAYHOOKS_LOCK_TIMEOUT_MS").integer(2000),
            statement_timeout_ms=env.get("PAYHOOKS_STATEMENT_TIMEOUT_MS").integer(3000),
            transaction_timeout_ms=env.get("PAYHOOKS_TRANSACTION_TIMEOUT_MS").integer(3500),
            pool_timeout_ms=env.get("PAYHOOKS_POOL_TIMEOUT_MS").integer(1000),
            pool_size=env.get("PAYHOOKS_POOL_SIZE").integer(10),
            database_pool_mode=env.get("PAYHOOKS_DATABASE_POOL_MODE").pool_mode(),
            api_credentials=_api_credentials(env),
            reconcile_after_s=env.get("PAYHOOKS_RECONCILE_AFTER_S").integer(900),
            reconcile_window_s=env.get("PAYHOOKS_RECONCILE_WINDOW_S").integer(7 * 24 * 3600),
            reconcile_timeout_ms=env.get("PAYHOOKS_RECONCILE_TIMEOUT_MS").integer(10_000),
            secret_notes=_secret_notes(env),
        )
        settings.check_timeouts()
        settings.check_payu()
        return settings

    def check_payu(self) -> None:
        """PayU needs both: one without the other would leave it silently unserved."""
        if bool(self.payu_merchant_key) != bool(self.payu_salts):
            given, missing = (
                ("PAYHOOKS_PAYU_MERCHANT_KEY", "PAYHOOKS_PAYU_SALTS")
                if self.payu_merchant_key
                else ("PAYHOOKS_PAYU_SALTS", "PAYHOOKS_PAYU_MERCHANT_KEY")
            )
            raise SettingError(missing, f"is not set while {given} is: PayU needs both")

    def reconciled(self) -> dict[Provider, ApiCredentials]:
        """The gateways whose status API reconciliation can ask; the others it leaves alone."""
        return {credentials.provider: credentials for credentials in self.api_credentials}

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
        if self.razorpay_secrets:
            found[Provider.RAZORPAY] = Razorpay(secrets=self.razorpay_secrets)
        if self.cashfree_secrets:
            found[Provider.CASHFREE] = Cashfree(secrets=self.cashfree_secrets)
        if self.payu_merchant_key and self.payu_salts:
            found[Provider.PAYU] = PayU(merchant_key=self.payu_merchant_key, salts=self.payu_salts)
        return found


_SECRET_LISTS = (
    "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS",
    "PAYHOOKS_CASHFREE_CLIENT_SECRETS",
    "PAYHOOKS_PAYU_SALTS",
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
    silently ignored), apart from its webhook secrets."""
    found: list[ApiCredentials] = []
    for provider, (id_name, secret_name, url_name) in _API_VARIABLES.items():
        ident, secret = env.get(id_name).secret(), env.get(secret_name).secret()
        base_url = env.get(url_name).base_url(API_URLS[provider])
        if bool(ident) != bool(secret):
            given, missing = (id_name, secret_name) if ident else (secret_name, id_name)
            raise SettingError(missing, f"is not set while {given} is: both are needed")
        if ident and secret:
            found.append(
                ApiCredentials(provider=provider, id=ident, secret=secret, base_url=base_url)
            )
    return tuple(found)
