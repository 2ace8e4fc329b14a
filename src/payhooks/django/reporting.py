"""Django's error reports without payhooks' secrets::

    DEFAULT_EXCEPTION_REPORTER_FILTER = "payhooks.django.reporting.SafeExceptionReporterFilter"

Django masks a setting whose name says API, AUTH, TOKEN, KEY, SECRET, PASS or SIGNATURE in the
500 email, the DEBUG page and ``get_safe_settings()``. ``PAYHOOKS["PAYU_SALTS"]`` and the
``..._WEBHOOK_CREDENTIALS`` say none of them, and a PayU salt is enough to forge the success
posts payhooks applies. The filter masks a name saying SALT or CREDENTIAL too, in the settings
and in ``request.META`` (where ``runserver`` copies the environment, ``PAYHOOKS_PAYU_SALTS``
with it); ``manage.py check`` warns (``payhooks.W004``) while the filter configured would show
a secret ``PAYHOOKS`` holds, whichever filter it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string
from django.views import debug

from payhooks.django.conf import SECRET_KEYS

FILTER = "payhooks.django.reporting.SafeExceptionReporterFilter"


class SafeExceptionReporterFilter(debug.SafeExceptionReporterFilter):
    """Django's own filter, masking the names it masks and those saying SALT or CREDENTIAL."""

    hidden_settings = re.compile(
        debug.SafeExceptionReporterFilter.hidden_settings.pattern + "|SALT|CREDENTIAL",
        flags=re.IGNORECASE,
    )


def check_reports(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    """``manage.py check``: the secrets ``PAYHOOKS`` holds that Django's error reports would
    show, as the filter configured cleanses the settings."""
    values = getattr(settings, "PAYHOOKS", None)
    if not isinstance(values, Mapping):
        return []
    shown = shown_in_reports(values)
    if not shown:
        return []
    return [
        checks.Warning(
            f"Django's error reports (the 500 email, the DEBUG page) would show PAYHOOKS' "
            f"{', '.join(shown)} in clear: {settings.DEFAULT_EXCEPTION_REPORTER_FILTER} masks "
            "no such name",
            hint=f'DEFAULT_EXCEPTION_REPORTER_FILTER = "{FILTER}" (docs/django.md, "Settings")',
            id="payhooks.W004",
        )
    ]


def shown_in_reports(values: Mapping[str, object]) -> list[str]:
    """The secret keys of ``values`` given a value that the configured filter leaves as it is
    (Django keeps the filter it made first: this one is made again, as configured now)."""
    configured = import_string(settings.DEFAULT_EXCEPTION_REPORTER_FILTER)()
    masked = configured.cleansed_substitute
    cleansed = configured.get_safe_settings().get("PAYHOOKS")
    held = [key for key in SECRET_KEYS if values.get(key)]
    if cleansed == masked:
        return []
    if not isinstance(cleansed, Mapping):
        return held
    return [key for key in held if cleansed.get(key) != masked]


__all__ = ["SafeExceptionReporterFilter", "check_reports"]
