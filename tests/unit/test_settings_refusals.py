"""Settings that used to be read silently wrong, or refused in words that repeated a password:
the SMTP URL's query, URL-like settings refused in fixed words, and timeouts PostgreSQL can
take."""

from __future__ import annotations

import pytest

from payhooks.service.config import Settings
from payhooks.service.errors import SettingError
from payhooks.service.mail import SmtpTarget

HOST = "mail.example.com:587"


def refusal(environ: dict[str, str]) -> SettingError:
    with pytest.raises(SettingError) as refused:
        Settings.from_env(environ)
    return refused.value


def chains_nothing(error: SettingError) -> bool:
    """No parser's exception rides along: with -v, its text would reach the traceback."""
    return error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


def smtp_refusal(url: str) -> SettingError:
    error = refusal({"PAYHOOKS_SMTP_URL": url})
    assert error.variable == "PAYHOOKS_SMTP_URL"
    return error


# The SMTP URL's query: starttls is read strictly, nothing else is read.


STARTTLS_VALUES = {"true": True, "TRUE": True, "1": True, "Yes": True}
STARTTLS_VALUES |= {"false": False, "False": False, "0": False, "no": False}


@pytest.mark.parametrize(("value", "expected"), STARTTLS_VALUES.items())
def test_starttls_takes_true_false_1_0_yes_no_in_any_case(value, expected):
    assert SmtpTarget.from_url(f"smtp://{HOST}?starttls={value}").starttls is expected


@pytest.mark.parametrize("value", ["on", "required", "ture", "", "2", "true,false"])
def test_an_unknown_starttls_value_is_refused_rather_than_read_as_false(value):
    error = smtp_refusal(f"smtp://{HOST}?starttls={value}")
    assert "starttls" in str(error) and "true or false" in str(error)


def test_starttls_given_twice_is_refused():
    assert "starttls" in str(smtp_refusal(f"smtp://{HOST}?starttls=true&starttls=false"))


@pytest.mark.parametrize("query", ["tls=true", "starttls=true&ssl=1", "STARTTLS=true", "x"])
def test_an_unknown_query_parameter_is_refused(query):
    assert "query" in str(smtp_refusal(f"smtp://{HOST}?{query}"))


def test_starttls_with_implicit_tls_is_refused():
    assert "smtps://" in str(smtp_refusal("smtps://mail.example.com?starttls=true"))


# URL-like settings are refused in fixed words: never the exception's text, never a part of
# the value.

SMTP_URLS_HIDING_A_SECRET = {
    "a slash in the password": "smtp://mailer:Sup3rS3cret/x@mail.example.com:587",
    "a question mark in the password": "smtp://mailer:Sup3rS3cret?x@mail.example.com:587",
    "a hash in the password": "smtp://mailer:Sup3rS3cret#x@mail.example.com:587",
    "a digit password and a slash": "smtp://mailer:4242/Sup3rS3cret@mail.example.com",
    "a port out of range": "smtp://Sup3rS3cret@mail.example.com:99999999",
    "an unclosed bracket": "smtp://mailer:Sup3rS3cret@[mail.example.com",
    "a password in the query": "smtp://mailer@mail.example.com?password=Sup3rS3cret",
    "a password as starttls": "smtp://mailer@mail.example.com?starttls=Sup3rS3cret",
    "a non-ASCII password": "smtp://mailer:Sup3rS3cret%C3%BC@mail.example.com",
}


@pytest.mark.parametrize("url", SMTP_URLS_HIDING_A_SECRET.values(), ids=SMTP_URLS_HIDING_A_SECRET)
def test_an_smtp_url_refusal_repeats_no_part_of_the_value(url):
    error = smtp_refusal(url)
    assert "Sup3rS3cret" not in str(error) and "4242" not in str(error)
    assert "smtp://[user:pass@]host[:port]" in str(error)
    assert chains_nothing(error)


