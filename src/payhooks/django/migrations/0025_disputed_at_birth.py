"""The core's SQL file 0027: a payment's record is born with what its lost disputes took back
(a trigger on ``payhooks_payments``, which takes the payment's turn, ``payhooks_lock_payment``,
as a dispute's report does), and the records written without it corrected. No model
changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0024_settlement_unreadable")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
