"""The core's SQL file 0020: how many times in a row reconciliation failed on a checkout, and
since when (the reconcile_failing alert). No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0017_refund_cancels")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
