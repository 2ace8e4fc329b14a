"""The core's SQL file 0012: refund intents sent to the gateway exactly once
(``payhooks_refunds``). No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0009_another_attempt")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
