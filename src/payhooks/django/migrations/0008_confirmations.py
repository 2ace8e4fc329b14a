"""The core's SQL file 0010: callbacks resting on a static credential wait for the gateway's
API (``payhooks_confirmations``), their records ``confirming``, then ``confirmed`` or
``refuted``. The model's ``outcome`` loses its choices, so an outcome the core adds needs no
migration here (the admin filters on the values the table holds)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0007_delivery_repeats")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(apply_core, keep_core),
        migrations.AlterField(
            model_name="processedwebhook", name="outcome", field=models.TextField()
        ),
    ]
