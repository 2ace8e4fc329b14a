"""The ``PAYHOOKS`` setting: what it serves, and the mistakes ``manage.py check`` reports at
start-up instead of a gateway meeting them in production."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from payhooks.django import conf
from payhooks.django.views import header_pairs
from payhooks.gateways.razorpay import Razorpay
from tests.django.conftest import PAYHOOKS


def test_each_gateway_with_secrets_is_served():
    assert sorted(conf.read(PAYHOOKS).adapters) == ["cashfree", "payu", "razorpay"]


def test_a_gateway_with_an_empty_list_is_not_served():
    assert list(conf.read({"RAZORPAY_WEBHOOK_SECRETS": []}).adapters) == []


@pytest.mark.parametrize("secret", ["Xk9,pQ2#mZ", "whsec_current"])
def test_a_secret_given_as_a_string_is_one_secret_exactly_as_written(secret):
    """As in the service's environment: a comma is part of the secret, never a separator."""
    adapter = conf.read({"RAZORPAY_WEBHOOK_SECRETS": secret}).adapters["razorpay"]
    assert isinstance(adapter, Razorpay) and adapter.secrets == (secret,)


def test_a_string_holding_a_json_array_lists_several_secrets():
    """So the service's environment variable can be passed on as it is."""
    adapter = conf.read({"RAZORPAY_WEBHOOK_SECRETS": '["new,1", "old"]'}).adapters["razorpay"]
    assert isinstance(adapter, Razorpay) and adapter.secrets == ("new,1", "old")


@pytest.mark.parametrize("value", ['["whsec_a", ', "[]", "[1]", " whsec", 42])
def test_a_string_that_is_not_one_secret_or_a_json_array_of_them_is_refused(value):
    with pytest.raises(ImproperlyConfigured, match="RAZORPAY_WEBHOOK_SECRETS"):
        conf.read({"RAZORPAY_WEBHOOK_SECRETS": value})


@pytest.mark.parametrize("secret", ["", " whsec", "whsec\n"])
def test_an_empty_or_padded_secret_is_refused(secret):
    with pytest.raises(ImproperlyConfigured, match="no spaces around"):
        conf.read({"CASHFREE_CLIENT_SECRETS": ["cfsk_ok", secret]})


@pytest.mark.parametrize("secrets", [["whsec\x00a"], ["ok", "\ud800"], "whsec\x1bx"])
def test_a_secret_that_is_not_plain_text_is_refused(secrets):
    """It could never verify a signature: every delivery would fail instead of the check."""
    with pytest.raises(ImproperlyConfigured, match="control character or a lone surrogate"):
        conf.read({"CASHFREE_CLIENT_SECRETS": secrets})


def test_a_misspelt_key_is_refused():
    with pytest.raises(ImproperlyConfigured, match="unknown keys: RAZORPAY_SECRETS"):
        conf.read({"RAZORPAY_SECRETS": ["whsec"]})


def test_payu_needs_its_key_and_salts_together():
    with pytest.raises(ImproperlyConfigured, match="together"):
        conf.read({"PAYU_MERCHANT_KEY": "gtKFFx"})


def test_a_negative_lock_timeout_is_refused():
    with pytest.raises(ImproperlyConfigured, match="milliseconds"):
        conf.read({"LOCK_TIMEOUT_MS": -1})


def test_manage_py_check_reports_a_bad_setting():
    with (
        override_settings(PAYHOOKS={"RAZORPAY_WEBHOOK_SECRETS": '["whsec",'}),
        pytest.raises(SystemCheckError, match=r"payhooks\.E001"),
    ):
        call_command("check")


CREDENTIALS = ["PHONEPE_WEBHOOK_CREDENTIALS", "JUSPAY_WEBHOOK_CREDENTIALS"]


@pytest.mark.parametrize("key", CREDENTIALS)
@pytest.mark.parametrize(
    "value", [["nocolon"], [":pw"], ["user:"], "nocolon", '["user:pw", "user:"]']
)
def test_manage_py_check_refuses_a_webhook_credential_that_is_not_username_password(key, value):
    """Refused by the gateway's adapter as it is built: said by the check naming the key,
    never a traceback."""
    with (
        override_settings(PAYHOOKS={**PAYHOOKS, key: value}),
        pytest.raises(SystemCheckError, match=rf'payhooks\.E001.*PAYHOOKS\["{key}"\]') as refused,
    ):
        call_command("check")
    assert "username:password" in str(refused.value) and "nocolon" not in str(refused.value)


@pytest.mark.parametrize(
    "value",
    [None, ["RAZORPAY_WEBHOOK_SECRETS"], "RAZORPAY_WEBHOOK_SECRETS=whsec"],
)
def test_manage_py_check_refuses_a_payhooks_setting_of_another_shape(value):
    with (
        override_settings(PAYHOOKS=value),
        pytest.raises(SystemCheckError, match=r"payhooks\.E001.*PAYHOOKS must be a dict"),
    ):
        call_command("check")


def test_a_key_that_is_not_a_name_is_refused_as_unknown():
    with pytest.raises(ImproperlyConfigured, match="unknown keys: 7, RAZORPAY_SECRETS"):
        conf.read({7: "x", "RAZORPAY_SECRETS": ["whsec"]})


