"""The core's SQL file 0039: a payment's record keeps the amount its order's expectation names
now, for the records written before an expectation recorded or corrected after them. No model
changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0036_settled_by_hand")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
