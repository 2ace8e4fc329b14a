"""The shop's own orders: created at checkout, with the gateway's order id as reference."""

from django.db import models


class Order(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        PAID = "paid"

    reference = models.CharField(max_length=64, unique=True, help_text="the gateway's order id")
    amount_paise = models.BigIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    payment_id = models.CharField(max_length=64, blank=True, default="")
    paid_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.reference
