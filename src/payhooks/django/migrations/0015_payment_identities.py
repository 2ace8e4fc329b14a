"""The core's SQL file 0017: a payment's identities and what was paid, kept in its record
(``payhooks_payments``) for its refunds. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0014_one_open_mismatch")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