DATABASE_URLS_HIDING_A_SECRET = {
    "a bad percent escape": "postgresql://root:p%ZZw0rdSecret@127.0.0.1:5432/test",
    "key=value with a spaced password": "host=127.0.0.1 user=root password correct horseSecret",
    "an unknown option": "host=127.0.0.1 passwrd=horseSecret",
    "another scheme": "mysql://root:horseSecret@127.0.0.1/test",
}


@pytest.mark.parametrize(
    "url", DATABASE_URLS_HIDING_A_SECRET.values(), ids=DATABASE_URLS_HIDING_A_SECRET
)
def test_a_database_url_libpq_cannot_read_is_refused_at_start_in_fixed_words(url):
    error = refusal({"DATABASE_URL": url})
    assert error.variable == "DATABASE_URL"
    assert "Secret" not in str(error) and "horse" not in str(error) and "ZZ" not in str(error)
    assert "postgresql://user:password@host:port/dbname" in str(error)
    assert chains_nothing(error)


@pytest.mark.parametrize(
    "url", ["postgresql://root:p%40ss@127.0.0.1:5432/test", "host=127.0.0.1 password='a b'"]
)
def test_a_database_url_libpq_can_read_is_kept_as_given(url):
    assert Settings.from_env({"DATABASE_URL": url}).database_url == url


# Timeouts: within PostgreSQL's integer range, and a lock timeout that can fire.

MILLISECONDS = [
    "PAYHOOKS_LOCK_TIMEOUT_MS",
    "PAYHOOKS_STATEMENT_TIMEOUT_MS",
    "PAYHOOKS_TRANSACTION_TIMEOUT_MS",
    "PAYHOOKS_POOL_TIMEOUT_MS",
]
RAISED_LIMITS = {  # so the lock timeout stays below the statement timeout
    "PAYHOOKS_STATEMENT_TIMEOUT_MS": "2147483647",
    "PAYHOOKS_LOCK_TIMEOUT_MS": "2000",
}


@pytest.mark.parametrize("variable", MILLISECONDS)
@pytest.mark.parametrize("value", ["2147483648", "3000000000", "9" * 5000])
def test_a_millisecond_setting_beyond_postgresql_integers_is_refused(variable, value):
    error = refusal({**RAISED_LIMITS, variable: value})
    assert error.variable == variable and "2147483647" in str(error)


@pytest.mark.parametrize("variable", MILLISECONDS)
def test_a_millisecond_setting_at_postgresql_largest_integer_is_read(variable):
    environ = {**RAISED_LIMITS, variable: "2147483647"}
    if variable == "PAYHOOKS_LOCK_TIMEOUT_MS":
        environ["PAYHOOKS_LOCK_TIMEOUT_MS"] = "2147483646"
    settings = Settings.from_env(environ)
    field = variable.removeprefix("PAYHOOKS_").lower()
    assert getattr(settings, field) == int(environ[variable])


@pytest.mark.parametrize(
    ("lock", "statement"), [("3000", "3000"), ("5000", "3000"), ("2000", "1000")]
)
def test_a_lock_timeout_not_below_the_statement_timeout_is_refused(lock, statement):
    error = refusal({"PAYHOOKS_LOCK_TIMEOUT_MS": lock, "PAYHOOKS_STATEMENT_TIMEOUT_MS": statement})
    assert error.variable == "PAYHOOKS_LOCK_TIMEOUT_MS"
    assert "PAYHOOKS_STATEMENT_TIMEOUT_MS" in str(error) and "\n" not in str(error)


def test_the_default_timeouts_are_accepted():
    settings = Settings.from_env({})
    assert settings.lock_timeout_ms < settings.statement_timeout_ms


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({"PAYHOOKS_PAYU_MERCHANT_KEY": "gtKFFx"}, "PAYHOOKS_PAYU_SALTS"),
        ({"PAYHOOKS_PAYU_SALTS": "eCwWELxi"}, "PAYHOOKS_PAYU_MERCHANT_KEY"),
    ],
)
def test_payu_half_configured_is_refused_naming_what_is_missing(given, missing):
    with pytest.raises(SettingError) as refused:
        Settings.from_env(given)
    assert refused.value.variable == missing and "needs both" in str(refused.value)


