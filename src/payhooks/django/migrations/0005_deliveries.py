"""The core's SQL file 0006: the delivery log (``payhooks_deliveries``) the webhook view writes
and the admin's "Webhook health" reads. No model: it is a log, read through ``payhooks.health``."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0004_expectations")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
