"""The core's SQL file 0015: alerts sent once to email and chat (``payhooks_alerts``,
``payhooks_alert_notices``). No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0012_console_roles")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
