"""The Django app: ``INSTALLED_APPS += ["payhooks.django"]``."""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks
from django.utils.module_loading import autodiscover_modules

from payhooks.django.conf import check_settings
from payhooks.django.reporting import check_reports


class PayhooksConfig(AppConfig):
    name = "payhooks.django"
    label = "payhooks"  # the last part of the name, "django", would read as Django's own
    verbose_name = "Payment webhooks"

    def ready(self) -> None:
        checks.register(check_settings)
        checks.register(check_reports, checks.Tags.security)
        autodiscover_modules("webhooks")
