"""The core's SQL file 0031: how far each gateway's settlement report was read whole
(``payhooks_settlement_reads``), so the worker fetches the days it missed and the review
flags only captures whose cycle lies on days read. No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0028_payments_by_order")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
