"""The core's SQL file 0019: refund intents a person can cancel, and the row each payment's
refunds are counted under (``payhooks_refund_payments``). No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0016_composed_keys")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
