"""The alert settings, checked at start: a chat webhook URL that can be posted to (refused
without quoting it: it holds the chat's secret), and a repeat interval in minutes."""

from __future__ import annotations

import pytest

from payhooks.service.alerting import Email, channels
from payhooks.service.config import Settings
from tests.unit.test_settings_secrets import refusal


def test_a_chat_webhook_url_is_read_as_written():
    url = "https://hooks.slack.com/services/T0/B0/abc"
    assert Settings.from_env({"PAYHOOKS_ALERT_WEBHOOK_URL": url}).alert_webhook_url == url


@pytest.mark.parametrize(
    "value",
    ["hooks.slack.com/services/T0/B0/tok3n", "ftp://x/tok3n", "https:///tok3n", "mailto:tok3n"],
)
def test_a_chat_webhook_url_that_cannot_be_posted_to_is_refused_unquoted(value):
    error = refusal("PAYHOOKS_ALERT_WEBHOOK_URL", value)
    assert error.variable == "PAYHOOKS_ALERT_WEBHOOK_URL"
    assert "http:// or https:// URL" in str(error) and "tok3n" not in str(error)


def test_a_chat_webhook_url_with_spaces_is_refused_unquoted():
    error = refusal("PAYHOOKS_ALERT_WEBHOOK_URL", " https://chat.example.com/tok3n")
    assert "spaces" in str(error) and "tok3n" not in str(error)


def test_the_repeat_interval_defaults_to_an_hour_and_is_read_in_minutes():
    assert Settings.from_env({}).alert_repeat_minutes == 60
    assert Settings.from_env({"PAYHOOKS_ALERT_REPEAT_MINUTES": "15"}).alert_repeat_minutes == 15


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "10m", "10081"])
def test_a_repeat_interval_that_is_not_a_number_of_minutes_up_to_a_week_is_refused(value):
    error = refusal("PAYHOOKS_ALERT_REPEAT_MINUTES", value)
    assert error.variable == "PAYHOOKS_ALERT_REPEAT_MINUTES"


def test_email_alerts_need_both_an_smtp_server_and_an_address():
    assert channels(Settings.from_env({"PAYHOOKS_ALERT_EMAIL": "ops@example.com"})) == []
    both = Settings.from_env(
        {"PAYHOOKS_ALERT_EMAIL": "ops@example.com", "PAYHOOKS_SMTP_URL": "smtp://mail:25"}
    )
    [email] = channels(both)
    assert isinstance(email, Email) and email.recipient == "ops@example.com"
