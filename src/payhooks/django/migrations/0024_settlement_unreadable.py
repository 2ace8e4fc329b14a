"""The core's SQL file 0026: the settlement report lines payhooks cannot read
(``payhooks_settlement_unreadable``), kept for a person while the rest of the report is
recorded. No model changes: the admin reads them through ``payhooks.settlements.listing``."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0023_relay_refused")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
