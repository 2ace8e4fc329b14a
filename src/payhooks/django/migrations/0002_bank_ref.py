"""The core's SQL file 0003 (the bank reference, indexed), and the model's new field."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0001_initial")]
    operations: ClassVar[list[Any]] = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(apply_core, keep_core)],
            state_operations=[
                migrations.AddField(
                    model_name="processedwebhook",
                    name="bank_ref",
                    field=models.TextField(
                        blank=True, null=True, verbose_name="bank reference (UTR/RRN)"
                    ),
                )
            ],
        )
    ]
