"""The core's SQL file 0043: a gateway order's refunds found through an index, for the order's
story past the purge of its payment's record. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0040_attempt_reports")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
