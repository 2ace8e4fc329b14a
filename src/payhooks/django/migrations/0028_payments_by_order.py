"""The core's SQL file 0030: a payment's record found by its gateway order (an index), so an
order's timeline and the console's search find a payment whose deliveries were purged. No
model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0027_expected_kept")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
