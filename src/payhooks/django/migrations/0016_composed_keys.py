"""The core's SQL file 0018: a delivery payhooks composes (a ``reconcile:`` key) is one by its
key alone, outside the one-body rule. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0015_payment_identities")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
