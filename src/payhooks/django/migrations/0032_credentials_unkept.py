"""The core's SQL file 0034: a webhook credential kept with a stored delivery's headers
(PhonePe's Authorization digest) removed. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0031_resolutions")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
