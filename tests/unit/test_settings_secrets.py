"""Settings are read unambiguously or refused at start with the variable's name: secret lists
(comma-separated, or a JSON array for secrets holding commas or spaces), whole numbers,
email addresses and the SMTP URL."""

from __future__ import annotations

import json

import pytest

from payhooks.errors import SettingError
from payhooks.events import Provider
from payhooks.service.config import Settings
from payhooks.sim.gateway import Gateway, GatewaySecrets

SECRET_LISTS = {
    "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": "razorpay_secrets",
    "PAYHOOKS_CASHFREE_CLIENT_SECRETS": "cashfree_secrets",
    "PAYHOOKS_PAYU_SALTS": "payu_salts",
}
VARIABLES = sorted(SECRET_LISTS)


def secrets_of(variable: str, value: str) -> tuple[str, ...]:
    """The secrets read from ``value`` (PayU's salts beside a merchant key: it needs both)."""
    env = {variable: value}
    if variable == "PAYHOOKS_PAYU_SALTS" and value:
        env["PAYHOOKS_PAYU_MERCHANT_KEY"] = "gtKFFx"
    settings = Settings.from_env(env)
    found: tuple[str, ...] = getattr(settings, SECRET_LISTS[variable])
    return found


def refusal(variable: str, value: str) -> SettingError:
    with pytest.raises(SettingError) as refused:
        Settings.from_env({variable: value})
    return refused.value


@pytest.mark.parametrize("variable", VARIABLES)
def test_the_comma_separated_form_still_lists_each_secret(variable):
    assert secrets_of(variable, "whsec_new,whsec_old") == ("whsec_new", "whsec_old")


@pytest.mark.parametrize("variable", VARIABLES)
def test_a_json_array_keeps_commas_and_spaces_inside_a_secret(variable):
    value = json.dumps(["se,cret", " padded ", 'quote"d'])
    assert secrets_of(variable, value) == ("se,cret", " padded ", 'quote"d')


@pytest.mark.parametrize("variable", VARIABLES)
def test_unset_or_empty_means_no_secret(variable):
    assert secrets_of(variable, "") == ()


AMBIGUOUS = {
    "a,,b": "empty part",
    "a,b,": "empty part",
    ",a": "empty part",
    "a, b": "spaces around",
    " a": "spaces around",
    "a\t": "spaces around",
}


@pytest.mark.parametrize("variable", VARIABLES)
@pytest.mark.parametrize(("value", "why"), AMBIGUOUS.items())
def test_an_ambiguous_comma_separated_value_is_refused_saying_why(variable, value, why):
    error = refusal(variable, value)
    assert error.variable == variable
    assert why in str(error) and "JSON array" in str(error)


NOT_A_JSON_ARRAY_OF_SECRETS = [
    "[",
    '["a",',
    "[1]",
    '["a", ""]',
    "[]",
    '["a"] extra',
    '[["a"]]',
    "[" * 100_000,
]


@pytest.mark.parametrize("variable", VARIABLES)
@pytest.mark.parametrize("value", NOT_A_JSON_ARRAY_OF_SECRETS)
def test_a_bracketed_value_must_be_a_json_array_of_non_empty_strings(variable, value):
    error = refusal(variable, value)
    assert error.variable == variable
    assert "JSON array of non-empty strings" in str(error)


def test_a_refusal_never_repeats_the_secret():
    error = refusal("PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS", "whsec_topsecret, whsec_other")
    assert "topsecret" not in str(error) and "whsec_other" not in str(error)


def test_a_secret_holding_a_comma_verifies_the_gateway_signature():
    secret = "whsec,with a comma"
    delivery = Gateway(GatewaySecrets(razorpay=secret)).razorpay(
        "payment.captured", payment_id="pay_comma0000001", order_id="order_c", amount_paise=100
    )
    settings = Settings.from_env({"PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": json.dumps([secret])})
    settings.adapters()[Provider.RAZORPAY].verify(delivery.body, delivery.headers)


