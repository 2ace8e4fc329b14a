"""The core's SQL file 0021: one outbound queue (``payhooks_outbox``) for every email, alert
and chat notice; the alert notices queued before it move there. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0018_reconcile_failures")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
