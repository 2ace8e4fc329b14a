"""The core's SQL file 0024: settlements (``payhooks_settlements``,
``payhooks_settlement_lines``) and the captures not settled in time (``payhooks_unsettled``).
No model changes: the admin reads them through ``payhooks.settlements.listing``."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0021_disputes")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
