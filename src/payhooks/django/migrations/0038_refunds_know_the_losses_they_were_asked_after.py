"""The core's SQL file 0040: a refund intent keeps what lost disputes had taken back of its
payment when it was asked for, so the sender counts only the losses since. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [
        ("payhooks", "0037_expected_amounts_follow_expectations")
    ]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
