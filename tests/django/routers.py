"""The database router docs/django.md's "Several databases" writes: payhooks' models and the
shop's orders, which its handlers write in the claim's transaction, on ``payments``."""

from __future__ import annotations

from typing import Any


class PaymentsRouter:
    """payhooks' models, and the shop's orders its handlers write, on "payments"."""

    on_payments = frozenset({"payhooks", "orders"})

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return "payments" if model._meta.app_label in self.on_payments else None

    db_for_write = db_for_read

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return db == "payments" if app_label in self.on_payments else None
