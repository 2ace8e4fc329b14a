"""The core's SQL file 0025: an index of the payment events a broker refused, so a relay passes
over the payments they hold back without reading its whole backlog. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0022_settlements")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
