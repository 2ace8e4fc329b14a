"""The core's SQL file 0022: payment events queued for a broker's relay (``payhooks_outbox``
rows of kind ``event``) and the channels a relay runs for (``payhooks_relay_channels``). No
model changes."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from payhooks.django.schema import apply_core, keep_core


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0019_outbox")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(apply_core, keep_core)]
