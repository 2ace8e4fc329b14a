"""The core's SQL file 0004 (deliveries found by the reference they name, indexed). The model
declares no indexes of the core's (only its key), so its state does not change."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0002_bank_ref")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
