"""The core's SQL file 0033: a parked delivery settled by a person, whatever it was parked for
(``payhooks_resolutions``, the person's words). No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0030_settlement_read_from")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
