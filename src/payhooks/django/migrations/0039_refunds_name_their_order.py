"""The core's SQL file 0041: a refund intent written naming no order takes it from payhooks'
record of its payment. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [
        ("payhooks", "0038_refunds_know_the_losses_they_were_asked_after")
    ]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
