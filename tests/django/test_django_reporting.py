"""Django's error reports of a project set up as docs/django.md says (the example shop's
settings): the 500 email ``AdminEmailHandler`` sends, the DEBUG page and
``get_safe_settings()`` show no secret payhooks reads, whatever its setting is called (a PayU
salt is enough to forge the success posts payhooks applies)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import TracebackType

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.http import HttpRequest
from django.test import RequestFactory, override_settings
from django.utils.module_loading import import_string
from django.views.debug import (
    ExceptionReporter,
    get_default_exception_reporter_filter,
    technical_500_response,
)

from payhooks.django import reporting
from payhooks.django.views import receive
from payhooks.gateways import GATEWAYS
from tests.django.conftest import EXAMPLE
from tests.factories import GATEWAY, KEYS
from tests.reconcile.conftest import API_KEYS

ENVIRONMENT = {**KEYS.env(), **API_KEYS.env("http://127.0.0.1:9")}
EVERYTHING = {name.removeprefix("PAYHOOKS_"): value for name, value in ENVIRONMENT.items()}
"""Every gateway's webhook secrets and status-API credentials, as the example shop reads them
from the environment."""
SECRET_KEYS = sorted(
    {secret.django_key for found in GATEWAYS.values() for secret in found.secrets if secret.several}
    | {found.status_api.secret_variable.removeprefix("PAYHOOKS_") for found in GATEWAYS.values()}
)  # fmt: skip
"""The settings holding a secret, from the gateways' registry: a gateway added is covered."""
SECRETS = sorted({EVERYTHING[key] for key in SECRET_KEYS})


@pytest.fixture(autouse=True)
def reporter_filter_read_again() -> Iterator[None]:
    """Django keeps the filter it made first for the process's life."""
    get_default_exception_reporter_filter.cache_clear()
    yield
    get_default_exception_reporter_filter.cache_clear()


def test_every_secret_setting_is_masked_in_djangos_safe_settings() -> None:
    with override_settings(PAYHOOKS=EVERYTHING):
        shown = get_default_exception_reporter_filter().get_safe_settings()["PAYHOOKS"]
        masked = get_default_exception_reporter_filter().cleansed_substitute
    assert SECRET_KEYS and [key for key in SECRET_KEYS if shown[key] != masked] == []


Raised = tuple[type[BaseException], BaseException, TracebackType]


def failed_delivery(error: type[Exception] = RuntimeError) -> tuple[HttpRequest, Raised]:
    """A signed delivery the view raised ``error`` on: what Django reports as a 500."""
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_report", order_id="order_report", amount_paise=100
    )
    # runserver copies the environment into each request's META, the shop's secrets with it
    request = RequestFactory(**ENVIRONMENT).post(
        delivery.path, delivery.body, content_type="application/json", headers=delivery.headers
    )
    try:
        receive(request, "razorpay")
    except error:
        kind, raised, traceback = sys.exc_info()
        assert kind is not None and raised is not None and traceback is not None
        return request, (kind, raised, traceback)
    raise AssertionError("the handler did not raise")


def test_a_handlers_error_reported_by_email_or_on_the_debug_page_shows_no_secret(
    django_db: str,
) -> None:
    with override_settings(PAYHOOKS={**EVERYTHING, "HANDLER": "tests.django.handlers.failing"}):
        request, raised = failed_delivery()
        email = ExceptionReporter(request, *raised, is_email=True)
        reports = [email.get_traceback_text(), email.get_traceback_html()]
        with override_settings(DEBUG=True):
            reports.append(technical_500_response(request, *raised).content.decode())
    assert "RuntimeError" in reports[0] and "PAYU_SALTS" in reports[2]
    assert "PAYHOOKS_PAYU_SALTS" in reports[2]  # request.META, masked
    assert [secret for secret in SECRETS if any(secret in report for report in reports)] == []


@pytest.mark.parametrize(
    "changes", [{"LOCK_TIMEOUT_MS": "2000"}, {"PHONEPE_WEBHOOK_CREDENTIALS": ["nocolon"]}]
)
def test_a_setting_refused_while_a_delivery_reads_it_is_no_error_report(
    django_db: str, caplog: pytest.LogCaptureFixture, changes: dict[str, object]
) -> None:
    """Under a server that runs no ``manage.py check`` (gunicorn), a setting refused is met by
    each delivery: answered 503 and logged, never raised into a report (the HTML email shows
    the variables of every frame, the one reading ``PAYHOOKS`` too)."""
    caplog.set_level("WARNING", logger="payhooks.django")
    with override_settings(PAYHOOKS={**EVERYTHING, **changes}):
        request = RequestFactory().post("/webhooks/razorpay", b"{}", "application/json")
        response = receive(request, "razorpay")
    said = response.content.decode() + " ".join(str(r.__dict__) for r in caplog.records)
    assert response.status_code == 503
    assert "is refused" in said or "must be an integer" in said
    assert [secret for secret in SECRETS if secret in said] == []


def test_manage_py_check_warns_when_djangos_error_reports_would_show_a_secret() -> None:
    with (
        override_settings(
            PAYHOOKS=EVERYTHING,
            DEFAULT_EXCEPTION_REPORTER_FILTER="django.views.debug.SafeExceptionReporterFilter",
        ),
        pytest.raises(SystemCheckError, match=r"payhooks\.W004.*PAYU_SALTS") as warned,
    ):
        call_command("check", fail_level="WARNING")
    assert "RAZORPAY_WEBHOOK_SECRETS" not in str(warned.value)  # Django masks that one


def test_manage_py_check_says_nothing_of_the_filter_docs_django_md_names() -> None:
    with override_settings(PAYHOOKS=EVERYTHING):
        call_command("check", fail_level="WARNING")


def test_the_guide_and_the_example_shop_set_payhooks_filter() -> None:
    line = f'DEFAULT_EXCEPTION_REPORTER_FILTER = "{reporting.FILTER}"'
    guide = (EXAMPLE.parents[1] / "docs" / "django.md").read_text()
    assert line in guide.split("## 2. Settings", 1)[1].split("## 3.", 1)[0]
    assert line in (EXAMPLE / "django_shop" / "settings.py").read_text()
    assert import_string(reporting.FILTER) is reporting.SafeExceptionReporterFilter
