"""The core's SQL file 0032: where each gateway's days of its settlement report read whole
begin (``payhooks_settlement_reads.read_from``), so the review flags no capture of a day
before the first one read. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0029_settlement_reads")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
