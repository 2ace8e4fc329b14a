"""Settings read once from the environment (DESIGN.md section 5) into a plain value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from payhooks.events import Provider
from payhooks.providers import Adapter
from payhooks.providers.cashfree import Cashfree
from payhooks.providers.payu import PayU
from payhooks.providers.razorpay import Razorpay


def _list(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    database_url: str | None = None
    home: Path = Path(".payhooks")
    razorpay_secrets: tuple[str, ...] = ()
    cashfree_secrets: tuple[str, ...] = ()
    payu_merchant_key: str | None = None
    payu_salts: tuple[str, ...] = ()
    api_token: str | None = None
    smtp_url: str | None = None
    mail_from: str = "payhooks@localhost"
    alert_email: str | None = None
    retention_days: int = 90
    lock_timeout_ms: int = 2000
    statement_timeout_ms: int = 3000
    transaction_timeout_ms: int = 3500
    pool_timeout_ms: int = 1000
    pool_size: int = 10

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        return cls(
            database_url=env.get("DATABASE_URL") or None,
            home=Path(env.get("PAYHOOKS_HOME") or ".payhooks"),
            razorpay_secrets=_list(env.get("PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS")),
            cashfree_secrets=_list(env.get("PAYHOOKS_CASHFREE_CLIENT_SECRETS")),
            payu_merchant_key=env.get("PAYHOOKS_PAYU_MERCHANT_KEY") or None,
            payu_salts=_list(env.get("PAYHOOKS_PAYU_SALTS")),
            api_token=env.get("PAYHOOKS_API_TOKEN") or None,
            smtp_url=env.get("PAYHOOKS_SMTP_URL") or None,
            mail_from=env.get("PAYHOOKS_MAIL_FROM") or "payhooks@localhost",
            alert_email=env.get("PAYHOOKS_ALERT_EMAIL") or None,
            retention_days=int(env.get("PAYHOOKS_RETENTION_DAYS") or 90),
            lock_timeout_ms=int(env.get("PAYHOOKS_LOCK_TIMEOUT_MS") or 2000),
            statement_timeout_ms=int(env.get("PAYHOOKS_STATEMENT_TIMEOUT_MS") or 3000),
            transaction_timeout_ms=int(env.get("PAYHOOKS_TRANSACTION_TIMEOUT_MS") or 3500),
            pool_timeout_ms=int(env.get("PAYHOOKS_POOL_TIMEOUT_MS") or 1000),
            pool_size=int(env.get("PAYHOOKS_POOL_SIZE") or 10),
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