@pytest.mark.parametrize("key", [("gtKFFx",), 42])
def test_payus_merchant_key_is_one_string(key):
    with pytest.raises(ImproperlyConfigured, match=r'PAYHOOKS\["PAYU_MERCHANT_KEY"\]'):
        conf.read({"PAYU_MERCHANT_KEY": key, "PAYU_SALTS": ["eCwWELxi"]})


API_KEYS = {"RAZORPAY_KEY_ID": "rzp_test_k", "RAZORPAY_KEY_SECRET": "s"}


@pytest.mark.parametrize(
    "url",
    ["api.razorpay.com", "ftp://api.razorpay.com", "https://", "https://x.in/?a=1", "http://[::1"],
)
def test_manage_py_check_refuses_a_status_api_url_that_is_not_one(url):
    """As the service refuses its ``PAYHOOKS_RAZORPAY_API_URL``: every call would fail."""
    with (
        override_settings(PAYHOOKS={**PAYHOOKS, **API_KEYS, "RAZORPAY_API_URL": url}),
        pytest.raises(SystemCheckError, match=r'payhooks\.E001.*PAYHOOKS\["RAZORPAY_API_URL"\]'),
    ):
        call_command("check")


def test_a_status_api_url_refused_in_django_is_named_by_its_key():
    with pytest.raises(ImproperlyConfigured) as refused:
        conf.read({**API_KEYS, "RAZORPAY_API_URL": "https://api.razorpay.com/v1"})
    assert "PAYHOOKS_RAZORPAY_API_URL" not in str(refused.value)
    assert 'PAYHOOKS["RAZORPAY_API_URL"]' in str(refused.value)


def test_manage_py_check_reports_a_handler_that_cannot_be_imported():
    with (
        override_settings(PAYHOOKS={**PAYHOOKS, "HANDLER": "orders.nowhere.hooks"}),
        pytest.raises(SystemCheckError, match=r"payhooks\.E004"),
    ):
        call_command("check")


def test_manage_py_check_warns_of_a_handler_registry_with_no_handler_registered():
    """Handlers written outside an app's ``webhooks.py`` and never imported: every delivery
    would be recorded ignored through the empty registry, never to be replayed."""
    with (
        override_settings(PAYHOOKS={**PAYHOOKS, "HANDLER": "tests.django.sql_hooks.unfilled"}),
        pytest.raises(SystemCheckError, match=r"payhooks\.W003.*no handler registered"),
    ):
        call_command("check", fail_level="WARNING")


def test_manage_py_check_passes_the_example_shops_setting():
    call_command("check")


# --- headers as Django keeps them ---------------------------------------------------------------

RAZORPAY = Razorpay(secrets=("whsec",))


def test_a_read_header_the_server_joined_is_split_back_into_its_copies():
    pairs = list(header_pairs({"X-Razorpay-Signature": "ab12,cd34"}, RAZORPAY))
    assert pairs == [("X-Razorpay-Signature", "ab12"), ("X-Razorpay-Signature", "cd34")]


def test_other_headers_keep_their_commas():
    pairs = list(header_pairs({"Accept": "a/b, c/d"}, RAZORPAY))
    assert pairs == [("Accept", "a/b, c/d")]


@pytest.mark.parametrize("name", ["LOCK_TIMEOUT_MS", "RECONCILE_AFTER_S", "RECONCILE_WINDOW_S",
                                  "RECONCILE_TIMEOUT_MS"])  # fmt: skip
def test_a_number_setting_given_words_says_it_is_not_a_number(name):
    with pytest.raises(ImproperlyConfigured, match=rf'PAYHOOKS\["{name}"\] is not a number'):
        conf.read({name: "soon"})


def test_a_number_setting_given_as_a_string_of_digits_says_to_write_an_integer():
    with pytest.raises(ImproperlyConfigured, match="an integer, not the string '900'"):
        conf.read({"RECONCILE_AFTER_S": "900"})


def test_the_docs_say_the_number_settings_are_integers():
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "django.md").read_text()
    assert 'are integers (`900`, not `"900"`)' in docs


@pytest.mark.parametrize("hours", [0, 1441, -1])
def test_the_settlement_margin_is_refused_outside_what_the_environment_takes(hours):
    """``SETTLEMENT_MARGIN_HOURS`` is 1 to 1440, as ``PAYHOOKS_SETTLEMENT_MARGIN_HOURS`` is."""
    from payhooks.service.config import SettingError, Settings

    with pytest.raises(ImproperlyConfigured, match=r"from 1 to 1440"):
        conf.read({"SETTLEMENT_MARGIN_HOURS": hours})
    with pytest.raises(SettingError, match=r"PAYHOOKS_SETTLEMENT_MARGIN_HOURS"):
        Settings.from_env({"PAYHOOKS_SETTLEMENT_MARGIN_HOURS": str(hours)})


@pytest.mark.parametrize("hours", [1, 1440])
def test_the_settlement_margin_takes_its_bounds_alike(hours):
    from payhooks.service.config import Settings

    assert conf.read({"SETTLEMENT_MARGIN_HOURS": hours}).settlement_margin_hours == hours
    found = Settings.from_env({"PAYHOOKS_SETTLEMENT_MARGIN_HOURS": str(hours)})
    assert found.settlement_margin_hours == hours
