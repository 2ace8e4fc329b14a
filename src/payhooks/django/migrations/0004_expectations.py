"""The core's SQL file 0005 (what the merchant expects, the payments applied, amount
mismatches, reconciliation's bookkeeping). The model's ``provider`` loses its choices, so a
gateway added to ``payhooks.gateways.GATEWAYS`` needs no migration here."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0003_merchant_ref_lookup")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(apply_core, keep_core),
        migrations.AlterField(
            model_name="processedwebhook", name="provider", field=models.TextField()
        ),
    ]
