"""The core's SQL file 0009: a line of the delivery log says how many requests it stands for
(``repeats``: a minute's refusals of one kind past the first few are one line), and the admin's
"Webhook health" counts them. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0006_console_and_reconcile_due")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
