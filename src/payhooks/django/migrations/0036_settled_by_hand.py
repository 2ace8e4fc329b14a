"""The core's SQL file 0038: an amount mismatch says whether a person settled it by hand
(``settled_by_hand``), so a later delivery of its payment under another key is recorded
ignored, never parked again; a payment parked again before it is settled as a copy. No model
changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [
        ("payhooks", "0035_references_follow_expectations")
    ]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
