"""Settings are read unambiguously or refused at start with the variable's name: secrets (one
exactly as written, or several as a JSON array), whole numbers, email addresses and the SMTP
URL."""

from __future__ import annotations

import json

import pytest

from payhooks.events import Provider
from payhooks.gateways import secrets_value
from payhooks.service.config import Settings
from payhooks.service.errors import SettingError
from payhooks.sim.gateway import Gateway, GatewaySecrets

VARIABLES = [
    "PAYHOOKS_CASHFREE_CLIENT_SECRETS",
    "PAYHOOKS_PAYU_SALTS",
    "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS",
]


def secrets_of(variable: str, value: str) -> tuple[str, ...]:
    """The secrets read from ``value`` (PayU's salts beside a merchant key: it needs both)."""
    env = {variable: value}
    if variable == "PAYHOOKS_PAYU_SALTS" and value:
        env["PAYHOOKS_PAYU_MERCHANT_KEY"] = "gtKFFx"
    return Settings.from_env(env).webhook_secrets[variable]


def refusal(variable: str, value: str) -> SettingError:
    with pytest.raises(SettingError) as refused:
        Settings.from_env({variable: value})
    return refused.value


@pytest.mark.parametrize("variable", VARIABLES)
@pytest.mark.parametrize(
    "secret", ["Xk9,pQ2#mZ", "whsec_new,whsec_old", "a,,b", "a, b", ",", "]x[", 'quo"te', "ab\\c"]
)
def test_a_plain_value_is_one_secret_exactly_as_written(variable, secret):
    """Gateways let merchants choose any characters: a comma is part of the secret."""
    assert secrets_of(variable, secret) == (secret,)


@pytest.mark.parametrize("variable", VARIABLES)
def test_a_json_array_lists_several_secrets(variable):
    assert secrets_of(variable, '["whsec_new", "whsec_old"]') == ("whsec_new", "whsec_old")


@pytest.mark.parametrize("variable", VARIABLES)
def test_a_json_array_keeps_commas_and_spaces_inside_a_secret(variable):
    value = json.dumps(["se,cret", " padded ", 'quote"d', "[bracketed"])
    assert secrets_of(variable, value) == ("se,cret", " padded ", 'quote"d', "[bracketed")


@pytest.mark.parametrize("variable", VARIABLES)
def test_unset_or_empty_means_no_secret(variable):
    assert secrets_of(variable, "") == ()


@pytest.mark.parametrize("variable", VARIABLES)
@pytest.mark.parametrize("value", [" a", "a\t", "a,b ", "\na"])
def test_a_plain_secret_with_spaces_around_it_is_refused_saying_how_to_keep_them(variable, value):
    error = refusal(variable, value)
    assert error.variable == variable
    assert "spaces around it" in str(error) and "JSON array" in str(error)


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


@pytest.mark.parametrize("variable", VARIABLES)
@pytest.mark.parametrize(
    "value", ['["\\ud800"]', '["a\\u0000b"]', "whsec\x07bell", "whsec\udcffbytes", '["ok", "\\n"]']
)
def test_a_secret_that_is_not_plain_text_is_refused_at_start(variable, value):
    """A control character or a lone surrogate (how Python reads an environment value that is
    not UTF-8) could never verify a signature: every delivery would fail instead."""
    error = refusal(variable, value)
    assert error.variable == variable
    assert "control character or a lone surrogate" in str(error)


@pytest.mark.parametrize("variable", VARIABLES)
@pytest.mark.parametrize("value", [' ["a", "b"]', '["a", "b"] ', '\n["a", "b"]\n'])
def test_spaces_around_a_json_array_are_not_part_of_it(variable, value):
    assert secrets_of(variable, value) == ("a", "b")


@pytest.mark.parametrize(
    "value", ["whsec_topsecret, whsec_other ", '["whsec_topsecret", whsec_other]']
)
def test_a_refusal_never_repeats_the_secret(value):
    error = refusal("PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS", value)
    assert "topsecret" not in str(error) and "whsec_other" not in str(error)


@pytest.mark.parametrize("written", ["plain", "in a JSON array"])
def test_a_secret_holding_a_comma_verifies_the_gateway_signature(written):
    secret = "Xk9,pQ2#mZ"
    delivery = Gateway(GatewaySecrets(razorpay=secret)).razorpay(
        "payment.captured", payment_id="pay_comma0000001", order_id="order_c", amount_paise=100
    )
    value = secret if written == "plain" else json.dumps(["whsec_new", secret])
    settings = Settings.from_env({"PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": value})
    settings.adapters()[Provider.RAZORPAY].verify(delivery.body, delivery.headers)


@pytest.mark.parametrize(
    "secrets",
    [("plain",), ("Xk9,pQ2#mZ",), ("[starts-with-a-bracket",), (" padded ",), ("new", "old")],
)
def test_the_value_written_for_secrets_reads_back_as_them(secrets):
    value = secrets_value(*secrets)
    assert secrets_of("PAYHOOKS_CASHFREE_CLIENT_SECRETS", value) == secrets


