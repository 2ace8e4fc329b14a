"""The core's SQL file 0036: a payment's record keeps the merchant's reference, the order the
handler answered and the bank reference (three columns, backfilled from what is still stored,
and their indexes), so the timeline's search finds it by them after the purge. No model
changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0033_settlement_line_types")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
