"""The core's SQL file 0011: a second post naming another payment attempt waits for the
gateway's API (``payhooks_confirmations.first_event_id``). No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0008_confirmations")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