INTEGERS = [
    "PAYHOOKS_RETENTION_DAYS",
    "PAYHOOKS_LOCK_TIMEOUT_MS",
    "PAYHOOKS_STATEMENT_TIMEOUT_MS",
    "PAYHOOKS_TRANSACTION_TIMEOUT_MS",
    "PAYHOOKS_POOL_TIMEOUT_MS",
    "PAYHOOKS_POOL_SIZE",
]


@pytest.mark.parametrize("variable", INTEGERS)
@pytest.mark.parametrize("value", ["abc", "1.5", "0", "-3"])
def test_a_number_setting_must_be_a_positive_whole_number(variable, value):
    error = refusal(variable, value)
    assert error.variable == variable
    assert "whole number" in str(error) and repr(value) in str(error)


def test_a_number_setting_is_read():
    assert Settings.from_env({"PAYHOOKS_POOL_SIZE": "4"}).pool_size == 4


@pytest.mark.parametrize("variable", ["PAYHOOKS_MAIL_FROM", "PAYHOOKS_ALERT_EMAIL"])
@pytest.mark.parametrize(
    "value", ["x@[y", "a@[", "postmaster,me@example.com", "a;b@c", "ops@example.com ops2@x.org"]
)
def test_an_operator_address_must_be_one_plain_address(variable, value):
    error = refusal(variable, value)
    assert error.variable == variable
    assert "not a usable email address" in str(error)


def test_an_operator_address_is_stored_normalised():
    settings = Settings.from_env(
        {"PAYHOOKS_MAIL_FROM": "Shop@Example.COM", "PAYHOOKS_ALERT_EMAIL": "Ops@Example.COM"}
    )
    assert (settings.mail_from, settings.alert_email) == ("Shop@example.com", "Ops@example.com")


def test_an_operator_address_may_name_an_internal_mail_host():
    assert Settings.from_env({"PAYHOOKS_ALERT_EMAIL": "ops@mailhub"}).alert_email == "ops@mailhub"


@pytest.mark.parametrize("value", ["http://mail.example.com", "smtp://", "smtp://host:port"])
def test_an_smtp_url_that_cannot_be_used_is_refused_at_start(value):
    error = refusal("PAYHOOKS_SMTP_URL", value)
    assert error.variable == "PAYHOOKS_SMTP_URL" and "cannot be used" in str(error)


def test_an_smtp_url_refusal_never_repeats_the_password():
    error = refusal("PAYHOOKS_SMTP_URL", "smtp://user:hunter2@host:port")
    assert "hunter2" not in str(error)


def test_every_refusal_is_one_line():
    errors = [
        refusal("PAYHOOKS_PAYU_SALTS", "a,\nb"),
        refusal("PAYHOOKS_POOL_SIZE", "1\n2"),
        refusal("PAYHOOKS_ALERT_EMAIL", "a@example.com\nBcc: b@example.com"),
    ]
    assert all("\n" not in str(error) for error in errors)


def test_an_smtp_password_smtplib_cannot_send_is_refused_at_start():
    error = refusal("PAYHOOKS_SMTP_URL", "smtp://shop:h%C3%BCnter2@mail.example.com:587")
    assert error.variable == "PAYHOOKS_SMTP_URL" and "ASCII" in str(error)
    assert "nter2" not in str(error)


@pytest.mark.parametrize(
    "variable", ["PAYHOOKS_PAYU_MERCHANT_KEY", "PAYHOOKS_API_TOKEN", "PAYHOOKS_METRICS_TOKEN"]
)
@pytest.mark.parametrize("value", [" gtKFFx", "gtKFFx ", "gtKFFx\n"])
def test_a_single_secret_with_spaces_around_it_is_refused(variable, value):
    error = refusal(variable, value)
    assert error.variable == variable and "spaces around it" in str(error)
    assert "gtKFFx" not in str(error)