# A status API's base URL that already holds the path payhooks adds to it: every call went to
# /v1/v1/... and Razorpay's "no such route" answer was read as the refund's refusal.
DOUBLED_PATHS = [
    ("RAZORPAY", "https://api.razorpay.com/v1", "https://api.razorpay.com"),
    ("RAZORPAY", "https://api.razorpay.com/v1/", "https://api.razorpay.com"),
    ("CASHFREE", "https://sandbox.cashfree.com/pg", "https://sandbox.cashfree.com"),
    ("PAYU", "https://test.payu.in/merchant", "https://test.payu.in"),
    ("JUSPAY", "https://sandbox.juspay.in/orders", "https://sandbox.juspay.in"),
]


@pytest.mark.parametrize(("gateway", "given", "meant"), DOUBLED_PATHS)
def test_a_status_api_url_holding_the_path_payhooks_adds_is_refused_naming_the_base(
    gateway, given, meant
):
    from payhooks.gateways import credentials

    name = f"PAYHOOKS_{gateway}_API_URL"
    error = refusal({name: given})
    assert error.variable == name
    added = given.rstrip("/")[len(meant) :]
    assert f"ends in {added}, which payhooks adds itself: leave it off" in str(error)
    django_keys = {f"{gateway}_API_URL": given, "RAZORPAY_KEY_ID": "k",
                   "RAZORPAY_KEY_SECRET": "s", "CASHFREE_CLIENT_ID": "k",
                   "CASHFREE_API_SECRET": "s", "PAYU_API_KEY": "k", "PAYU_API_SALT": "s",
                   "JUSPAY_MERCHANT_ID": "k", "JUSPAY_API_KEY": "s"}  # fmt: skip
    with pytest.raises(ValueError, match=f"ends in {added}, which payhooks adds itself"):
        credentials(django_keys, prefix="")


@pytest.mark.parametrize(
    "given",
    ["https://user:secretpw@x?q=1", "https://user:secretpw@api.razorpay.com/v1", "secretpw"],
)
def test_a_status_api_url_refused_never_shows_what_was_given(given):
    """docs/configuration.md: a bad value is refused naming the variable, never its value. A
    base URL was shown as given, or as the base to give instead: with its password in it."""
    from payhooks.gateways import credentials

    name = "PAYHOOKS_RAZORPAY_API_URL"
    assert "secretpw" not in str(refusal({name: given}))
    env = {name: given, "PAYHOOKS_RAZORPAY_KEY_ID": "k", "PAYHOOKS_RAZORPAY_KEY_SECRET": "s"}
    with pytest.raises(ValueError, match=f"^{name} ") as refused:
        credentials(env)
    assert "secretpw" not in str(refused.value)


def test_a_status_api_url_with_a_path_of_its_own_is_taken():
    found = Settings.from_env({"PAYHOOKS_RAZORPAY_API_URL": "http://127.0.0.1:9000/razorpay",
                               "PAYHOOKS_RAZORPAY_KEY_ID": "k",
                               "PAYHOOKS_RAZORPAY_KEY_SECRET": "s"})  # fmt: skip
    assert [c.base_url for c in found.reconciled().values()] == ["http://127.0.0.1:9000/razorpay"]


@pytest.mark.parametrize(
    "url",
    ["api.razorpay.com", "ftp://api.razorpay.com", "https://", "https://x.in/?a=1", "http://[::1"],
)
def test_a_status_api_url_that_is_not_one_is_refused_by_every_reader_naming_it(url):
    """The service at start, and ``credentials()``, which ``payhooks.reconcile.run`` reads the
    environment of a FastAPI or Flask app with: every call to such a base would fail."""
    from payhooks.gateways import credentials

    name = "PAYHOOKS_RAZORPAY_API_URL"
    assert refusal({name: url}).variable == name
    env = {name: url, "PAYHOOKS_RAZORPAY_KEY_ID": "k", "PAYHOOKS_RAZORPAY_KEY_SECRET": "s"}
    with pytest.raises(ValueError, match=f"^{name} must be an http:// or https:// URL"):
        credentials(env)
