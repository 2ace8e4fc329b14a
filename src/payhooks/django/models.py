"""The core's delivery records (``processed_webhooks``) and disputes (``payhooks_disputes``) as
Django models, to read.

The deliveries' key is ``(provider, event_id)``, the disputes' ``(provider, dispute_id)``.
Django before 5.2 cannot declare a composite key, and 5.2's admin refuses a model that has one,
so each model names its id as its primary key and declares the real key as a unique
constraint. That is only true while no two gateways share an id, so the models are read-only:
rows are written by the claim alone, and the admin and the commands look rows up by provider
and id together (docs/django.md).
"""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

from django.db import models

from payhooks.events import Provider
from payhooks.plumbing.errors import ReadOnlyRecord

PROVIDERS = [(p.value, p.value) for p in Provider]


def keyed_by_provider(table: str, id_field: str) -> tuple[models.UniqueConstraint]:
    """The table's real key, ``(provider, id_field)``, declared as a unique constraint under
    the name of the primary key it is in PostgreSQL (see above)."""
    return (models.UniqueConstraint(fields=("provider", id_field), name=f"{table}_pkey"),)


class CoreRecord(models.Model):
    """A row the core's claim writes, read through the ORM: saving or deleting one is refused
    (``ReadOnlyRecord``), and viewing is the one permission Django makes for it."""

    records: ClassVar[str]
    """What the rows are, as a refused save names them."""
    not_deleted: ClassVar[str]
    """Why a delete is refused: how the rows leave, if they ever do."""

    class Meta:
        abstract = True
        default_permissions = ("view",)

    def save(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ReadOnlyRecord(f"{self.records} are written by payhooks' claim, never by the ORM")

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ReadOnlyRecord(self.not_deleted)


class ProcessedWebhook(CoreRecord):
    # No choices: the gateways are payhooks.gateways.GATEWAYS, and a gateway added there must
    # not need a migration here (the admin and the commands list PROVIDERS themselves).
    provider = models.TextField()
    event_id = models.TextField(primary_key=True, verbose_name="delivery key")
    event_type = models.TextField()
    outcome = models.TextField()  # no choices: an outcome the core adds needs no migration
    payment_id = models.TextField(null=True, blank=True)
    merchant_ref = models.TextField(null=True, blank=True, verbose_name="gateway order id")
    bank_ref = models.TextField(null=True, blank=True, verbose_name="bank reference (UTR/RRN)")
    order_ref = models.TextField(null=True, blank=True, verbose_name="order")
    processed_at = models.DateTimeField(verbose_name="received or applied at")
    payload_sha256 = models.TextField()
    body = models.BinaryField()
    headers = models.JSONField(default=dict)
    mismatches = models.IntegerField(default=0)
    last_mismatch_at = models.DateTimeField(null=True, blank=True)
    first_copy = models.BooleanField(default=True)

    records = "delivery records"
    not_deleted = "delivery records leave by `manage.py payhooks_purge`, not the ORM"

    class Meta(CoreRecord.Meta):
        db_table = "processed_webhooks"
        verbose_name = "webhook delivery"
        verbose_name_plural = "webhook deliveries"
        constraints = keyed_by_provider("processed_webhooks", "event_id")
        permissions = (("replay_processedwebhook", "Can replay a stored delivery"),)

    def __str__(self) -> str:
        return f"{self.provider} {self.event_id}"


class Dispute(CoreRecord):
    """A dispute as the core holds it (``payhooks.intake.disputes``): the state its newest
    report in order put it in. Keyed by ``(provider, dispute_id)`` like the deliveries are by
    their key (see above), and read-only: the claim writes it, once and only forward."""

    provider = models.TextField()
    dispute_id = models.TextField(primary_key=True, verbose_name="dispute id")
    payment_id = models.TextField(null=True, blank=True)
    gateway_order_id = models.TextField(null=True, blank=True)
    status = models.TextField()  # opened, under_review, action_required, won, lost, closed
    status_rank = models.SmallIntegerField()
    phase = models.TextField(null=True, blank=True)
    phase_rank = models.SmallIntegerField()
    gateway_status = models.TextField(null=True, blank=True, verbose_name="the gateway's word")
    amount_paise = models.BigIntegerField(null=True, blank=True)
    currency = models.TextField(null=True, blank=True)
    reason = models.TextField(null=True, blank=True)
    respond_by = models.DateTimeField(null=True, blank=True)
    reported_at = models.DateTimeField(null=True, blank=True)
    lost_paise = models.BigIntegerField(default=0, verbose_name="taken back (paise)")
    event_id = models.TextField(verbose_name="delivery key")
    opened_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True, verbose_name="decided at")

    records = "disputes"
    not_deleted = "disputes are kept: what a lost one took back is money"

    class Meta(CoreRecord.Meta):
        db_table = "payhooks_disputes"
        verbose_name = "dispute"
        verbose_name_plural = "disputes"
        constraints = keyed_by_provider("payhooks_disputes", "dispute_id")

    def __str__(self) -> str:
        return f"{self.provider} dispute {self.dispute_id}"