def test_the_simulated_gateway_environment_reads_back_as_its_secrets():
    keys = GatewaySecrets(razorpay="[odd", cashfree="a,b", payu_salt=" s ")
    settings = Settings.from_env(keys.env())
    assert settings.webhook_secrets == {
        "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": ("[odd",),
        "PAYHOOKS_CASHFREE_CLIENT_SECRETS": ("a,b",),
        "PAYHOOKS_PAYU_MERCHANT_KEY": (keys.payu_key,),
        "PAYHOOKS_PAYU_SALTS": (" s ",),
        "PAYHOOKS_PHONEPE_WEBHOOK_CREDENTIALS": (keys.phonepe,),
        "PAYHOOKS_JUSPAY_WEBHOOK_CREDENTIALS": (keys.juspay,),
    }


@pytest.mark.parametrize(
    ("env", "warned"),
    [
        ({"PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": "whsec_new,whsec_old"}, True),
        ({"PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": '["whsec_new", "whsec_old"]'}, False),
        ({"PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": '["Xk9,pQ2#mZ"]'}, False),
        ({"PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": "whsec_one"}, False),
    ],
)
def test_a_plain_secret_holding_a_comma_is_noted_as_one_secret(env, warned):
    """A value written as a list the old way now reads as one secret: said at start."""
    notes = Settings.from_env(env).secret_notes
    assert bool(notes) is warned
    assert all(
        "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS" in note and "JSON array" in note for note in notes
    )
    assert all("whsec" not in note for note in notes)


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


@pytest.mark.parametrize("value", ["1", "5", "14"])
def test_a_retention_window_shorter_than_the_gateways_replays_is_refused_at_start(value):
    """The worker's daily purge refuses such a window (``purge_refused``) and so purged
    nothing, every day, unsaid: refused at start, naming the variable and the floor."""
    from payhooks.operations.retention import MIN_RETENTION_DAYS

    error = refusal("PAYHOOKS_RETENTION_DAYS", value)
    assert error.variable == "PAYHOOKS_RETENTION_DAYS"
    assert f"at least {MIN_RETENTION_DAYS}" in str(error) and "--force" in str(error)
    assert Settings.from_env({"PAYHOOKS_RETENTION_DAYS": str(MIN_RETENTION_DAYS)}).retention_days


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
        refusal("PAYHOOKS_PAYU_SALTS", "a\n"),
        refusal("PAYHOOKS_PAYU_SALTS", '["a",\n'),
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


@pytest.mark.parametrize(
    "variable", ["PAYHOOKS_PHONEPE_WEBHOOK_CREDENTIALS", "PAYHOOKS_JUSPAY_WEBHOOK_CREDENTIALS"]
)
@pytest.mark.parametrize("value", ["nocolon", ":pw", "user:", '["user:pw", "nocolon"]'])
def test_a_webhook_credential_that_is_not_username_password_is_refused_at_start(variable, value):
    """Refused by the gateway's adapter: said as the settings are read, naming the variable,
    never as a traceback once the server builds its adapters."""
    error = refusal(variable, value)
    assert error.variable == variable and "username:password" in str(error)
    assert "nocolon" not in str(error)


def test_payu_served_without_its_api_credentials_is_warned_of_for_what_waits_for_them():
    """PayU's posts are signed, but its refund callbacks and a second post of a payment wait
    for its status API: with no PayU API credentials they waited, applied never, unwarned."""
    from payhooks.cli.commands import confirmation_warnings
    from payhooks.sim.keys import GatewaySecrets

    keys = GatewaySecrets()
    settings = Settings.from_env(
        {"PAYHOOKS_PAYU_MERCHANT_KEY": keys.payu_key, "PAYHOOKS_PAYU_SALTS": keys.payu_salt}
    )
    [said] = confirmation_warnings(settings)
    assert said.startswith("PayU: its refund callbacks (no hash signs them) and a second post")
    assert "PAYHOOKS_PAYU_API_KEY" in said and "PAYHOOKS_PAYU_API_SALT" in said


def test_a_gateway_whose_callbacks_need_its_api_is_warned_of_without_its_credentials():
    """PhonePe served with no API credentials: its callbacks would wait, applied never. The
    worker and ``payhooks serve`` say so at start, naming the variables to set."""
    from payhooks.cli.commands import confirmation_warnings, worker_warnings
    from payhooks.sim.keys import GatewaySecrets

    settings = Settings.from_env({"PAYHOOKS_PHONEPE_WEBHOOK_CREDENTIALS": GatewaySecrets().phonepe})
    [said] = confirmation_warnings(settings)
    assert "PhonePe's callbacks take effect only as its status API confirms them" in said
    assert "PAYHOOKS_PHONEPE_CLIENT_ID" in said and "PAYHOOKS_PHONEPE_CLIENT_SECRET" in said
    assert said in worker_warnings(settings)
    both = Settings.from_env(
        {
            "PAYHOOKS_PHONEPE_WEBHOOK_CREDENTIALS": GatewaySecrets().phonepe,
            "PAYHOOKS_PHONEPE_CLIENT_ID": "client",
            "PAYHOOKS_PHONEPE_CLIENT_SECRET": "secret",
        }
    )
    assert confirmation_warnings(both) == []
