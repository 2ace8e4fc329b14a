"""The core's SQL file 0023: disputes (``payhooks_disputes``), recorded once and only forward,
and what lost ones took back on the payment's record; the model Django reads them through."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models

from payhooks.django.schema import apply_core, keep_core

dispute = migrations.CreateModel(
    name="Dispute",
    fields=[
        ("provider", models.TextField()),
        (
            "dispute_id",
            models.TextField(primary_key=True, serialize=False, verbose_name="dispute id"),
        ),
        ("payment_id", models.TextField(blank=True, null=True)),
        ("gateway_order_id", models.TextField(blank=True, null=True)),
        ("status", models.TextField()),
        ("status_rank", models.SmallIntegerField()),
        ("phase", models.TextField(blank=True, null=True)),
        ("phase_rank", models.SmallIntegerField()),
        (
            "gateway_status",
            models.TextField(blank=True, null=True, verbose_name="the gateway's word"),
        ),
        ("amount_paise", models.BigIntegerField(blank=True, null=True)),
        ("currency", models.TextField(blank=True, null=True)),
        ("reason", models.TextField(blank=True, null=True)),
        ("respond_by", models.DateTimeField(blank=True, null=True)),
        ("reported_at", models.DateTimeField(blank=True, null=True)),
        ("lost_paise", models.BigIntegerField(default=0, verbose_name="taken back (paise)")),
        ("event_id", models.TextField(verbose_name="delivery key")),
        ("opened_at", models.DateTimeField()),
        ("updated_at", models.DateTimeField()),
        ("closed_at", models.DateTimeField(blank=True, null=True, verbose_name="decided at")),
    ],
    options={
        "verbose_name": "dispute",
        "verbose_name_plural": "disputes",
        "db_table": "payhooks_disputes",
        "default_permissions": ("view",),
        "constraints": [
            models.UniqueConstraint(
                fields=("provider", "dispute_id"), name="payhooks_disputes_pkey"
            )
        ],
    },
)


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("payhooks", "0020_relay")]
    operations: ClassVar[list[Any]] = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(apply_core, keep_core)],
            state_operations=[dispute],
        )
    ]
