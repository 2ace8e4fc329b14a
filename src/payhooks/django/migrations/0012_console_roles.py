"""The core's SQL file 0014: read-only console operators (``payhooks_operators.read_only``)
and the console's action log by time. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0011_refund_checks")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
