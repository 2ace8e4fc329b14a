"""The core's SQL file 0035: a settlement line keyed by its type as well as its id (two
Cashfree lines of one payout can share an event_id). No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0032_credentials_unkept")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
