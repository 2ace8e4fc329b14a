"""The core's SQL file 0042: a failed or pending attempt is claimed by the attempt and its kind,
so its webhook and reconciliation's report of it reach the handlers once. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0039_refunds_name_their_order")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
