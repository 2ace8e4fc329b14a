"""The core's SQL file 0029: a payment's record keeps what its order was expected to be paid
(two columns and a trigger that copies them from the expectation), so the payments list shows
it after the purge takes the expectation. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0026_mismatches_kept")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
