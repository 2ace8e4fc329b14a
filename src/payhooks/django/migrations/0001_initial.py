"""The core's table (its SQL files 0001 and 0002), and the model Django reads it through.

The database side is ``payhooks.migrate`` (``schema.apply_core``): it applies only what
``payhooks_migrations`` does not record yet, so a database that already has the table is
adopted. The state side is the model. A later core SQL file comes with a migration here of the
same shape: ``apply_core`` again, and the model's change as state.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models

from payhooks.django.schema import apply_core, keep_core

PROVIDERS = [("razorpay", "razorpay"), ("cashfree", "cashfree"), ("payu", "payu")]
OUTCOMES = [("processed", "processed"), ("ignored", "ignored"), ("parked", "parked")]

processed_webhook = migrations.CreateModel(
    name="ProcessedWebhook",
    fields=[
        ("provider", models.TextField(choices=PROVIDERS)),
        (
            "event_id",
            models.TextField(primary_key=True, serialize=False, verbose_name="delivery key"),
        ),
        ("event_type", models.TextField()),
        ("outcome", models.TextField(choices=OUTCOMES)),
        ("payment_id", models.TextField(blank=True, null=True)),
        ("merchant_ref", models.TextField(blank=True, null=True, verbose_name="gateway order id")),
        ("order_ref", models.TextField(blank=True, null=True, verbose_name="order")),
        ("processed_at", models.DateTimeField(verbose_name="received or applied at")),
        ("payload_sha256", models.TextField()),
        ("body", models.BinaryField()),
        ("headers", models.JSONField(default=dict)),
        ("mismatches", models.IntegerField(default=0)),
        ("last_mismatch_at", models.DateTimeField(blank=True, null=True)),
        ("first_copy", models.BooleanField(default=True)),
    ],
    options={
        "verbose_name": "webhook delivery",
        "verbose_name_plural": "webhook deliveries",
        "db_table": "processed_webhooks",
        "permissions": (("replay_processedwebhook", "Can replay a stored delivery"),),
        "default_permissions": ("view",),
        "constraints": [
            models.UniqueConstraint(fields=("provider", "event_id"), name="processed_webhooks_pkey")
        ],
    },
)


class Migration(migrations.Migration):
    initial = True
    dependencies: ClassVar[list[tuple[str, str]]] = []
    operations: ClassVar[list[Any]] = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(apply_core, keep_core)],
            state_operations=[processed_webhook],
        )
    ]
