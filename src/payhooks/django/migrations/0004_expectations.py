"""The core's SQL file 0005 (what the merchant expects, amount mismatches, reconciliation's
bookkeeping). Its tables are read through the models that declare them, when they do."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0003_merchant_ref_lookup")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
