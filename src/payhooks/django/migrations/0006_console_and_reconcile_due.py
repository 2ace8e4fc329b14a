"""The core's SQL files 0007 (the console's operators and sessions, for ``payhooks console`` on
the same database; the admin keeps Django's own users) and 0008 (reconciliation enrols each
expectation once and reads about what it leases). No model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0005_deliveries")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
