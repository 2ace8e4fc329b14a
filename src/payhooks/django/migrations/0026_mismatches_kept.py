"""The core's SQL file 0028: an amount mismatch no longer references its delivery ON DELETE
CASCADE, so the purge of the delivery leaves it (the only record of a payment settled by hand);
two indexes find it by order and by payment. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0025_disputed_at_birth")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
